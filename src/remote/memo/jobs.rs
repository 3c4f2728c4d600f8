//! Jobs: each job's action, remembered from one link of an output to the next by what it is made of
//! (this program, the compiler, the options, the linker's directory, the action's identity: its
//! command, modules and shard with no name lld gives per link, and the labels its inputs have in
//! the report), so that an unchanged job's shard is not rewritten and its action not built again
//! just to look it up. A job remembered is built whole only if it executes.
//!
//! It knows one text file per (directory, linker output) beside the history, holding the last
//! link's jobs only, and only jobs keyed by content, whose actions do not hold lld's per-link
//! names, each with its outputs' digests in that link's result (for the disk cache). A missing,
//! unreadable or stale file, or a line it cannot read, only means actions built again. It does
//! not read files or know servers.

use crate::job::outcome::Ingredients;
use crate::job::store::Kept;
use crate::job::util::digest::Words;
use crate::remote::action::{self, Common, JobAction};
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What a job's action is, as the lookup and the report need it (not what executing it needs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    action: String,
    size: i64,
    /// Each output's path in the action's result, in the job's order.
    outputs: Vec<String>,
    summaries_kept: Option<String>,
    /// Shared with the job's action and its report: not copied per job.
    ingredients: std::sync::Arc<Ingredients>,
    /// Each output's digest (hash, size) in the last link's result, when it had one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    results: Vec<(String, i64)>,
}

/// The actions remembered for one linker output, and those of this link.
#[derive(Default)]
pub struct RememberedJobs {
    /// Where they are kept (None: nothing is remembered).
    kept: Option<Kept>,
    /// What identifies this program's build: a rebuilt one may build other actions.
    program: String,
    known: HashMap<String, Entry>,
    /// This link's jobs that may be remembered, by key.
    now: Mutex<HashMap<String, Entry>>,
}

impl RememberedJobs {
    /// The actions kept in `kept` (nothing when None, unreadable, or when this program's own
    /// file cannot be found).
    pub fn load(kept: Option<Kept>) -> RememberedJobs {
        let Some(program) = program_identity() else {
            return RememberedJobs::default();
        };
        let known = (kept.as_ref())
            .and_then(Kept::read)
            .map(|text| parse(&text))
            .unwrap_or_default();
        RememberedJobs {
            kept,
            program,
            known,
            now: Mutex::default(),
        }
    }

    /// The key of a job's action, when the job can be remembered (it is keyed by content):
    /// `identity` is what its action is made of (`action::Prepared::identity`), which holds no
    /// name lld gives per link, and `labels` its inputs' labels in the report; the rest is what
    /// the link shares.
    pub fn key(&self, common: &Common, identity: &str, labels: &[String]) -> Option<String> {
        self.kept.as_ref()?;
        let mut h = Words::default();
        h.word(&crate::job::store::ACTIONS.header());
        h.word(&self.program);
        h.word(&common.cwd.to_string_lossy());
        let flags = (common.root_is_slash, common.by_content, common.cache);
        h.word(&format!("{flags:?}"));
        h.word(&common.identity);
        h.list(
            common
                .platform
                .iter()
                .flat_map(|(k, v)| [k.as_str(), v.as_str()]),
        );
        h.word(identity);
        // The report's labels of the job's inputs (remembered with it), which the identity
        // does not hold.
        h.list(labels.iter().map(String::as_str));
        Some(h.finish())
    }

    /// Whether jobs are remembered at all.
    pub fn remembers(&self) -> bool {
        self.kept.is_some()
    }

    /// The job remembered under `key`, as a JobAction that is not whole (`outputs` are where
    /// the job's outputs go here).
    pub fn get(&self, key: &str, outputs: &[PathBuf]) -> Option<JobAction> {
        let entry = self.known.get(key)?;
        if entry.outputs.len() != outputs.len() {
            return None;
        }
        crate::job::util::sync::lock(&self.now).insert(key.to_string(), entry.clone());
        Some(JobAction {
            action_digest: re::Digest {
                hash: entry.action.clone(),
                size_bytes: entry.size,
            },
            blobs: Vec::new(),
            outputs: entry
                .outputs
                .iter()
                .cloned()
                .zip(outputs.to_vec())
                .collect(),
            uses: Vec::new(),
            by_name: None,
            summaries_kept: entry.summaries_kept.clone(),
            ingredients: entry.ingredients.clone(),
            whole: false,
            last: entry
                .results
                .iter()
                .map(|(hash, size)| re::Digest {
                    hash: hash.clone(),
                    size_bytes: *size,
                })
                .collect(),
        })
    }

