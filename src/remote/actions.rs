//! Actions: every job of a link as an action, on every core: first each input file read once
//! (its digest, from the memo when the file is unchanged) and each job's index shard read
//! whole, then each job's action (action.rs), merged in job order.
//!
//! It reads files; it does not talk to a server or know the compiler's identity until the
//! second step.

use super::action::{self, Common, JobAction};
use super::digests::Memo;
use crate::job::parse::JobFile;
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Each job as an action (None for a job that runs here), and every input file's digest.
pub struct Actions {
    pub jobs: Vec<Option<JobAction>>,
    /// Each input file's digest, and where it is.
    pub files: HashMap<String, (re::Digest, PathBuf)>,
    /// Each job's input files, by digest.
    pub inputs: Vec<Vec<String>>,
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

/// The job's index shard, whose module table a content-keyed action rewrites, when the job
/// has one output and its shard among its inputs.
fn shard_name(inputs: &[&str], outputs: &[&str]) -> Option<String> {
    let [out] = outputs else { return None };
    let name = format!("{out}.thinlto.bc");
    inputs.contains(&name.as_str()).then_some(name)
}

/// Reads every input of `file`'s jobs once, on every core.
pub fn read(file: &JobFile<'_>, cwd: &Path, memo: &Memo) -> Read {
    let mut wanted: HashMap<PathBuf, PathBuf> = HashMap::new();
    let mut shards = Vec::with_capacity(file.jobs.len());
    for job in &file.jobs {
        let inputs: Vec<&str> = job.inputs.iter().map(|s| s.as_ref()).collect();
        let outputs: Vec<&str> = job.outputs.iter().map(|s| s.as_ref()).collect();
        let shard = shard_name(&inputs, &outputs);
        for input in inputs.iter().filter(|i| Some(**i) != shard.as_deref()) {
            wanted
                .entry(action::absolute(cwd, input))
                .or_insert_with(|| cwd.join(input));
        }
        shards.push(shard);
    }
    let files = wanted
        .into_par_iter()
        .map(|(path, there)| {
            let found = memo
                .digest(&there)
                .map(|d| (d, there))
                .map_err(|e| e.to_string());
            (path, found)
        })
        .collect();
    let shards = shards
        .into_par_iter()
        .map(|name| {
            name.map(|name| {
                let bytes = std::fs::read(cwd.join(&name)).map_err(|e| e.to_string());
                (name, bytes)
            })
        })
        .collect();
    Read { files, shards }
}

/// One job's action, or why it runs here; and the files it uses, by digest.
type Built = Result<(JobAction, Vec<(re::Digest, PathBuf)>), String>;

impl Actions {
    /// The actions of `file`'s jobs from what `read` found, and, for each job, why it runs here
    /// instead (None: it can run remotely).
    pub fn build(
        common: &Common,
        file: &JobFile<'_>,
        cwd: &Path,
        read: Read,
    ) -> (Actions, Vec<Option<String>>) {
        // Each raw shard is dropped once its job's action is built.
        let built: Vec<Built> = (file.jobs.par_iter().zip(read.shards.into_par_iter()))
            .map(|(job, shard)| build_one(common, job, cwd, &read.files, shard))
            .collect();
        let mut files = HashMap::new();
        let mut why = Vec::with_capacity(built.len());
        let mut jobs = Vec::with_capacity(built.len());
        let mut inputs = Vec::with_capacity(built.len());
        for b in built {
            match b {
                Ok((job, used)) => {
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
        let actions = Actions {
            jobs,
            files,
            inputs,
        };
        (actions, why)
    }
}

fn build_one(
    common: &Common,
    job: &crate::job::parse::Job<'_>,
    cwd: &Path,
    files: &HashMap<PathBuf, Found>,
    shard: Option<Shard>,
) -> Built {
    let inputs: Vec<&str> = job.inputs.iter().map(|s| s.as_ref()).collect();
    let outputs: Vec<&str> = job.outputs.iter().map(|s| s.as_ref()).collect();
    // The shard's own entry: its digest, where it is, and its bytes.
    let shard = shard.map(|(name, bytes)| {
        let found = bytes
            .as_ref()
            .map(|b| (action::digest_of(b), cwd.join(&name)))
            .map_err(String::clone);
        (action::absolute(cwd, &name), found, bytes)
    });
    let find = |path: &Path| -> Option<Result<&(re::Digest, PathBuf), &String>> {
        match &shard {
            Some((at, found, _)) if at == path => Some(found.as_ref()),
            _ => files.get(path).map(Result::as_ref),
        }
    };
    if let Some((input, e)) =
        inputs
            .iter()
            .find_map(|input| match find(&action::absolute(cwd, input)) {
                Some(Err(e)) => Some((input, e)),
                _ => None,
            })
    {
        return Err(format!("read its input {input}: {e}"));
    }
    let argv: Vec<&str> = job.command.words().map(|w| w.as_ref()).collect();
    let shard_bytes = shard
        .as_ref()
        .and_then(|(_, _, bytes)| bytes.as_deref().ok());
    let built = action::build(
        common,
        &argv,
        &inputs,
        &outputs,
        &|p: &Path| match find(p) {
            Some(Ok((d, _))) => d.clone(),
            _ => re::Digest::default(),
        },
        shard_bytes,
    )?;
    let used = built
        .uses
        .iter()
        .filter_map(|p| match find(p) {
            Some(Ok(found)) => Some(found.clone()),
            _ => None,
        })
        .collect();
    Ok((built, used))
}
