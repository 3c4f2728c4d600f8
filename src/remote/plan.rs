//! Plan: every job of a link as an action, on every core: first each input file read once
//! (its digest, from the memo when the file is unchanged) and each job's index shard read
//! whole, then each job's action (`action`; remembered, `memo::jobs`, when nothing it is built
//! from changed), merged in job order.
//!
//! It reads files; it does not talk to a server or know the compiler's identity until the
//! second step.

use super::action::{self, Common, JobAction};
use super::memo::inputs::InputDigests;
use super::memo::jobs::RememberedJobs;
use crate::job::parse::{Job, JobFile};
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use rayon::prelude::*;
use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Each job as an action (None for a job that runs here), and every input file's digest.
pub struct ActionPlan {
    pub jobs: Vec<Option<JobAction>>,
    /// Each input file's digest, and where it is.
    pub files: HashMap<String, (re::Digest, PathBuf)>,
    /// Each job's input files, by digest.
    pub inputs: Vec<Vec<String>>,
    /// What building the remembered jobs whole takes.
    pub later: Later,
    /// Each job's key among the remembered actions (`memo::jobs`), when it has one.
    pub keys: Vec<Option<String>>,
}

/// A file as read: its digest and where it was read (where the kernel finds it, through any
/// symlink before a `..`), or why it could not be.
type Found = Result<(re::Digest, PathBuf), String>;

/// A job's index shard: its name, and its bytes or why they could not be read.
type Shard = (String, Result<Vec<u8>, String>);

/// The link's files, read: the first step.
pub struct Read {
    /// Each input but the jobs' own shards, by its lexical path.
    files: HashMap<PathBuf, Found>,
    /// Each job's index shard (`OUTPUT.thinlto.bc`, when among its inputs): its name and bytes.
    shards: Vec<Option<Shard>>,
}

impl Read {
    /// What was found of the files, without the shards: what a later read takes as found.
    pub fn files_only(&self) -> Read {
        Read {
            files: self.files.clone(),
            shards: Vec::new(),
        }
    }
}

/// The job's index shard, whose module table a content-keyed action rewrites, when the job
/// has one output and its shard among its inputs.
fn shard_name(inputs: &[&str], outputs: &[&str]) -> Option<String> {
    let [out] = outputs else { return None };
    let name = crate::job::files::shard_name(out);
    inputs.contains(&name.as_str()).then_some(name)
}

/// Reads every input of `file`'s jobs once, on every core; `seen` holds what an earlier look
/// found of them (the memo looks at the others itself), `before` what an earlier read of some
/// of them found (the jobs started ahead of the rest, `lead`).
pub fn read(
    file: &JobFile<'_>,
    cwd: &Path,
    memo: &InputDigests,
    seen: &crate::job::validate::Seen,
    stop: &std::sync::atomic::AtomicBool,
    before: Option<&Read>,
) -> Read {
    // Once `stop` is set (the server cannot be used), no more file is read: what is read is
    // thrown away.
    let stopped = || stop.load(std::sync::atomic::Ordering::Relaxed);
    // Each input as written once, in job order (most are many jobs' imports), then each file
    // once, where it is first written.
    let mut listed: rustc_hash::FxHashSet<&str> = Default::default();
    let mut wanted: HashMap<PathBuf, (PathBuf, &str)> = HashMap::new();
    let mut shards = Vec::with_capacity(file.jobs.len());
    for job in &file.jobs {
        let [_, inputs, outputs] = words(job);
        let shard = shard_name(&inputs, &outputs);
        for input in inputs.iter().filter(|i| Some(**i) != shard.as_deref()) {
            if listed.insert(input) {
                wanted
                    .entry(action::absolute(cwd, input))
                    .or_insert_with(|| (cwd.join(input), input));
            }
        }
        shards.push(shard);
    }
    let files = wanted
        .into_par_iter()
        .map(|(path, (there, input))| {
            if let Some(found) = before.and_then(|b| b.files.get(&path)) {
                return (path, found.clone());
            }
            if stopped() {
                return (path, Err("not read: the server cannot be used".to_string()));
            }
            let found = memo
                .digest(&there, seen.get(input))
                .map(|d| (d, there))
                .map_err(|e| e.to_string());
            (path, found)
        })
        .collect();
    let shards = shards
        .into_par_iter()
        .map(|name| {
            name.filter(|_| !stopped())
                .map(|name| read_shard(cwd, name))
        })
        .collect();
    Read { files, shards }
}

