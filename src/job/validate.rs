//! Validate: checks a parsed job file can be run, and orders its jobs costliest first.
//!
//! It knows that jobs must be independent, that their inputs must exist (relative to the
//! linker's directory), and what no build file can carry; it does not render or run anything.

use crate::job::files;
use crate::job::parse::JobFile;
use rustc_hash::{FxHashMap, FxHashSet};
use std::path::Path;

/// Rejects what no build file and no launcher can carry (a line break or NUL in a path or an
/// argument), two jobs writing one file (`a.o` and `./a.o` are one file), and a job reading
/// another job's output. `cwd` is the linker's directory, for absolute paths into it.
pub fn check(file: &JobFile<'_>, cwd: &str) -> Result<(), String> {
    // JSON cannot hold a line break or NUL in a string unescaped, so a string borrowed from the
    // text (one that had no escape) cannot hold one: only owned strings are looked at.
    let breaks =
        |field: &str,
         i: usize,
         words: &mut dyn Iterator<Item = (usize, &crate::job::parse::Str)>| {
            for (k, w) in words {
                if matches!(w, std::borrow::Cow::Borrowed(_)) || !has_break(w) {
                    continue;
                }
                if let Some(c) = w.bytes().find(|b| matches!(b, b'\n' | b'\r' | b'\0')) {
                    let what = match c {
                        b'\n' => "a newline",
                        b'\r' => "a carriage return",
                        _ => "a NUL byte",
                    };
                    return Err(format!(
                        "jobs[{i}].{field}[{k}]: {w:?} holds {what}, which no build file can carry"
                    ));
                }
            }
            Ok(())
        };
    let mut common_checked: Option<&std::sync::Arc<[crate::job::parse::Str]>> = None;
    for (i, job) in file.jobs.iter().enumerate() {
        let common = &job.command.common;
        // Jobs share their common words: check them once.
        if !common_checked.is_some_and(|c| std::sync::Arc::ptr_eq(c, common)) {
            breaks("args", i, &mut common.iter().enumerate())?;
            common_checked = Some(common);
        }
        let skip = common.len();
        let own = &mut job
            .command
            .own
            .iter()
            .enumerate()
            .map(|(k, w)| (k + skip, w));
        breaks("args", i, own)?;
        breaks("inputs", i, &mut job.inputs.iter().enumerate())?;
        breaks("outputs", i, &mut job.outputs.iter().enumerate())?;
    }
    // Only looked up, never iterated: the first clash in job order is reported.
    let mut writers: FxHashMap<std::borrow::Cow<'_, str>, (usize, usize)> = FxHashMap::default();
    writers.reserve(file.jobs.len());
    for (i, job) in file.jobs.iter().enumerate() {
        for (k, out) in job.outputs.iter().enumerate() {
            if let Some((first, fk)) = writers.insert(files::identity(out, cwd), (i, k)) {
                let other = &file.jobs[first].outputs[fk];
                let same = if other == out {
                    String::new()
                } else {
                    format!(" ({other:?} names the same file)")
                };
                return Err(format!(
                    "jobs[{i}].outputs[{k}]: {out:?} is also an output of jobs[{first}]{same}"
                ));
            }
        }
    }
    for (i, job) in file.jobs.iter().enumerate() {
        for input in &job.inputs {
            if let Some((w, _)) = writers.get(&files::identity(input, cwd)) {
                return Err(format!(
                    "jobs[{i}]: input {input:?} is the output of jobs[{w}]; backend jobs must be independent"
                ));
            }
        }
    }
    Ok(())
}

/// What the file system says of the jobs' inputs, from one look at each distinct path.
pub struct Inputs {
    /// Every input that does not exist, as (job index, path), in job order.
    pub missing: Vec<(usize, String)>,
    /// Bytes each job reads (module, shard, imports, shared inputs).
    pub bytes: Vec<u64>,
    /// Bytes of each job's own module (its first input): the estimate of its cost. A backend
    /// compile's time follows the module it compiles, not its imports: on OpenSSL's 1,049 jobs
    /// on 64 workers, longest first by this estimate comes within 1% of longest first by the
    /// jobs' real times, and by all the bytes they read, 12% (bench/README.md).
    pub module_bytes: Vec<u64>,
    /// What that look found of each input that exists, by its path as written, when asked to
    /// keep it (a remote link's remembered digests are found by it without a second look).
    pub seen: Seen,
}

/// Each input's metadata, by its path as written.
pub type Seen = FxHashMap<String, std::fs::Metadata>;

