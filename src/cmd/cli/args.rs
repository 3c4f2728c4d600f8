//! Args: the command line's definition — every subcommand and option, its variable, default
//! and help — and what the engine and the classic flow are given from it (`RunArgs::options`,
//! `LinkArgs::options`).
//!
//! It knows clap's derive attributes and the options' meanings; it does not parse (`parse`
//! does) or run anything.

use super::given::{user_path, user_program};
use super::remote::RemoteArgs;
use crate::link::engine::Origins;
use camino::{Utf8Path, Utf8PathBuf};
use clap::{Args, Parser, Subcommand};

const ABOUT: &str = "A distributor for LLVM's Integrated Distributed ThinLTO (DTLTO).";

const LONG_ABOUT: &str = "\
A distributor for LLVM's Integrated Distributed ThinLTO (DTLTO).

The linker (clang-22 -fthinlto-distributor=, ld.lld-22 --thinlto-distributor=) runs
`dtlto-bridge [OPTIONS] JOBS.json` in its working directory. dtlto-bridge writes the jobs as a
build.ninja or Makefile with exact dependencies (module, index shard, imports) into a private
temporary directory, runs ninja or make there from the linker's directory, optionally through a
wrapper (a remote launcher, or --remote for a Remote Execution API server), and checks that
every job wrote a non-empty output.";

const AFTER: &str = "\
Every option can also be set in the environment; a flag given on the command line wins over the
environment, which wins over the default. Examples:

  clang-22 -flto=thin -fuse-ld=lld-22 -fthinlto-distributor=$(command -v dtlto-bridge) \\
      -Xthinlto-distributor=--backend=make *.o -o prog
  ld.lld-22 --thinlto-distributor=$(command -v dtlto-bridge) \\
      --thinlto-distributor-arg=--remote=grpc://farm:8980 ...   # lld does not search PATH
  DTLTO_BRIDGE_JOBS=8 make                   # no change to link flags
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
    long_about = LONG_ABOUT,
    after_help = AFTER,
    args_conflicts_with_subcommands = true,
    propagate_version = true,
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
    /// Run a build command and say which of its links went through dtlto-bridge.
    ///
    /// Fails when none did: clang drops -fthinlto-distributor= unless the link also has
    /// -flto=thin, and cargo hides the linker's output, so a build can skip DTLTO silently.
    Check(CheckArgs),
    /// Run one command on a Remote Execution API server, with its explicit inputs and outputs
    /// (as reclient's rewrapper does): the wrapper that makes emitted build files run remotely,
    /// e.g. --wrapper 'dtlto-bridge rexec --inputs={inputs} --outputs={outputs} --'.
    ///
    /// Falls back to running the command here (unless --no-fallback).
    Rexec(RexecArgs),
    /// Distributed ThinLTO for any LLVM with lld (14+): runs the thin link (index only), the
    /// modules' backend compiles as jobs (as a DTLTO link's run: build file, jobserver, wrapper,
    /// remote, report), then the final link with the native objects.
    ///
    /// dtlto-bridge link [OPTIONS] -- clang-19 -O2 -flto=thin -fuse-ld=lld-19 main.o libx.a -o prog
    Link(Box<LinkArgs>),
    /// Make this machine a distcc host for ThinLTO backend jobs (`host setup`), or check that
    /// the wrapper's hosts run them (`host check`).
    #[command(subcommand)]
    Host(HostCommand),
    /// Print a shell completion script, e.g. `dtlto-bridge completions bash >
    /// ~/.local/share/bash-completion/completions/dtlto-bridge`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), e.g. `dtlto-bridge man > dtlto-bridge.1; man
    /// ./dtlto-bridge.1`.
    Man(ManArgs),
}

/// The `host` subcommands.
#[derive(Debug, Subcommand)]
pub enum HostCommand {
    /// Link `dtlto-clang` (the host entry) to this binary and write a DISTCC_CMDLIST file that
    /// allows it beside the compilers /usr/lib/distcc allows; idempotent, says what it did.
    Setup {
        /// Where the link and the list go [default: this binary's directory].
        #[arg(long, value_name = "DIR", value_parser = user_path)]
        dir: Option<Utf8PathBuf>,
        /// Also write an icecream environment of this clang with the entry in it, for
        /// ICECC_VERSION on the linking machines (needs icecc-create-env).
        #[arg(long, value_name = "CLANG")]
        icecc: Option<String>,
    },
    /// Send a probe bundle through the wrapper and say which clang each host runs it with.
    Check {
        /// The hosts to check, one at a time (distcc: each is DISTCC_HOSTS for its probe)
        /// [default: the wrapper picks].
        hosts: Vec<String>,
        /// The compiler the links' jobs name.
        #[arg(long, value_name = "CLANG", default_value = "clang-22")]
        compiler: String,
        #[command(flatten)]
        wrapper: WrapperArg,
    },
}