    /// Remembers `job`, built whole, under `key` (a job keyed by names is not remembered).
    pub fn remember(&self, key: String, job: &JobAction) {
        if job.by_name.is_some() {
            return;
        }
        let entry = Entry {
            action: job.action_digest.hash.clone(),
            size: job.action_digest.size_bytes,
            outputs: job
                .outputs
                .iter()
                .map(|(inside, _)| inside.clone())
                .collect(),
            summaries_kept: job.summaries_kept.clone(),
            ingredients: job.ingredients.clone(),
            results: Vec::new(),
        };
        crate::job::util::sync::lock(&self.now).insert(key, entry);
    }

    /// Remembers, for the job remembered under `key`, its outputs' digests in this link's
    /// result, in the job's order; whether that job is remembered.
    pub fn results(&self, key: &str, digests: &[re::Digest]) -> bool {
        let mut now = crate::job::util::sync::lock(&self.now);
        let Some(entry) = now.get_mut(key) else {
            return false;
        };
        entry.results = digests
            .iter()
            .map(|d| (d.hash.clone(), d.size_bytes))
            .collect();
        true
    }

    /// Every output's digest in the last link's results (each once, in hash order): what a
    /// relink most likely takes back from the action cache.
    pub fn last_outputs(&self) -> Vec<re::Digest> {
        let mut hashes: Vec<(&String, i64)> = (self.known.values())
            .flat_map(|e| e.results.iter().map(|(h, size)| (h, *size)))
            .collect();
        hashes.sort_unstable();
        hashes.dedup();
        (hashes.into_iter())
            .map(|(hash, size_bytes)| re::Digest {
                hash: hash.clone(),
                size_bytes,
            })
            .collect()
    }

    /// Forgets the job remembered under `key`: it was not what it is now.
    pub fn forget(&self, key: &str) {
        crate::job::util::sync::lock(&self.now).remove(key);
    }

    /// Keeps this link's actions for the next link of the output, when they differ from those
    /// it found; an error only says they could not be written.
    pub fn save(&self) -> std::io::Result<()> {
        let Some(kept) = &self.kept else {
            return Ok(());
        };
        let now = crate::job::util::sync::lock(&self.now);
        kept.keep(*now == self.known, || lines(&now))?;
        Ok(())
    }
}

/// This program's file, by its identity (device, inode, size, modification time): a build of
/// it with another action layout is another file.
fn program_identity() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(std::env::current_exe().ok()?).ok()?;
    Some(format!(
        "{} {} {} {}.{:09} {}",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        env!("CARGO_PKG_VERSION")
    ))
}

/// The header, then a line per job, `KEY JSON`, sorted.
fn lines(entries: &HashMap<String, Entry>) -> std::io::Result<Vec<String>> {
    let mut lines = entries
        .iter()
        .map(|(key, e)| Ok(format!("{key} {}", serde_json::to_string(e)?)))
        .collect::<Result<Vec<String>, serde_json::Error>>()?;
    lines.sort();
    Ok(lines)
}

/// The jobs of a file's lines.
fn parse(lines: &str) -> HashMap<String, Entry> {
    lines
        .par_lines()
        .filter_map(|line| {
            let (key, json) = line.split_once(' ')?;
            Some((key.to_string(), serde_json::from_str(json).ok()?))
        })
        .collect()
}

