//! CLI: the command line and its `DTLTO_BRIDGE_*` environment variables, as one `Command`.
//!
//! It knows option names, defaults and precedence (flag, then environment, then default);
//! it does not read job files or start anything.

use crate::render::Format;
use camino::Utf8PathBuf;
use clap::{Args, Parser, Subcommand};

const ABOUT: &str = "\
A distributor for LLVM's Integrated Distributed ThinLTO (DTLTO).

The linker (clang-22 -fthinlto-distributor=, ld.lld-22 --thinlto-distributor=) runs
`dtlto-bridge [OPTIONS] JOBS.json` in its working directory. dtlto-bridge writes the jobs as a
build.ninja or Makefile with exact dependencies (module, index shard, imports) into a private
temporary directory, runs ninja or make there from the linker's directory, optionally through a
wrapper such as distcc or icecc, and checks that every job wrote a non-empty output.";

const AFTER: &str = "\
Every option can also be set in the environment; a flag given on the command line wins over the
environment, which wins over the default. Examples:

  clang-22 -flto=thin -fuse-ld=lld-22 -fthinlto-distributor=$(command -v dtlto-bridge) \\
      -Xthinlto-distributor=--backend=make *.o -o prog
  ld.lld-22 --thinlto-distributor=/usr/local/bin/dtlto-bridge \\
      --thinlto-distributor-arg=--wrapper=distcc ...   # lld wants a path: it does not search PATH
  DTLTO_BRIDGE_WRAPPER=icecc make            # no change to link flags
  dtlto-bridge emit --format make prog.dist-file.json -o jobs.mk

A job that fails through the wrapper is run again once locally (--no-fallback turns that off).
`dtlto-bridge doctor` checks this machine.

Exit status: 0 all outputs made; 1 a job or the build tool failed; 2 bad usage or a job file that
is malformed or names missing inputs; 3 the environment is missing something (ninja, make, a
temporary directory); 128+N stopped by signal N.";

#[derive(Debug, Parser)]
#[command(
    name = "dtlto-bridge",
    version,
    about = ABOUT,
    after_help = AFTER,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write the build file for inspection, without running it.
    ///
    /// Run it later from the same directory with `ninja -f FILE` or `make -f FILE`.
    Emit(EmitArgs),
    /// Check this machine: clang and lld with DTLTO, make and ninja, the jobserver, the wrapper.
    ///
    /// Exits non-zero when something a link needs is missing.
    Doctor(DoctorArgs),
    /// Run one job and record its outcome (used inside generated build files).
    #[command(name = "__job", hide = true)]
    Job(JobArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The job file the linker wrote (*.dist-file.json).
    #[arg(value_name = "JOBS.json", required = true)]
    pub job_file: Option<Utf8PathBuf>,

    /// Build tool to run the jobs with [default: ninja if found on PATH, else make].
    #[arg(long, value_enum, env = "DTLTO_BRIDGE_BACKEND")]
    pub backend: Option<Format>,

    /// Jobs to run at once. Given, it wins over any jobserver and the host pool [default: as
    /// many as the parent's jobserver grants, else the host-wide pool's share].
    #[arg(short, long, value_name = "N", env = "DTLTO_BRIDGE_JOBS", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,

    #[command(flatten)]
    pub wrapper: WrapperArg,

    /// Order in which jobs start: costliest first (by the durations remembered from earlier links
    /// of the same output, else by the bytes each reads), or as in the file.
    #[arg(
        long,
        value_enum,
        env = "DTLTO_BRIDGE_ORDER",
        default_value = "longest"
    )]
    pub order: Order,

    /// Where to remember each module's job duration between links, to start the longest first
    /// [default: $XDG_CACHE_HOME/dtlto-bridge, else ~/.cache/dtlto-bridge].
    #[arg(long, value_name = "DIR", env = "DTLTO_BRIDGE_HISTORY")]
    pub history: Option<Utf8PathBuf>,

    /// Neither use nor update the remembered durations (order by input bytes alone).
    #[arg(long, env = "DTLTO_BRIDGE_NO_HISTORY", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_history: bool,

    /// Slots of the host-wide pool that concurrent dtlto-bridge runs of this user share when
    /// no jobserver is present; 0 turns the pool off [default: the available parallelism].
    #[arg(long, value_name = "N", env = "DTLTO_BRIDGE_HOST_SLOTS", value_parser = pool_slots)]
    pub host_slots: Option<usize>,

    /// Where the host-wide pool's per-user directory (dtlto-bridge-pool-UID) goes
    /// [default: $XDG_RUNTIME_DIR, else TMPDIR].
    #[arg(long, value_name = "DIR", env = "DTLTO_BRIDGE_HOST_POOL")]
    pub host_pool: Option<Utf8PathBuf>,

    /// Do not re-run a job locally, without the wrapper, when it fails through the wrapper.
    #[arg(long, env = "DTLTO_BRIDGE_NO_FALLBACK", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_fallback: bool,

    /// Print nothing on success: no progress line, no summary line, no advice.
    #[arg(short, long, env = "DTLTO_BRIDGE_QUIET", value_parser = clap::builder::BoolishValueParser::new())]
    pub quiet: bool,

    /// Print the summary line of a successful run even when stderr is not a terminal.
    #[arg(long, env = "DTLTO_BRIDGE_SUMMARY", value_parser = clap::builder::BoolishValueParser::new())]
    pub summary: bool,

    /// Write a JSON report of every job (command, times, exit status, where it ran) to FILE.
    #[arg(long, value_name = "FILE", env = "DTLTO_BRIDGE_REPORT")]
    pub report: Option<Utf8PathBuf>,

    /// Write a Chrome trace-event timeline of the jobs (one lane per slot) to FILE.
    #[arg(long, value_name = "FILE", env = "DTLTO_BRIDGE_TRACE")]
    pub trace: Option<Utf8PathBuf>,

    /// Keep the temporary directory (build file, logs) and print where it is.
    #[arg(long, env = "DTLTO_BRIDGE_KEEP", value_parser = clap::builder::BoolishValueParser::new())]
    pub keep: bool,

    #[command(flatten)]
    pub tools: ToolArgs,
}

