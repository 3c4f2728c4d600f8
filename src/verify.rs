//! Verify: decides, per job, whether it really produced its outputs.
//!
//! It knows the status each job left and the files on disk (a zero exit with an empty object is
//! a failure: clang-22 does that when an import is missing), and enough of ELF to see a truncated
//! object; it does not run or print anything.

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
    /// Outputs that are empty or cut short, each with what is wrong.
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
                match output_problem(&dir.join(out)) {
                    None => {}
                    Some(Problem::Missing) => missing.push(out.clone()),
                    Some(Problem::Bad(_)) => empty.push(out.clone()),
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

/// What is wrong with an output file.
#[derive(Debug, PartialEq, Eq)]
pub enum Problem {
    Missing,
    /// Empty, or an ELF object whose section headers lie past its end.
    Bad(&'static str),
}

impl Problem {
    pub fn describe(&self, path: &str) -> String {
        match self {
            Problem::Missing => format!("exit status 0, but it did not write {path}"),
            Problem::Bad(what) => format!("exit status 0, but it wrote {what} {path}"),
        }
    }
}

/// Checks one output: it must exist, be non-empty and, if it is an ELF object, be whole.
pub fn output_problem(path: &Path) -> Option<Problem> {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else {
        return Some(Problem::Missing);
    };
    let len = file.metadata().map_or(0, |m| m.len());
    if len == 0 {
        return Some(Problem::Bad("an empty"));
    }
    // The ELF header is all that is needed: 64 bytes at most.
    let mut header = Vec::with_capacity(64);
    if file.by_ref().take(64).read_to_end(&mut header).is_err() || elf_truncated(&header, len) {
        return Some(Problem::Bad("a truncated"));
    }
    None
}

/// An ELF file of `len` bytes is cut short when its header or its section header table lies
/// past its end; `b` is its start (the header).
fn elf_truncated(b: &[u8], len: u64) -> bool {
    if !b.starts_with(b"\x7fELF") {
        return false;
    }
    let (is64, little) = match (b.get(4), b.get(5)) {
        (Some(1), Some(1)) => (false, true),
        (Some(1), Some(2)) => (false, false),
        (Some(2), Some(1)) => (true, true),
        (Some(2), Some(2)) => (true, false),
        _ => return true,
    };
    let read = |at: usize, len: usize| -> Option<u64> {
        let s = b.get(at..at + len)?;
        let mut v = 0u64;
        for i in 0..len {
            let byte = if little { s[len - 1 - i] } else { s[i] };
            v = (v << 8) | u64::from(byte);
        }
        Some(v)
    };
    let fields = if is64 {
        (read(0x28, 8), read(0x3A, 2), read(0x3C, 2))
    } else {
        (read(0x20, 4), read(0x2E, 2), read(0x30, 2))
    };
    match fields {
        (Some(shoff), Some(shentsize), Some(shnum)) => {
            shoff.saturating_add(shentsize.saturating_mul(shnum)) > len
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 little-endian header whose section headers end at `end`.
    fn elf64(len: usize, shoff: u64, shnum: u16) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        b[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        b[0x3C..0x3E].copy_from_slice(&shnum.to_le_bytes());
        b
    }

    #[test]
    fn outputs_are_checked_for_presence_emptiness_and_truncation() {
        let dir = tempfile::tempdir().unwrap();
        type Case = (&'static str, Option<Vec<u8>>, Option<Problem>);
        let cases: &[Case] = &[
            ("missing.o", None, Some(Problem::Missing)),
            ("empty.o", Some(vec![]), Some(Problem::Bad("an empty"))),
            ("whole.o", Some(elf64(64 + 2 * 64, 64, 2)), None),
            (
                "cut.o",
                Some(elf64(64 + 64, 64, 2)),
                Some(Problem::Bad("a truncated")),
            ),
            (
                "header-cut.o",
                Some(b"\x7fELF\x02\x01".to_vec()),
                Some(Problem::Bad("a truncated")),
            ),
            ("notes.yaml", Some(b"--- text".to_vec()), None),
        ];
        for (name, contents, want) in cases {
            let p = dir.path().join(name);
            if let Some(c) = contents {
                std::fs::write(&p, c).unwrap();
            }
            assert_eq!(&output_problem(&p), want, "{name}");
        }
    }
}
