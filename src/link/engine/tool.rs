//! Tool: the build tool of a run (`--backend`) — ninja, else make, or none with `direct` — the
//! build file written into a new private directory, and the tool's command line.
//!
//! It knows how ninja and make are found and invoked; it does not run them (`build` does) or
//! render the file (`render` does).

use super::options::{Backend, Options};
use crate::job::parse::JobFile;
use crate::local::process::own_exe;
use crate::local::rundir::RunDir;
use crate::local::slots::Source;
use crate::render::{self, Format, RunHooks};
use crate::report::Fail;
use camino::Utf8Path;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The build tool chosen and its program (None: the run starts the jobs itself, `direct`), and
/// the private directory holding its build file and the jobs' stderr.
pub(super) struct Tool {
    pub build: Option<(Format, PathBuf)>,
    pub state: RunDir,
}

impl Tool {
    /// The backend, as the report names it.
    pub fn name(&self) -> &'static str {
        self.build.as_ref().map_or("direct", |(f, _)| f.tool())
    }
}

/// Picks the build tool, writes the build file of the jobs `order` names (in that order) into
/// a new private directory, and finds the tool's program; with `direct`, only the directory.
pub(super) fn write_build_file(
    options: &Options,
    path: &Utf8Path,
    file: &JobFile<'_>,
    wrapper: &[String],
    order: Vec<usize>,
) -> Result<Tool, Fail> {
    if options.backend == Some(Backend::Direct) {
        let state = RunDir::create().map_err(Fail::environment)?;
        return Ok(Tool { build: None, state });
    }
    let ninja = which::which(&options.ninja);
    let ninja_asked = options.origins.given("ninja") && options.backend != Some(Backend::Make);
    if let (Err(e), true) = (&ninja, ninja_asked) {
        // Asked for by name: never silently replaced by make.
        let asked = options.origins.describe("ninja", "--ninja", &options.ninja);
        return Err(Fail::environment(format!("find ninja ({asked}): {e}")));
    }
    let ninja = ninja.ok();
    let format = render::choose_backend(options.backend.and_then(Backend::format), ninja.is_some());
    let state = RunDir::create().map_err(Fail::environment)?;
    let exe = own_exe().map_err(Fail::environment)?;
    let opts = render::Options {
        wrapper,
        source: path.as_str(),
        run: Some(RunHooks {
            state_dir: state.path().to_string(),
            launcher: vec![exe, "__job".to_string(), state.path().to_string()],
        }),
        order: Some(order),
    };
    let (format, prepared) = match render::prepare(format, file, &opts) {
        Ok(prepared) => (format, prepared),
        // ninja cannot write every path make can (e.g. '|'); without an explicit choice, use make.
        Err(e) if options.backend.is_none() && format == Format::Ninja => {
            let prepared = render::prepare(Format::Make, file, &opts)
                .map_err(|e2| Fail::bad_input(format!("render build file: {e}; and {e2}")))?;
            (Format::Make, prepared)
        }
        Err(e) => {
            return Err(Fail::bad_input(format!(
                "render {}: {e}",
                format.file_name()
            )))
        }
    };
    let build_file = state.path().join(format.file_name());
    File::create(&build_file)
        .and_then(|mut f| prepared.write_to(&mut f))
        .map_err(|e| Fail::environment(format!("write {build_file}: {e}")))?;
    drop(prepared);
    let program = match (format, ninja) {
        (Format::Ninja, Some(found)) => found,
        (Format::Ninja, None) => {
            let e = which::which(&options.ninja).err();
            return Err(missing(options, "ninja", e));
        }
        (Format::Make, ninja) => match which::which(&options.make) {
            Ok(found) => found,
            Err(e) if ninja.is_none() && options.backend.is_none() => {
                return Err(Fail::environment(format!(
                    "find a build tool: neither {} nor {} is on PATH ({e}); install ninja \
                     (ninja-build) or make",
                    options.ninja, options.make
                )))
            }
            Err(e) => return Err(missing(options, "make", Some(e))),
        },
    };
    Ok(Tool {
        build: Some((format, program)),
        state,
    })
}

/// The chosen build tool is not there: say which, as the user named it.
fn missing(options: &Options, tool: &str, e: Option<which::Error>) -> Fail {
    let program = if tool == "ninja" {
        &options.ninja
    } else {
        &options.make
    };
    let why = e
        .map(|e| e.to_string())
        .unwrap_or_else(|| "not found".into());
    Fail::environment(format!("find {tool} ({program}): {why}"))
}

/// The build tool's command line: its build file, `-j`, its output into the private
/// directory's log, and the parent's jobserver kept for the launchers alone.
pub(super) fn tool_command(
    format: Format,
    program: &std::path::Path,
    state_dir: &Utf8Path,
    log_path: &Utf8Path,
    tool_jobs: usize,
    source: &Source,
) -> Result<Command, Fail> {
    let mut cmd = Command::new(program);
    cmd.args([
        "-f",
        state_dir.join(format.file_name()).as_str(),
        "-j",
        &tool_jobs.to_string(),
    ]);
    if format == Format::Make {
        // -B: every job runs, even where an output of the same name is already there.
        cmd.args(["-B", "-r", "-R", "-s", "--no-print-directory"]);
    }
    // A make or ninja that joined the parent's jobserver would take a second token per job.
    for var in ["MAKEFLAGS", "MFLAGS", "MAKELEVEL", "CARGO_MAKEFLAGS"] {
        cmd.env_remove(var);
    }
    if let Source::Jobserver(client) = source {
        // For the launchers alone (in CARGO_MAKEFLAGS, which make and ninja ignore): a launcher
        // gives its job's token back itself if this process dies.
        client.configure(&mut cmd);
    }
    let log =
        File::create(log_path).map_err(|e| Fail::environment(format!("create {log_path}: {e}")))?;
    let log2 = log
        .try_clone()
        .map_err(|e| Fail::environment(format!("open {log_path}: {e}")))?;
    cmd.stdin(Stdio::null()).stdout(log).stderr(log2);
    Ok(cmd)
}