/// The shard `name`, read in the linker's directory `cwd`.
fn read_shard(cwd: &Path, name: String) -> Shard {
    let bytes = std::fs::read(cwd.join(&name)).map_err(|e| e.to_string());
    (name, bytes)
}

/// A job's command, inputs and outputs, word by word.
fn words<'a>(job: &'a Job<'_>) -> [Vec<&'a str>; 3] {
    [
        job.command.words().map(|w| w.as_ref()).collect(),
        job.inputs.iter().map(|s| s.as_ref()).collect(),
        job.outputs.iter().map(|s| s.as_ref()).collect(),
    ]
}

/// One job's action, or why it runs here; and the files it uses, by digest (none for a job
/// remembered, not whole).
pub type Built = Result<(JobAction, Vec<(re::Digest, PathBuf)>), String>;

/// What building a remembered job whole takes, should it execute: each input file as read, and
/// the job file.
pub struct Later {
    common: Common,
    cwd: PathBuf,
    files: HashMap<PathBuf, Found>,
    file: Arc<JobFile<'static>>,
    /// The actions remembered, saved once the link is over.
    pub known: Arc<RememberedJobs>,
}

impl Later {
    /// Job `index`'s action built whole, with the files it uses, its shard read again; an
    /// error when it is not the action remembered under `key` (a file changed while the link
    /// ran).
    pub fn build(&self, index: usize, key: &str, remembered: &re::Digest) -> Built {
        let [argv, inputs, outputs] = words(&self.file.jobs[index]);
        let shard = shard_name(&inputs, &outputs).map(|name| read_shard(&self.cwd, name));
        let job = [argv.as_slice(), &inputs, &outputs];
        let (built, _) = build_one(&self.common, None, job, &self.cwd, &self.files, shard);
        let built = built?;
        if built.0.action_digest != *remembered {
            // Not remembered for the next link.
            self.known.forget(key);
            return Err(format!(
                "it is not the action remembered from the last link (its index shard {} or an \
                 input changed while the link ran, or the remembered actions are wrong)",
                shard_name(&inputs, &outputs).unwrap_or_default()
            ));
        }
        Ok(built)
    }
}

impl ActionPlan {
    /// The actions of `file`'s jobs from what `read` found, and, for each job, why it runs here
    /// instead (None: it can run remotely). A job `known` remembers is not built whole.
    pub fn build(
        common: &Common,
        known: Arc<RememberedJobs>,
        file: &Arc<JobFile<'static>>,
        cwd: &Path,
        read: Read,
    ) -> (ActionPlan, Vec<Option<String>>) {
        // Each raw shard is dropped once its job's action is built.
        let built: Vec<(Built, Option<String>)> =
            (file.jobs.par_iter().zip(read.shards.into_par_iter()))
                .map(|(job, shard)| {
                    let [argv, inputs, outputs] = words(job);
                    let words = [argv.as_slice(), &inputs, &outputs];
                    build_one(common, Some(&known), words, cwd, &read.files, shard)
                })
                .collect();
        let mut files = HashMap::new();
        let mut why = Vec::with_capacity(built.len());
        let mut jobs = Vec::with_capacity(built.len());
        let mut inputs = Vec::with_capacity(built.len());
        let mut remembered = false;
        let mut keys = Vec::with_capacity(built.len());
        for (b, key) in built {
            keys.push(key);
            match b {
                Ok((job, used)) => {
                    remembered |= !job.whole;
                    inputs.push(used.iter().map(|(d, _)| d.hash.clone()).collect());
                    for (d, there) in used {
                        files.insert(d.hash.clone(), (d, there));
                    }
                    why.push(None);
                    jobs.push(Some(job));
                }
                Err(reason) => {
                    inputs.push(Vec::new());
                    why.push(Some(reason));
                    jobs.push(None);
                }
            }
        }
        let later = Later {
            common: common.clone(),
            cwd: cwd.to_path_buf(),
            files: if remembered {
                read.files
            } else {
                HashMap::new()
            },
            file: file.clone(),
            known,
        };
        let actions = ActionPlan {
            jobs,
            files,
            inputs,
            later,
            keys,
        };
        (actions, why)
    }
}

