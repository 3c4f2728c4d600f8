//! Plan: checks a parsed job file can be run, and picks the build tool.
//!
//! It knows that jobs must be independent, that their inputs must exist (relative to the
//! linker's directory) and which tools are on PATH; it does not render or run anything.

use crate::parse::JobFile;
use crate::render::Format;
use std::collections::HashMap;
use std::path::Path;

/// Rejects two jobs writing one file, and a job reading another job's output.
pub fn check_independent(file: &JobFile) -> Result<(), String> {
    // Only looked up, never iterated: the first clash in job order is reported.
    let mut writers: HashMap<&str, usize> = HashMap::with_capacity(file.jobs.len());
    for (i, job) in file.jobs.iter().enumerate() {
        for (k, out) in job.outputs.iter().enumerate() {
            if let Some(first) = writers.insert(out, i) {
                return Err(format!(
                    "jobs[{i}].outputs[{k}]: {out:?} is also an output of jobs[{first}]"
                ));
            }
        }
    }
    for (i, job) in file.jobs.iter().enumerate() {
        for input in &job.inputs {
            if let Some(w) = writers.get(input.as_str()) {
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
    /// Bytes each job reads (module, shard, imports, shared inputs): the estimate of its cost.
    pub bytes: Vec<u64>,
}

/// Looks at every input once: whether it exists, and how big it is.
pub fn stat_inputs(file: &JobFile, dir: &Path) -> Inputs {
    let mut sizes: HashMap<&str, Option<u64>> = HashMap::new();
    let mut missing = Vec::new();
    let mut bytes = Vec::with_capacity(file.jobs.len());
    for (i, job) in file.jobs.iter().enumerate() {
        let mut total = 0;
        for input in &job.inputs {
            let size = *sizes
                .entry(input.as_str())
                .or_insert_with(|| std::fs::metadata(dir.join(input)).ok().map(|m| m.len()));
            match size {
                Some(n) => total += n,
                None => missing.push((i, input.clone())),
            }
        }
        bytes.push(total);
    }
    Inputs { missing, bytes }
}

/// Job indices, costliest first (ties keep file order), so that the end of a link does not wait
/// on one big job started last.
pub fn longest_first(cost: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..cost.len()).collect();
    order.sort_by(|&a, &b| cost[b].total_cmp(&cost[a]));
    order
}

/// The requested backend, or ninja when `ninja_found`, else make.
pub fn choose_backend(requested: Option<Format>, ninja_found: bool) -> Format {
    match requested {
        Some(f) => f,
        None if ninja_found => Format::Ninja,
        None => Format::Make,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;

    fn file(jobs: &str) -> JobFile {
        parse(&format!(
            r#"{{"common":{{"linker_output":"p","args":["cc"]}},"jobs":[{jobs}]}}"#
        ))
        .unwrap()
    }

    #[test]
    fn duplicate_outputs_are_rejected() {
        let f = file(
            r#"{"args":[],"inputs":[],"outputs":["a.o"]},{"args":[],"inputs":[],"outputs":["a.o"]}"#,
        );
        let e = check_independent(&f).unwrap_err();
        assert!(e.starts_with("jobs[1].outputs[0]"), "{e}");
    }

    #[test]
    fn reading_another_jobs_output_is_rejected() {
        let f = file(
            r#"{"args":[],"inputs":[],"outputs":["a.o"]},{"args":[],"inputs":["a.o"],"outputs":["b.o"]}"#,
        );
        assert!(check_independent(&f).unwrap_err().contains("jobs[1]"));
    }

    #[test]
    fn missing_inputs_are_listed_per_job() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("here.o"), "x").unwrap();
        let f = file(
            r#"{"args":[],"inputs":["here.o","gone.o"],"outputs":["a"]},{"args":[],"inputs":["gone.o"],"outputs":["b"]}"#,
        );
        let inputs = stat_inputs(&f, dir.path());
        assert_eq!(
            inputs.missing,
            [(0, "gone.o".to_string()), (1, "gone.o".to_string())]
        );
        assert_eq!(inputs.bytes, [1, 0]);
    }

    #[test]
    fn costliest_jobs_come_first_and_ties_keep_file_order() {
        assert_eq!(longest_first(&[5.0, 9.0, 5.0, 1.0, 9.0]), [1, 4, 0, 2, 3]);
        assert_eq!(longest_first(&[]), Vec::<usize>::new());
    }

    #[test]
    fn backend_defaults_to_ninja_when_found() {
        assert_eq!(choose_backend(None, true), Format::Ninja);
        assert_eq!(choose_backend(None, false), Format::Make);
        assert_eq!(choose_backend(Some(Format::Make), true), Format::Make);
    }
}