/// Looks at every input once, on every core: whether it exists, and how big it is; and keeps
/// what it found of each, when `keep`.
pub fn stat_inputs(file: &JobFile<'_>, dir: &Path, keep: bool) -> Inputs {
    use rayon::prelude::*;
    // Each distinct input, numbered in job order.
    let mut number: FxHashMap<&str, usize> = FxHashMap::default();
    let mut distinct = Vec::new();
    for input in file.jobs.iter().flat_map(|j| &j.inputs) {
        number.entry(input.as_ref()).or_insert_with(|| {
            distinct.push(input.as_ref());
            distinct.len() - 1
        });
    }
    let found: Vec<Option<std::fs::Metadata>> = distinct
        .par_iter()
        .map(|input| std::fs::metadata(dir.join(input)).ok())
        .collect();
    let mut missing = Vec::new();
    let mut bytes = Vec::with_capacity(file.jobs.len());
    let mut module_bytes = Vec::with_capacity(file.jobs.len());
    for (i, job) in file.jobs.iter().enumerate() {
        let (mut total, mut module) = (0, 0);
        for (k, input) in job.inputs.iter().enumerate() {
            match &found[number[input.as_ref()]] {
                Some(m) if k == 0 => (total, module) = (total + m.len(), m.len()),
                Some(m) => total += m.len(),
                None => missing.push((i, input.to_string())),
            }
        }
        bytes.push(total);
        module_bytes.push(module);
    }
    let seen = if keep {
        (distinct.iter().zip(found))
            .filter_map(|(input, m)| Some((input.to_string(), m?)))
            .collect()
    } else {
        Seen::default()
    };
    Inputs {
        missing,
        bytes,
        module_bytes,
        seen,
    }
}