/// A host pool size: 0 (off) to `pool::MAX_SLOTS`.
fn pool_slots(text: &str) -> Result<usize, String> {
    let n: usize = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if n > crate::pool::MAX_SLOTS {
        return Err(format!(
            "a pool has at most {} slots",
            crate::pool::MAX_SLOTS
        ));
    }
    Ok(n)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    /// Jobs reading the most bytes start first.
    Longest,
    /// Jobs start in the order of the job file.
    File,
}

#[derive(Debug, Args)]
pub struct ToolArgs {
    /// The ninja program to run.
    #[arg(
        long,
        value_name = "PROGRAM",
        env = "DTLTO_BRIDGE_NINJA",
        default_value = "ninja"
    )]
    pub ninja: String,

    /// The make program to run.
    #[arg(
        long,
        value_name = "PROGRAM",
        env = "DTLTO_BRIDGE_MAKE",
        default_value = "make"
    )]
    pub make: String,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Build tool the runs would use [default: ninja if found on PATH, else make].
    #[arg(long, value_enum, env = "DTLTO_BRIDGE_BACKEND")]
    pub backend: Option<Format>,

    /// Slots of the host-wide pool to check [default: the available parallelism].
    #[arg(long, value_name = "N", env = "DTLTO_BRIDGE_HOST_SLOTS")]
    pub host_slots: Option<usize>,

    /// Where the host-wide pool's directory goes.
    #[arg(long, value_name = "DIR", env = "DTLTO_BRIDGE_HOST_POOL")]
    pub host_pool: Option<Utf8PathBuf>,

    #[command(flatten)]
    pub wrapper: WrapperArg,

    #[command(flatten)]
    pub tools: ToolArgs,
}

#[derive(Debug, Args)]
pub struct WrapperArg {
    /// Prefix for every job's command, split like a shell would: "distcc", "icecc", "ccache".
    #[arg(
        long,
        value_name = "COMMAND",
        env = "DTLTO_BRIDGE_WRAPPER",
        default_value = ""
    )]
    pub wrapper: String,
}

impl WrapperArg {
    /// The wrapper's words, or why they cannot be split.
    pub fn words(&self) -> Result<Vec<String>, String> {
        shell_words::split(&self.wrapper)
            .map_err(|e| format!("split wrapper {:?}: {e}", self.wrapper))
    }
}

#[derive(Debug, Args)]
pub struct EmitArgs {
    /// The job file to render.
    #[arg(value_name = "JOBS.json")]
    pub job_file: Utf8PathBuf,

    /// Build-file format.
    #[arg(
        long,
        value_enum,
        default_value = "ninja",
        env = "DTLTO_BRIDGE_BACKEND"
    )]
    pub format: Format,

    /// Where to write the file [default: standard output].
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<Utf8PathBuf>,

    #[command(flatten)]
    pub wrapper: WrapperArg,
}

#[derive(Debug, Args)]
pub struct JobArgs {
    /// The run's private directory.
    pub state_dir: Utf8PathBuf,
    /// The job's index in the job file.
    pub index: usize,
}