/// Where a job's outputs go here: each output against the linker's directory.
pub fn outputs_here(cwd: &Path, outputs: &[&str]) -> Vec<PathBuf> {
    outputs.iter().map(|o| action::absolute(cwd, o)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn common() -> Common {
        Common {
            cwd: "/b".into(),
            root_is_slash: false,
            identity: "clang".into(),
            platform: vec![],
            cache: true,
            by_content: true,
        }
    }

    fn known() -> RememberedJobs {
        RememberedJobs {
            kept: Some(Kept::new("/nowhere/x.actions", crate::job::store::ACTIONS)),
            program: "p".into(),
            ..RememberedJobs::default()
        }
    }

    #[test]
    fn the_key_is_the_action_s_identity_and_what_the_link_shares() {
        let k = known();
        let a = k.key(&common(), "identity 1", &[]).unwrap();
        assert_eq!(k.key(&common(), "identity 1", &[]).unwrap(), a);
        assert_ne!(k.key(&common(), "identity 2", &[]).unwrap(), a);
        let elsewhere = Common {
            cwd: "/c".into(),
            ..common()
        };
        assert_ne!(k.key(&elsewhere, "identity 1", &[]).unwrap(), a);
        let other_compiler = Common {
            identity: "clang 2".into(),
            ..common()
        };
        assert_ne!(k.key(&other_compiler, "identity 1", &[]).unwrap(), a);
        let other = RememberedJobs {
            program: "q".into(),
            ..known()
        };
        assert_ne!(other.key(&common(), "identity 1", &[]).unwrap(), a);
        // Other labels in the report: another key.
        let labels = ["the module a.o".to_string()];
        assert_ne!(k.key(&common(), "identity 1", &labels).unwrap(), a);
        // Nothing kept: no key.
        assert_eq!(
            RememberedJobs::default().key(&common(), "identity 1", &[]),
            None
        );
    }

    /// An entry of one output, with these summaries kept and ingredients.
    fn entry(summaries_kept: Option<&str>, ingredients: &[(&str, &str)]) -> Entry {
        Entry {
            action: "ab".into(),
            size: 12,
            outputs: vec!["dtlto-job.native.o".into()],
            summaries_kept: summaries_kept.map(String::from),
            ingredients: std::sync::Arc::new(
                ingredients
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            results: vec![("cd".into(), 3)],
        }
    }

    #[test]
    fn the_file_round_trips_and_bad_lines_are_dropped() {
        let entry = entry(Some("why"), &[("compiler", "c")]);
        let entries = HashMap::from([("k1".to_string(), entry.clone())]);
        let text: String = (lines(&entries).unwrap().iter())
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(parse(&text), entries);
        assert_eq!(parse(&format!("{text}k2 {{not json\nk3\n")), entries);
    }

    #[test]
    fn a_remembered_job_comes_back_not_whole_with_its_outputs_here() {
        let k = known();
        let entry = entry(None, &[]);
        let k = RememberedJobs {
            known: HashMap::from([("k".to_string(), entry.clone())]),
            ..k
        };
        let here = outputs_here(Path::new("/b"), &["m.1.9.native.o"]);
        let job = k.get("k", &here).unwrap();
        assert!(!job.whole && job.blobs.is_empty());
        assert_eq!(job.action_digest.hash, "ab");
        assert_eq!(
            (job.last[0].hash.as_str(), job.last[0].size_bytes),
            ("cd", 3),
            "the last result's digests come back"
        );
        assert_eq!(
            job.outputs,
            vec![(
                "dtlto-job.native.o".to_string(),
                PathBuf::from("/b/m.1.9.native.o")
            )]
        );
        // Two outputs where one was remembered: not this job.
        assert!(k.get("k", &[here[0].clone(), here[0].clone()]).is_none());
        assert!(k.get("other", &here).is_none());
        // What was used is kept for the next link, with this link's result.
        assert_eq!(crate::job::util::sync::lock(&k.now).get("k"), Some(&entry));
        let new = re::Digest {
            hash: "ef".into(),
            size_bytes: 4,
        };
        assert!(k.results("k", &[new]));
        assert!(!k.results("other", &[]));
        let now = crate::job::util::sync::lock(&k.now);
        assert_eq!(now["k"].results, vec![("ef".to_string(), 4)]);
        assert!(
            !now.contains_key("other"),
            "only a remembered job gets a result"
        );
    }
}
