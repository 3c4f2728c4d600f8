//! Manual: the man pages (clap_mangen) and shell completion scripts (clap_complete), both
//! generated from the command line's own definition in `cli`.
//!
//! It knows no option of its own; what the pages and the scripts say is what `--help` says.

use crate::cmd::cli::{Cli, ManArgs};
use crate::report::Fail;
use clap::CommandFactory;

/// `dtlto-bridge completions SHELL`: the script, to stdout.
pub fn completions(shell: &clap_complete::Shell) -> Result<(), Fail> {
    let mut out = Vec::new();
    clap_complete::generate(*shell, &mut Cli::command(), "dtlto-bridge", &mut out);
    print(&out, "the completion script")
}

/// `dtlto-bridge man [--dir DIR]`: the main page to stdout, or every page into DIR (the main
/// page lists its subcommands as `dtlto-bridge-doctor(1)` and so on).
pub fn man(args: &ManArgs) -> Result<(), Fail> {
    let mut main = Cli::command().disable_help_subcommand(true);
    main.build();
    let Some(dir) = &args.dir else {
        return print(&render(&main)?, "the manual page");
    };
    let mut pages = vec![(format!("{}.1", main.get_name()), render(&main)?)];
    for sub in main.get_subcommands().filter(|s| !s.is_hide_set()) {
        // build() named it as the main page's SEE ALSO does: dtlto-bridge-doctor.
        let name = sub.get_display_name().unwrap_or(sub.get_name());
        pages.push((format!("{name}.1"), render(sub)?));
    }
    for (file, text) in &pages {
        let path = dir.join(file);
        crate::job::util::whole::write_atomically(&path, |f| std::io::Write::write_all(f, text))
            .map_err(|e| Fail::environment(format!("write {path}: {e}")))?;
    }
    Ok(())
}

fn render(command: &clap::Command) -> Result<Vec<u8>, Fail> {
    let mut out = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut out)
        .map_err(|e| Fail::environment(format!("render the manual page: {e}")))?;
    Ok(out)
}

fn print(bytes: &[u8], what: &str) -> Result<(), Fail> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|e| Fail::environment(format!("write {what}: {e}")))
}
