//! Save: `--save` keeps a link's job file and every input its jobs read into a directory, laid out
//! as they are around the linker's directory, so that the jobs can run again later: lld removes the
//! index shards and the archive members it extracted when the link ends.
//!
//! It knows paths and the file system (hard links where it can, else copies); it does not know
//! jobs beyond their inputs. Absolute input paths stay where they are and are not saved.

use crate::job::files;
use crate::job::parse::JobFile;
use camino::{Utf8Path, Utf8PathBuf};
use std::path::Path;

/// What was saved, and where to run the jobs again from.
pub struct Saved {
    /// The directory holding the job file, from which its jobs run.
    pub run_dir: Utf8PathBuf,
    pub job_file: Utf8PathBuf,
    pub files: usize,
    pub bytes: u64,
    /// Files copied rather than hard linked (another file system).
    pub copied: usize,
}

/// The linker's directory relative to the deepest directory that holds it and every relative
/// input (`..` in an input climbs above it): ("sub/dir", 2) for inputs reaching two levels up.
fn climb(inputs: impl Iterator<Item = impl AsRef<str>>) -> usize {
    inputs
        .filter(|p| !p.as_ref().starts_with('/'))
        .map(|p| {
            let norm = files::identity(p.as_ref(), "");
            norm.split('/').take_while(|c| *c == "..").count()
        })
        .max()
        .unwrap_or(0)
}

/// Saves `job_file` (as read, from `cwd`) and its jobs' inputs into a new directory under `dir`.
pub fn save(
    dir: &Utf8Path,
    job_file: &Utf8Path,
    file: &JobFile<'_>,
    cwd: &Path,
) -> Result<Saved, String> {
    let up = climb(file.jobs.iter().flat_map(|j| j.inputs.iter()));
    // The linker's directory, relative to the saved tree's root: its last `up` components.
    let cwd_parts: Vec<String> = cwd
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if up > cwd_parts.len() {
        return Err(format!(
            "an input climbs {up} directories above {}",
            cwd.display()
        ));
    }
    let below_root: Utf8PathBuf = cwd_parts[cwd_parts.len() - up..].iter().collect();
    let name = job_file
        .file_name()
        .map(|n| n.trim_end_matches(".json").to_string())
        .unwrap_or_else(|| "jobs".into());
    let root = dir.join(&name);
    if root.exists() {
        return Err(format!("{root} exists already"));
    }
    let run_dir = root.join(&below_root);
    std::fs::create_dir_all(&run_dir).map_err(|e| format!("create {run_dir}: {e}"))?;
    let mut saved = Saved {
        job_file: run_dir.join(job_file.file_name().unwrap_or("jobs.json")),
        run_dir,
        files: 0,
        bytes: 0,
        copied: 0,
    };
    let mut put = |from: &Path, to: &Utf8Path| -> Result<(), String> {
        if to.exists() {
            return Ok(());
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("create {parent}: {e}"))?;
        }
        let size = std::fs::metadata(from)
            .map_err(|e| format!("read {}: {e}", from.display()))?
            .len();
        if std::fs::hard_link(from, to).is_err() {
            std::fs::copy(from, to).map_err(|e| format!("copy {} to {to}: {e}", from.display()))?;
            saved.copied += 1;
        }
        saved.files += 1;
        saved.bytes += size;
        Ok(())
    };
    let job_file_path = if job_file.is_absolute() {
        job_file.as_std_path().to_owned()
    } else {
        cwd.join(job_file)
    };
    put(&job_file_path, &saved.job_file.clone())?;
    let mut seen = rustc_hash::FxHashSet::default();
    for input in file.jobs.iter().flat_map(|j| j.inputs.iter()) {
        if input.starts_with('/') || !seen.insert(input.as_ref()) {
            continue;
        }
        let to = saved.run_dir.join(files::identity(input, "").as_ref());
        put(&cwd.join(input.as_ref()), &to)?;
    }
    // Outputs go where the jobs write them: their directories must be there.
    for out in file.jobs.iter().flat_map(|j| j.outputs.iter()) {
        if let Some(parent) = Utf8Path::new(files::identity(out, "").as_ref()).parent() {
            let parent = saved.run_dir.join(parent);
            std::fs::create_dir_all(&parent).map_err(|e| format!("create {parent}: {e}"))?;
        }
    }
    Ok(saved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_above_the_directory_keep_their_place() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path();
        std::fs::create_dir_all(base.join("w/lib")).unwrap();
        std::fs::create_dir_all(base.join("w/out")).unwrap();
        std::fs::write(base.join("w/lib/x.o"), "x").unwrap();
        std::fs::write(base.join("w/out/a.o"), "a").unwrap();
        std::fs::write(base.join("w/out/j.json"), "{}").unwrap();
        let file = crate::job::parse::parse(
            r#"{"common":{"linker_output":"p","args":["cc"]},
                "jobs":[{"args":[],"inputs":["a.o","../lib/x.o","./a.o"],"outputs":["o"]}]}"#,
        )
        .unwrap();
        let dir = Utf8PathBuf::from_path_buf(base.join("saved")).unwrap();
        let saved = save(&dir, Utf8Path::new("j.json"), &file, &base.join("w/out")).unwrap();
        assert_eq!(saved.run_dir, dir.join("j/out"));
        assert_eq!(saved.files, 3, "job file, a.o once, x.o");
        assert_eq!(std::fs::read_to_string(dir.join("j/lib/x.o")).unwrap(), "x");
        assert_eq!(std::fs::read_to_string(dir.join("j/out/a.o")).unwrap(), "a");
        assert!(dir.join("j/out/j.json").is_file());
        assert!(save(&dir, Utf8Path::new("j.json"), &file, &base.join("w/out")).is_err());
    }
}
