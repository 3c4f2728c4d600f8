//! Engine: carries out one link's jobs in five steps, one module each: `prepare` (load and
//! check the job file, decide where slots come from), `decide` (with `--remote`, connect and let
//! the action cache answer what it can before anything starts; the hits' outputs are written),
//! `execute` (the build file of the jobs left is written into a private directory, and the
//! scheduler serves the launchers the build tool starts, or with `direct` starts the jobs itself;
//! nothing starts when no job is left), `settle` (every launcher gone, outputs checked, the traces
//! of unfinished jobs removed), `conclude` (failures first, then the records, the history and the
//! summary). `backend` picks the build tool and writes its file; `save` is `--save`.
//!
//! It is the one place that joins `exec` (local execution) and `remote` (the REAPI client): it
//! knows the order of the steps; the details of each live in `job`, `render`, `remote`, `exec`
//! and `report`. It takes its own `Options` (`options`), which the command line (`cli`) fills;
//! it does not parse the command line or know the classic flow (`link` runs its jobs through
//! `run_file`).

mod backend;
mod conclude;
mod decide;
mod execute;
mod hosts;
mod options;
mod prepare;
mod records;
mod save;
mod settle;

use crate::exec::process::Watch;
use crate::job::outcome;
use crate::job::output;
use crate::job::parse::JobFile;
use crate::report::Fail;
use camino::Utf8Path;
pub(crate) use options::{Backend, Options, Order, Origin, Origins};
pub(crate) use prepare::{cwd, missing_list, parse_file};
use std::path::PathBuf;

/// The default run: everything from the job file `path` to verified outputs.
pub fn run(
    options: &Options,
    path: &Utf8Path,
    jobserver: jobserver::FromEnv,
    watch: &Watch,
) -> Result<(), Fail> {
    // The directory first: failing to find it is the environment's fault, not the file's.
    let (dir, _) = cwd()?;
    run_file(options, path, dir, parse_file(path)?, jobserver, watch)
}

/// Runs the jobs of `file`, which the job file `path` holds (read from it, or built in memory
/// and written there for `--keep` and `--save`), in the linker's directory `cwd`.
pub fn run_file(
    options: &Options,
    path: &Utf8Path,
    cwd: PathBuf,
    file: JobFile<'static>,
    jobserver: jobserver::FromEnv,
    watch: &Watch,
) -> Result<(), Fail> {
    let Some(mut prepared) = prepare::prepare(options, path, cwd, file, jobserver)? else {
        return Ok(());
    };
    let start = outcome::now();
    let mut remote = decide::start_remote(&mut prepared);
    let hits = decide::look_up(&mut remote, watch);
    let executed = match execute::execute(&mut prepared, remote, &hits, start, watch) {
        Ok(executed) => executed,
        Err(fail) => {
            // No build tool for the misses: the hits' outputs go too, as a failed link's.
            for (index, _) in hits.iter().enumerate().filter(|(_, h)| h.is_some()) {
                output::remove(&prepared.cwd, &prepared.file.jobs[index].outputs);
            }
            return Err(fail);
        }
    };
    let settled = settle::settle(&prepared, executed, hits, watch);
    conclude::conclude(prepared, settled, watch)
}
