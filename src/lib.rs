//! dtlto-bridge as a library: the command-line program's layers, one folder each, imported one
//! way only (each may use those listed before it; `local` and `remote` stand side by side and
//! meet only in `engine`):
//!
//! `job` → `render` → `report` → (`local` | `remote`) → `link` → `cmd`
//!
//! Inside a folder, some modules stand below the rest of it: `job/util` (helpers) and
//! `job/store` (what a link remembers) below the job model; `link/engine` (the run) below the
//! classic flow; `cmd/cli` (the command line) below the subcommands.
//!
//! It exposes only what tests and the bench need — the job model (`job`) and the renderers
//! (`render`) — and `main`, the program's entry point; everything else is private.

mod cmd;
pub mod job;
mod link;
mod local;
mod remote;
pub mod render;
mod report;

use cmd::cli::{self, Command};
use link::engine;
use local::process;
use report::Fail;

/// The program: parses the command line, dispatches, prints the error; returns the exit code.
pub fn main() -> i32 {
    if let Some(code) = bundle_entries() {
        return code;
    }
    match cli::hidden_args() {
        Some(Ok(cli::Hidden::Job(dir, index))) => return local::launcher::main(&dir, index),
        Some(Ok(cli::Hidden::Guard)) => return local::guard::main(),
        Some(Err(e)) => return code(Err(Fail::bad_input(e))),
        None => {}
    }
    let cli = cli::parse();
    match &cli.command {
        Some(Command::Emit(args)) => code(cmd::emit::emit(args)),
        Some(Command::Doctor(args)) => code(cmd::doctor::doctor(args)),
        Some(Command::Completions { shell }) => code(cmd::manual::completions(shell)),
        Some(Command::Man(args)) => code(cmd::manual::man(args)),
        Some(Command::Check(args)) => code(cmd::check::check(args)),
        Some(Command::Host(host)) => code(cmd::host::host(host)),
        Some(Command::Rexec(args)) => match cmd::rexec::rexec(args) {
            Ok(code) => code,
            Err(fail) => code(Err(fail)),
        },
        Some(Command::Link(args)) => {
            if let (true, Some(file)) = (args.emit_check, &args.emit) {
                match link::emit_unchanged(file) {
                    Ok(true) => return 0,
                    Ok(false) => {}
                    Err(fail) => return code(Err(fail)),
                }
            }
            match args.options() {
                Ok(options) => {
                    supervised(|jobserver, watch| link::link(&options, jobserver, watch))
                }
                Err(e) => code(Err(Fail::bad_input(e))),
            }
        }
        None => match cli.run.options() {
            Ok(options) => supervised(|jobserver, watch| {
                engine::run(&options, cli.run.job_file(), jobserver, watch)
            }),
            Err(e) => code(Err(Fail::bad_input(e))),
        },
    }
}

/// The entries that are no command line of their own: reached as `dtlto-clang` (the host's
/// side of a bundle), or as `__send SPEC` (the link's side, from a job's launcher).
fn bundle_entries() -> Option<i32> {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let me = args.first()?;
    if remote::bundle::entry::reached(me) {
        return Some(remote::bundle::entry::main(
            std::path::Path::new(me),
            &args[1..],
        ));
    }
    match args.get(1..) {
        Some([first, spec]) if first == "__send" => {
            Some(remote::bundle::send::main(std::path::Path::new(spec)))
        }
        _ => None,
    }
}

/// Runs a link under the signal watch, the parent's jobserver probed first.
fn supervised(body: impl FnOnce(jobserver::FromEnv, &process::Watch) -> Result<(), Fail>) -> i32 {
    // First, before any descriptor of our own is opened.
    let jobserver = local::slots::probe();
    match process::Watch::start() {
        Ok(watch) => {
            let code = code(body(jobserver, &watch));
            // A signal that came at the end still counts; one that comes from now on
            // ends the process at once.
            match watch.finish() {
                Some(sig) if code == 0 => process::exit_code(sig),
                _ => code,
            }
        }
        Err(e) => code(Err(Fail::environment(format!("watch signals: {e}")))),
    }
}

/// The exit code of a result; a failure is printed here, the one place that prints it.
fn code(result: Result<(), Fail>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(fail) => {
            report::error(&fail.message);
            fail.code
        }
    }
}
