//! dtlto-bridge: the entry point; parses the command line, dispatches, prints the error.
//!
//! It knows the subcommands and exit codes; the pipeline itself is parse → plan → render →
//! run → verify → report, one module each.

mod cancel;
mod cli;
mod doctor;
mod escape;
mod job;
mod parse;
mod plan;
mod render;
mod report;
mod run;
mod slots;
mod verify;
mod wrapper;

use clap::Parser;
use cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Command::Emit(args)) => run::emit(args),
        Some(Command::Doctor(args)) => doctor::doctor(args),
        Some(Command::Job(args)) => match job::run(args) {
            Ok(code) => std::process::exit(code),
            Err(e) => Err(report::Fail::environment(format!(
                "run job {}: {e:#}",
                args.index
            ))),
        },
        None => run::run(&cli.run),
    };
    if let Err(fail) = result {
        report::error(&fail.message);
        std::process::exit(fail.code);
    }
}