/// How a link's jobs are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// A build.ninja that ninja runs, one launcher process per job.
    Ninja,
    /// A Makefile that make runs, one launcher process per job.
    Make,
    /// Started by dtlto-bridge itself: no build file, no build tool, no launcher.
    Direct,
}

impl Backend {
    /// The engine's name for it.
    pub fn engine(self) -> crate::link::engine::Backend {
        match self {
            Backend::Ninja => crate::link::engine::Backend::Ninja,
            Backend::Make => crate::link::engine::Backend::Make,
            Backend::Direct => crate::link::engine::Backend::Direct,
        }
    }

    /// The build file it writes; None for `Direct`.
    pub fn format(self) -> Option<crate::render::Format> {
        self.engine().format()
    }
}

#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// The job file the linker wrote (*.dist-file.json).
    #[arg(value_name = "JOBS.json", required = true)]
    pub job_file: Option<Utf8PathBuf>,

    /// Build tool to run the jobs with, or `direct`: dtlto-bridge starts them itself, the least
    /// work per job [default: ninja if found on PATH, else make].
    #[arg(long, value_enum, env = "DTLTO_BRIDGE_BACKEND")]
    pub backend: Option<Backend>,

    /// Jobs to run at once. Given, it wins over any jobserver and the host pool [default: as
    /// many as the parent's jobserver grants, else the host-wide pool's share].
    #[arg(short, long, value_name = "N", env = "DTLTO_BRIDGE_JOBS", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,

    #[command(flatten)]
    pub wrapper: WrapperArg,

    /// Order in which jobs start: costliest first (by the durations remembered from earlier links
    /// of the same output, else by the size of the module each compiles), or as in the file.
    #[arg(
        long,
        value_enum,
        env = "DTLTO_BRIDGE_ORDER",
        default_value = "longest"
    )]
    pub order: Order,

    /// Where to remember each module's job duration between links, to start the longest first,
    /// what went into its remote action, to say why it missed the cache, input files' digests,
    /// not to read unchanged inputs again, and each job's action, not to build it again
    /// [default: $XDG_CACHE_HOME/dtlto-bridge, else ~/.cache/dtlto-bridge].
    #[arg(long, value_name = "DIR", env = "DTLTO_BRIDGE_HISTORY", value_parser = user_path)]
    pub history: Option<Utf8PathBuf>,

    /// Neither use nor update the history (order by module size alone; cache misses unexplained;
    /// remote links read every input again and build every action).
    #[arg(long, env = "DTLTO_BRIDGE_NO_HISTORY", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_history: bool,

    /// Slots of the host-wide pool that concurrent dtlto-bridge runs of this user share when
    /// no jobserver is present; 0 turns the pool off [default: the available parallelism].
    #[arg(long, value_name = "N", env = "DTLTO_BRIDGE_HOST_SLOTS", value_parser = pool_slots)]
    pub host_slots: Option<usize>,

    /// Where the host-wide pool's per-user directory (dtlto-bridge-pool-UID) goes
    /// [default: $XDG_RUNTIME_DIR, else TMPDIR].
    #[arg(long, value_name = "DIR", env = "DTLTO_BRIDGE_HOST_POOL", value_parser = user_path)]
    pub host_pool: Option<Utf8PathBuf>,

    /// Do not re-run a job locally, without the wrapper, when it fails through the wrapper or
    /// on the remote server.
    #[arg(long, env = "DTLTO_BRIDGE_NO_FALLBACK", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_fallback: bool,

    /// Print nothing on success: no progress line, no summary line, no advice.
    #[arg(short, long, env = "DTLTO_BRIDGE_QUIET", value_parser = clap::builder::BoolishValueParser::new())]
    pub quiet: bool,

    /// Print the summary line of a successful run even when stderr is not a terminal.
    #[arg(long, env = "DTLTO_BRIDGE_SUMMARY", value_parser = clap::builder::BoolishValueParser::new())]
    pub summary: bool,

    /// Write a JSON report of every job (command, times, exit status, where it ran) to FILE;
    /// `{output}` in FILE becomes the file name of the link's output.
    #[arg(long, value_name = "FILE", env = "DTLTO_BRIDGE_REPORT", value_parser = user_path)]
    pub report: Option<Utf8PathBuf>,

    /// Write a Chrome trace-event timeline of the jobs (one lane per slot) to FILE; `{output}`
    /// as for --report.
    #[arg(long, value_name = "FILE", env = "DTLTO_BRIDGE_TRACE", value_parser = user_path)]
    pub trace: Option<Utf8PathBuf>,

    /// Keep the temporary directory (build file, logs) and print where it is.
    #[arg(long, env = "DTLTO_BRIDGE_KEEP", value_parser = clap::builder::BoolishValueParser::new())]
    pub keep: bool,

    /// Save the job file and every input of its jobs (hard links where possible) in a new
    /// directory under DIR, laid out as around the linker's directory, so that the jobs can run
    /// again after the link (lld removes its index shards and extracted archive members).
    #[arg(long, value_name = "DIR", env = "DTLTO_BRIDGE_SAVE", value_parser = user_path)]
    pub save: Option<Utf8PathBuf>,

    /// Append one line of JSON per link to FILE (what it linked, its jobs, where they ran), so
    /// that a build can show which links went through dtlto-bridge (see `check`).
    #[arg(long, value_name = "FILE", env = "DTLTO_BRIDGE_LOG", value_parser = user_path)]
    pub log: Option<Utf8PathBuf>,

    #[command(flatten)]
    pub tools: ToolArgs,

    #[command(flatten)]
    pub remote: RemoteArgs,

    /// Where each option given came from (filled by `parse`).
    #[arg(skip)]
    pub origins: Origins,
}