/// Inputs that do not exist: how many, and the first `keep` as (job index, path), in job order.
/// Reads each directory the inputs are in once rather than looking at every input (`emit`
/// needs no sizes, and a 100k-job file has 200k distinct inputs).
pub fn missing_inputs(
    file: &JobFile<'_>,
    dir: &Path,
    keep: usize,
) -> (usize, Vec<(usize, String)>) {
    /// What one look at a directory says.
    enum Listing {
        Names(FxHashSet<std::ffi::OsString>),
        /// It does not exist (or is not a directory): nothing in it exists.
        Absent,
        /// It cannot be read: each input in it is looked at.
        Unreadable,
    }
    let mut listings: FxHashMap<&str, Listing> = FxHashMap::default();
    let mut count = 0;
    let mut first = Vec::new();
    for (i, job) in file.jobs.iter().enumerate() {
        for input in &job.inputs {
            let (parent, name) = match input.rsplit_once('/') {
                Some(("", name)) => ("/", name),
                Some(split) => split,
                None => (".", input.as_ref()),
            };
            let listing = listings.entry(parent).or_insert_with(|| {
                match std::fs::read_dir(dir.join(parent)) {
                    Ok(entries) => {
                        Listing::Names(entries.flatten().map(|e| e.file_name()).collect())
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Listing::Absent,
                    Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Listing::Absent,
                    Err(_) => Listing::Unreadable,
                }
            });
            let exists = match listing {
                Listing::Names(names) if !matches!(name, "" | "." | "..") => {
                    names.contains(std::ffi::OsStr::new(name))
                }
                Listing::Absent => false,
                // Unreadable, or a name that is not a plain one.
                _ => dir.join(input.as_ref()).exists(),
            };
            if !exists {
                count += 1;
                if first.len() < keep {
                    first.push((i, input.to_string()));
                }
            }
        }
    }
    (count, first)
}

/// Whether `s` holds a line break or a NUL, which no build file can carry.
pub fn has_break(s: &str) -> bool {
    memchr::memchr3(b'\n', b'\r', b'\0', s.as_bytes()).is_some()
}

/// Job indices, costliest first (ties keep file order), so that the end of a link does not wait
/// on one big job started last.
pub fn longest_first(cost: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..cost.len()).collect();
    order.sort_by(|&a, &b| cost[b].total_cmp(&cost[a]));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::parse::parse;

    fn file(jobs: &str) -> JobFile<'static> {
        parse(&format!(
            r#"{{"common":{{"linker_output":"p","args":["cc"]}},"jobs":[{jobs}]}}"#
        ))
        .unwrap()
        .into_owned()
    }

    #[test]
    fn duplicate_outputs_are_rejected() {
        let f = file(
            r#"{"args":[],"inputs":[],"outputs":["a.o"]},{"args":[],"inputs":[],"outputs":["a.o"]}"#,
        );
        let e = check(&f, "/w").unwrap_err();
        assert!(e.starts_with("jobs[1].outputs[0]"), "{e}");
    }

    #[test]
    fn reading_another_jobs_output_is_rejected() {
        let f = file(
            r#"{"args":[],"inputs":[],"outputs":["a.o"]},{"args":[],"inputs":["a.o"],"outputs":["b.o"]}"#,
        );
        assert!(check(&f, "/w").unwrap_err().contains("jobs[1]"));
    }

    #[test]
    fn one_file_under_two_names_is_one_output() {
        for other in ["./a.o", "d/../a.o", "/w/a.o"] {
            let f = file(&format!(
                r#"{{"args":[],"inputs":[],"outputs":["a.o"]}},{{"args":[],"inputs":[],"outputs":["{other}"]}}"#
            ));
            let e = check(&f, "/w").unwrap_err();
            assert!(
                e.contains("is also an output of jobs[0]") && e.contains("names the same file"),
                "{e}"
            );
        }
        let f = file(
            r#"{"args":[],"inputs":[],"outputs":["a.o"]},{"args":[],"inputs":["./a.o"],"outputs":["b.o"]}"#,
        );
        assert!(check(&f, "/w").unwrap_err().contains("must be independent"));
    }

    #[test]
    fn line_breaks_and_nul_are_refused_with_their_place() {
        for (field, bad) in [("outputs", "a\nb.o"), ("inputs", "a\rb"), ("args", "x\0")] {
            let mut job = serde_json::json!({"args": [], "inputs": [], "outputs": ["o.o"]});
            job[field] = serde_json::json!([bad]);
            let f = file(&job.to_string());
            let e = check(&f, "/w").unwrap_err();
            assert!(e.starts_with(&format!("jobs[0].{field}[")), "{e}");
        }
    }

    #[test]
    fn a_job_s_cost_is_its_own_module_s_size_not_its_imports() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("small.o"), "x").unwrap();
        std::fs::write(dir.path().join("big.o"), "0123456789").unwrap();
        let f = file(
            r#"{"args":[],"inputs":["small.o","big.o"],"outputs":["a"]},{"args":[],"inputs":["big.o"],"outputs":["b"]},{"args":[],"inputs":["gone.o"],"outputs":["c"]}"#,
        );
        let inputs = stat_inputs(&f, dir.path(), false);
        assert_eq!(inputs.bytes, [11, 10, 0]);
        assert_eq!(inputs.module_bytes, [1, 10, 0]);
    }

    #[test]
    fn missing_inputs_are_listed_per_job() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("here.o"), "x").unwrap();
        let f = file(
            r#"{"args":[],"inputs":["here.o","gone.o"],"outputs":["a"]},{"args":[],"inputs":["gone.o"],"outputs":["b"]}"#,
        );
        let inputs = stat_inputs(&f, dir.path(), true);
        assert_eq!(
            inputs.missing,
            [(0, "gone.o".to_string()), (1, "gone.o".to_string())]
        );
        assert_eq!(inputs.bytes, [1, 0]);
        assert_eq!(inputs.seen.keys().collect::<Vec<_>>(), ["here.o"]);
        assert_eq!(inputs.seen["here.o"].len(), 1);
        assert!(stat_inputs(&f, dir.path(), false).seen.is_empty());
    }

    #[test]
    fn missing_inputs_are_found_from_directory_listings() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/here.o"), "x").unwrap();
        std::fs::write(dir.path().join("top.o"), "x").unwrap();
        let f = file(
            r#"{"args":[],"inputs":["d/here.o","d/gone.o","top.o","./top.o","nodir/x.o"],"outputs":["a"]},
               {"args":[],"inputs":["d/../top.o","gone"],"outputs":["b"]}"#,
        );
        let (count, first) = missing_inputs(&f, dir.path(), 2);
        assert_eq!(count, 3);
        assert_eq!(
            first,
            [(0, "d/gone.o".to_string()), (0, "nodir/x.o".to_string())]
        );
    }

    #[test]
    fn costliest_jobs_come_first_and_ties_keep_file_order() {
        assert_eq!(longest_first(&[5.0, 9.0, 5.0, 1.0, 9.0]), [1, 4, 0, 2, 3]);
        assert_eq!(longest_first(&[]), Vec::<usize>::new());
    }
}