/// One job's action: remembered by `known` when it has it, else built whole (and then
/// remembered by it); and its key among the remembered, when it has one.
fn build_one(
    common: &Common,
    known: Option<&RememberedJobs>,
    [argv, inputs, outputs]: [&[&str]; 3],
    cwd: &Path,
    files: &HashMap<PathBuf, Found>,
    shard: Option<Shard>,
) -> (Built, Option<String>) {
    // The shard's own entry: where it is, its bytes, and their digest once asked for (a job
    // remembered needs none).
    let shard =
        shard.map(|(name, bytes)| (action::absolute(cwd, &name), name, bytes, OnceCell::new()));
    let find = |path: &Path| -> Option<Result<&(re::Digest, PathBuf), &String>> {
        match &shard {
            Some((at, name, bytes, found)) if at == path => {
                let found: &Found = found.get_or_init(|| {
                    (bytes.as_ref())
                        .map(|b| (super::reapi::digest_of(b), cwd.join(name)))
                        .map_err(String::clone)
                });
                Some(found.as_ref())
            }
            _ => files.get(path).map(Result::as_ref),
        }
    };
    // Each input that could not be read (the shard not hashed for it).
    let problem = |path: &Path| -> Option<&String> {
        match &shard {
            Some((at, _, bytes, _)) if at == path => bytes.as_ref().err(),
            _ => files.get(path)?.as_ref().err(),
        }
    };
    if let Some((input, e)) =
        (inputs.iter()).find_map(|input| Some((input, problem(&action::absolute(cwd, input))?)))
    {
        return (Err(format!("read its input {input}: {e}")), None);
    }
    let shard_bytes = shard
        .as_ref()
        .and_then(|(_, _, bytes, _)| bytes.as_deref().ok());
    let digest = |p: &Path| match find(p) {
        Some(Ok((d, _))) => d.clone(),
        _ => re::Digest::default(),
    };
    let words = [argv, inputs, outputs];
    let prepared = action::prepare(common, words, &digest, shard_bytes);
    // A job remembered by what its action is made of is not built (its shard not rewritten).
    let known = known.filter(|k| k.remembers());
    let key = known
        .zip(prepared.identity())
        .and_then(|(known, identity)| {
            let labels = action::labels(inputs, outputs);
            Some((known, known.key(common, &identity, &labels)?))
        });
    if let Some((known, key)) = &key {
        if let Some(job) = known.get(key, &super::memo::jobs::outputs_here(cwd, outputs)) {
            return (Ok((job, Vec::new())), Some(key.clone()));
        }
    }
    let built = match prepared.build(common, words, &digest) {
        Ok(built) => built,
        Err(e) => return (Err(e), None),
    };
    let key = key.map(|(known, key)| {
        known.remember(key.clone(), &built);
        key
    });
    let used = built
        .uses
        .iter()
        .filter_map(|p| match find(p) {
            Some(Ok(found)) => Some(found.clone()),
            _ => None,
        })
        .collect();
    (Ok((built, used)), key)
}
