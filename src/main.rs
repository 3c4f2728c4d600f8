//! dtlto-bridge: the entry point; parses the command line, dispatches, prints the error.
//!
//! It knows the subcommands and exit codes; the pipeline itself is parse → plan → render →
//! run → verify → report, one module each.

use clap::Parser;
use dtlto_bridge::cli::{Cli, Command};
use dtlto_bridge::{doctor, job, report, run};

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
