//! dtlto-bridge: the entry point; parses the command line, dispatches, prints the error.
//!
//! It knows the subcommands and exit codes; the pipeline itself is parse → plan → render →
//! run → report, one module each.

use dtlto_bridge::cli::{self, Command};
use dtlto_bridge::{check, doctor, launcher, link, process, report, rexec, run, slots};

fn main() {
    let cli = cli::parse();
    let code = match &cli.command {
        Some(Command::Job(args)) => launcher::main(&args.state_dir, args.index),
        Some(Command::Emit(args)) => code(run::emit(args)),
        Some(Command::Doctor(args)) => code(doctor::doctor(args)),
        Some(Command::Check(args)) => code(check::check(args)),
        Some(Command::Rexec(args)) => match rexec::rexec(args) {
            Ok(code) => code,
            Err(fail) => code(Err(fail)),
        },
        Some(Command::Link(args)) => {
            supervised(|jobserver, watch| link::link(args, jobserver, watch))
        }
        None => supervised(|jobserver, watch| run::run(&cli.run, jobserver, watch)),
    };
    std::process::exit(code);
}

/// Runs a link under the signal watch, the parent's jobserver probed first.
fn supervised(
    body: impl FnOnce(jobserver::FromEnv, &process::Watch) -> Result<(), report::Fail>,
) -> i32 {
    // First, before any descriptor of our own is opened.
    let jobserver = slots::probe();
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
        Err(e) => code(Err(report::Fail::environment(format!(
            "watch signals: {e}"
        )))),
    }
}

fn code(result: Result<(), report::Fail>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(fail) => {
            report::error(&fail.message);
            fail.code
        }
    }
}