impl RunArgs {
    /// The job file (clap requires it of a run, and refuses it to `link`).
    pub fn job_file(&self) -> &Utf8Path {
        self.job_file
            .as_deref()
            .expect("clap requires the job file")
    }

    /// The engine's options: the wrapper split, the remote options' files read, the cache
    /// directory found; or what is wrong with a value.
    pub fn options(&self) -> Result<crate::link::engine::Options, String> {
        let history = (!self.no_history)
            .then(|| (self.history.clone()).or_else(crate::job::store::CacheDir::default_path))
            .flatten();
        Ok(crate::link::engine::Options {
            backend: self.backend.map(Backend::engine),
            jobs: self.jobs,
            wrapper: self.wrapper.words()?,
            order: match self.order {
                Order::Longest => crate::link::engine::Order::Longest,
                Order::File => crate::link::engine::Order::File,
            },
            history,
            host_slots: self.host_slots,
            host_pool: self.host_pool.clone(),
            fallback: !self.no_fallback,
            quiet: self.quiet,
            summary: self.summary,
            report: self.report.clone(),
            trace: self.trace.clone(),
            keep: self.keep,
            save: self.save.clone(),
            log: self.log.clone(),
            ninja: self.tools.ninja.clone(),
            make: self.tools.make.clone(),
            remote: self.remote.options()?,
            origins: self.origins.clone(),
        })
    }
}

/// A host pool size: 0 (off) to `pool::MAX_SLOTS`.
fn pool_slots(text: &str) -> Result<usize, String> {
    let n: usize = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if n > crate::local::pool::MAX_SLOTS {
        return Err(format!(
            "a pool has at most {} slots",
            crate::local::pool::MAX_SLOTS
        ));
    }
    Ok(n)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    /// The costliest jobs start first: by the durations remembered from earlier links of the
    /// same output, else by the size of the module each compiles.
    Longest,
    /// Jobs start in the order of the job file.
    File,
}

#[derive(Debug, Args, Clone)]
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
    /// Build tool the runs would use, or `direct` (none) [default: ninja if found on PATH,
    /// else make].
    #[arg(long, value_enum, env = "DTLTO_BRIDGE_BACKEND")]
    pub backend: Option<Backend>,

    /// Slots of the host-wide pool to check [default: the available parallelism].
    #[arg(long, value_name = "N", env = "DTLTO_BRIDGE_HOST_SLOTS")]
    pub host_slots: Option<usize>,

    /// Where the host-wide pool's directory goes.
    #[arg(long, value_name = "DIR", env = "DTLTO_BRIDGE_HOST_POOL", value_parser = user_path)]
    pub host_pool: Option<Utf8PathBuf>,

    #[command(flatten)]
    pub wrapper: WrapperArg,

    #[command(flatten)]
    pub tools: ToolArgs,

    /// With --remote: the server's capabilities and one tiny action's round trip.
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Args, Clone)]
pub struct WrapperArg {
    /// Prefix for every job's command, split like a shell would, such as a remote launcher
    /// ("rewrapper --inputs={inputs} --output_files={outputs} --"); through distcc or icecc each
    /// job goes to a host as one bundle (`dtlto-bridge host setup` on each host).
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
pub struct RexecArgs {
    /// The command's input files, comma separated, relative to this directory.
    #[arg(long, value_name = "LIST", value_delimiter = ',', required = true)]
    pub inputs: Vec<String>,

    /// The files it writes, comma separated.
    #[arg(long, value_name = "LIST", value_delimiter = ',', required = true)]
    pub outputs: Vec<String>,

    /// Fail instead of running the command here when it cannot run remotely.
    #[arg(long, env = "DTLTO_BRIDGE_NO_FALLBACK", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_fallback: bool,

