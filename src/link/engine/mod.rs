//! Engine: carries out one link's jobs in five steps, one module each: `prepare` (load and
//! check the job file, find where slots come from), `connect` (with `--remote`, connect, start
//! the costliest jobs there, and let the action cache answer what it can before the scheduler
//! starts anything; the hits' outputs are written),
//! `build` (the build file of the jobs left is written into a private directory, and the
//! scheduler serves the launchers the build tool starts, or with `direct` starts the jobs itself;
//! nothing starts when no job is left), `settle` (every launcher gone, outputs checked, the traces
//! of unfinished jobs removed), `conclude` (failures first, then the records, the history and the
//! summary). `tool` picks the build tool and writes its file; `hosts` the distcc and icecream
//! hosts' slots; `save` is `--save`; `options` what a run is asked.
//!
//! It is the one place that joins `local` (execution on this machine) and `remote` (the REAPI
//! client and the hosts' bundles): it knows the order of the steps; the details of each live in `job`, `render`, `remote`, `local`
//! and `report`. It takes its own `Options` (`options`), which the command line (`cli`) fills;
//! it does not parse the command line or know the classic flow (`link` runs its jobs through
//! `run_file`).

mod build;
mod conclude;
mod connect;
mod hosts;
mod options;
mod prepare;
mod records;
mod save;
mod settle;
mod tool;

use crate::job::files;
use crate::job::outcome;
use crate::job::parse::JobFile;
use crate::local::process::Watch;
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
    let mut remote = connect::start_remote(&mut prepared);
    let hits = connect::look_up(&mut remote, watch);
    let built = match build::build(&mut prepared, remote, &hits, start, watch) {
        Ok(built) => built,
        Err(fail) => {
            // No build tool for the misses: every output goes, as a failed link's (the hits',
            // and those of the jobs that led, stopped when the remote side was dropped).
            for job in &prepared.file.jobs {
                files::remove(&prepared.cwd, &job.outputs);
            }
            return Err(fail);
        }
    };
    let settled = settle::settle(&prepared, built, hits, watch);
    conclude::conclude(prepared, settled, watch)
}
