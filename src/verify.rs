//! Verify: decides, per job, whether it really produced its outputs.
//!
//! It knows the status each job left and the files on disk (a zero exit with an empty object is
//! a failure: clang-22 does that when an import is missing); it does not run or print anything.

use crate::job::{self, Status};
use crate::parse::JobFile;
use camino::Utf8Path;
use std::path::Path;

/// What became of one job.
#[derive(Debug)]
pub struct Outcome {
    pub index: usize,
    /// None when the job never finished (not started, or the launcher was killed).
    pub status: Option<Status>,
    pub stderr: String,
    pub missing: Vec<String>,
    pub empty: Vec<String>,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.status.as_ref().is_some_and(Status::success)
            && self.missing.is_empty()
            && self.empty.is_empty()
    }
}

/// Checks every job of the file against what the run left in `state_dir` and in `dir`.
pub fn check(file: &JobFile, state_dir: &Utf8Path, dir: &Path) -> Vec<Outcome> {
    file.jobs
        .iter()
        .enumerate()
        .map(|(index, j)| {
            let mut missing = Vec::new();
            let mut empty = Vec::new();
            for out in &j.outputs {
                match std::fs::metadata(dir.join(out)) {
                    Ok(m) if m.len() == 0 => empty.push(out.clone()),
                    Ok(_) => {}
                    Err(_) => missing.push(out.clone()),
                }
            }
            Outcome {
                index,
                status: job::read_status(state_dir, index),
                stderr: job::read_stderr(state_dir, index),
                missing,
                empty,
            }
        })
        .collect()
}

/// Removes the outputs of failed jobs, so no later link picks up a partial object.
pub fn remove_failed_outputs(file: &JobFile, outcomes: &[Outcome], dir: &Path) {
    for o in outcomes.iter().filter(|o| !o.ok()) {
        for out in &file.jobs[o.index].outputs {
            let _ = std::fs::remove_file(dir.join(out));
        }
    }
}