    #[command(flatten)]
    pub remote: RemoteArgs,

    /// The command, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
#[command(mut_arg("job_file", |a| a.required(false).hide(true).long("job-file")))]
pub struct LinkArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// Compiler of the backend jobs [default: the link command's program; required when that
    /// is lld itself].
    #[arg(long, value_name = "CLANG", env = "DTLTO_BRIDGE_LINK_COMPILER", value_parser = user_program)]
    pub compiler: Option<String>,

    /// An option added to every backend job (after the ones derived from the link), e.g.
    /// --backend-arg=-mllvm --backend-arg=-import-instr-limit=10. Repeatable.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub backend_arg: Vec<String>,

    /// Remove the backend jobs' options matching PATTERN, where `%` stands for any text as in
    /// make's $(filter-out), e.g. --backend-remove=-fpic. Repeatable.
    #[arg(long, value_name = "PATTERN", allow_hyphen_values = true)]
    pub backend_remove: Vec<String>,

    /// Run only the thin link, and write the whole flow (thin link, backend jobs, final link)
    /// to FILE as a build.ninja, or a Makefile with --backend make, with its files in
    /// FILE.dtlto/; `ninja -f FILE` or `make -f FILE` then does the link.
    #[arg(long, value_name = "FILE", value_parser = user_path)]
    pub emit: Option<Utf8PathBuf>,

    /// With --emit: write FILE again only if one of its archives changed since it was written
    /// (the command of FILE's own rule).
    #[arg(long, hide = true, requires = "emit")]
    pub emit_check: bool,

    /// Keep the final native objects in DIR, named after their modules (an archive's members
    /// under ARCHIVE.d/).
    #[arg(long, value_name = "DIR", value_parser = user_path)]
    pub keep_objects: Option<Utf8PathBuf>,

    /// The link command, after `--`: a clang link with -flto=thin and -fuse-ld=lld, or lld itself
    /// (then with --compiler).
    #[arg(last = true, required = true, value_name = "LINK COMMAND")]
    pub command: Vec<String>,
}

impl LinkArgs {
    /// The flow's options, or what is wrong with a value.
    pub fn options(&self) -> Result<crate::link::Options, String> {
        if self.run.job_file.is_some() {
            return Err("link: takes the link command after `--`, not a job file".into());
        }
        Ok(crate::link::Options {
            run: self.run.options()?,
            compiler: self.compiler.clone(),
            backend_arg: self.backend_arg.clone(),
            backend_remove: self.backend_remove.clone(),
            emit: self.emit.clone(),
            emit_check: self.emit_check,
            keep_objects: self.keep_objects.clone(),
            command: self.command.clone(),
        })
    }
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The build command, after `--`: `dtlto-bridge check -- cargo build --release`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct EmitArgs {
    /// The job file to render.
    #[arg(value_name = "JOBS.json")]
    pub job_file: Utf8PathBuf,

    /// Build-file format (`direct` has none).
    #[arg(
        long,
        value_enum,
        default_value = "ninja",
        env = "DTLTO_BRIDGE_BACKEND"
    )]
    pub format: Backend,

    /// Where to write the file [default: standard output].
    #[arg(short, long, value_name = "FILE", value_parser = user_path)]
    pub output: Option<Utf8PathBuf>,

    #[command(flatten)]
    pub wrapper: WrapperArg,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page (dtlto-bridge.1 and one per subcommand, dtlto-bridge-doctor.1, ...) into
    /// DIR instead of printing the main page.
    #[arg(long, value_name = "DIR", value_parser = user_path)]
    pub dir: Option<Utf8PathBuf>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `given::as_given` names a variable by its option alone: every option's variable is
    /// named after it, but two that no message names as given (`emit --format` reads the run's
    /// `--backend` variable; `link --compiler` has one of its own).
    #[test]
    fn every_options_variable_is_named_after_it() {
        fn walk(command: &clap::Command, checked: &mut usize) {
            for arg in command.get_arguments() {
                let var = arg.get_env().and_then(|v| v.to_str());
                match (arg.get_long(), var) {
                    (Some("format"), Some(var)) => assert_eq!(var, "DTLTO_BRIDGE_BACKEND"),
                    (Some("compiler"), Some(var)) if var.contains("LINK") => {
                        assert_eq!(var, "DTLTO_BRIDGE_LINK_COMPILER")
                    }
                    (Some(long), Some(var)) => {
                        assert_eq!(var, super::super::given::variable(long));
                        *checked += 1;
                    }
                    _ => {}
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, checked);
            }
        }
        let mut checked = 0;
        walk(&super::Cli::command(), &mut checked);
        assert!(checked > 30, "only {checked} variables");
    }
}
