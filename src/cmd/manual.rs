//! Manual: the man page (clap_mangen) and shell completion scripts (clap_complete), both
//! generated from the command line's own definition in `cli`, printed to stdout.
//!
//! It knows no option of its own; what the page and the scripts say is what `--help` says.

use crate::cli::Cli;
use crate::report::Fail;
use clap::CommandFactory;

/// `dtlto-bridge completions SHELL`.
pub fn completions(shell: &clap_complete::Shell) -> Result<(), Fail> {
    let mut out = Vec::new();
    clap_complete::generate(*shell, &mut Cli::command(), "dtlto-bridge", &mut out);
    write(&out, "the completion script")
}

/// `dtlto-bridge man`: the page of the program and its options, with its subcommands listed.
pub fn man() -> Result<(), Fail> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .map_err(|e| Fail::environment(format!("render the manual page: {e}")))?;
    write(&out, "the manual page")
}

fn write(bytes: &[u8], what: &str) -> Result<(), Fail> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|e| Fail::environment(format!("write {what}: {e}")))
}
