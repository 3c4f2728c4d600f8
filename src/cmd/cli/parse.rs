//! Parse: the command line and the environment read into `Cli`, with where each value came
//! from (`Origins`), and clap's errors said as one line naming what the user wrote (the
//! variable a bad value came from, or the option, and whether the linker passed it).
//!
//! It knows clap's matches and errors; it does not know what the options mean.

use super::args::{Cli, Command};
use crate::link::engine::{Origin, Origins};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};
use std::collections::BTreeMap;

/// Whether this process was started by a linker (lld runs its distributor itself).
fn started_by_linker() -> bool {
    let ppid = std::os::unix::process::parent_id();
    std::fs::read_to_string(format!("/proc/{ppid}/comm"))
        .is_ok_and(|c| c.starts_with("ld") || c.contains("lld"))
}

/// The variables this program reads.
const PREFIX: &str = "DTLTO_BRIDGE_";

/// Parses the command line and the environment, or says what is wrong and exits: 0 for help and
/// version, 2 for bad usage. An empty `DTLTO_BRIDGE_*` variable counts as unset.
pub fn parse() -> Cli {
    for (name, value) in std::env::vars_os() {
        if value.is_empty() && name.to_string_lossy().starts_with(PREFIX) {
            std::env::remove_var(&name);
        }
    }
    let matches = match Cli::command().try_get_matches() {
        Ok(m) => m,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            e.exit()
        }
        Err(e) => {
            crate::report::error(&explain(&e));
            std::process::exit(crate::report::EXIT_BAD_INPUT);
        }
    };
    let mut cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => {
            crate::report::error(&explain(&e));
            std::process::exit(crate::report::EXIT_BAD_INPUT);
        }
    };
    let linker = started_by_linker();
    let mut origins = BTreeMap::new();
    let command = Cli::command();
    let sub = matches.subcommand();
    let (args, scope) = match sub {
        Some((name, m)) => (m, command.find_subcommand(name).cloned()),
        None => (&matches, Some(command)),
    };
    if let Some(scope) = scope {
        for arg in scope.get_arguments() {
            let id = arg.get_id().as_str();
            match args.value_source(id) {
                Some(ValueSource::CommandLine) => {
                    origins.insert(id.to_string(), Origin::Flag { linker });
                }
                Some(ValueSource::EnvVariable) => {
                    let var = arg.get_env().map(|v| v.to_string_lossy().into_owned());
                    origins.insert(id.to_string(), Origin::Env(var.unwrap_or_default()));
                }
                _ => {}
            }
        }
    }
    match &mut cli.command {
        Some(Command::Link(link)) => link.run.origins = Origins(origins),
        _ => cli.run.origins = Origins(origins),
    }
    cli
}

/// The environment variable of the option `--long` (of the run or of any subcommand).
fn variable_of(long: &str) -> Option<String> {
    let command = Cli::command();
    let found = command
        .get_arguments()
        .chain(command.get_subcommands().flat_map(|c| c.get_arguments()))
        .find(|a| a.get_long() == Some(long))
        .and_then(|a| a.get_env())
        .map(|v| v.to_string_lossy().into_owned());
    found
}

/// clap's error as one line naming what the user wrote: the variable a bad value came from, or
/// the option and, when the linker passed it, that it did (clap's tips would not apply).
fn explain(e: &clap::Error) -> String {
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => Some(v.join(", ")),
        _ => None,
    };
    let arg = text(ContextKind::InvalidArg).unwrap_or_default();
    let value = text(ContextKind::InvalidValue).unwrap_or_default();
    let valid = text(ContextKind::ValidValue).map(|v| format!("; possible values: {v}"));
    let by_linker = if started_by_linker() {
        " (passed by the linker: -Xthinlto-distributor= or --thinlto-distributor-arg=)"
    } else {
        ""
    };
    // The option's variable, when the bad value is that variable's.
    let long = arg
        .split([' ', '='])
        .next()
        .unwrap_or("")
        .trim_start_matches('-');
    let variable = variable_holding(long, &value).map(|(var, _)| var);
    let cause = std::error::Error::source(e)
        .map(|s| format!(": {s}"))
        .unwrap_or_default();
    match e.kind() {
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => match variable {
            Some(var) => format!(
                "{var}={value}: invalid value{cause}{}",
                valid.unwrap_or_default()
            ),
            None => format!(
                "{} {}: invalid value{cause}{}{by_linker}",
                arg.split(' ').next().unwrap_or(&arg),
                crate::render::escape::shell_word(&value),
                valid.unwrap_or_default()
            ),
        },
        ErrorKind::UnknownArgument => {
            let hint = text(ContextKind::SuggestedArg)
                .map(|s| format!("; did you mean {s}?"))
                .unwrap_or_default();
            format!("unknown option {arg}{hint}{by_linker}")
        }
        // --remote-client-cert without --remote-client-key, and the like: named as an option
        // and, where it has one, as its variable.
        ErrorKind::MissingRequiredArgument => {
            let names: Vec<String> = arg
                .split(", ")
                .map(|a| {
                    let long = a.split([' ', '=']).next().unwrap_or(a);
                    match variable_of(long.trim_start_matches('-')) {
                        Some(var) if long.starts_with("--") => format!("{a} (or {var})"),
                        _ => a.to_string(),
                    }
                })
                .collect();
            format!("missing {}", names.join(", "))
        }
        _ => {
            let rendered = e.to_string();
            let first = rendered
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ");
            format!("{first}{by_linker}")
        }
    }
}

/// The variable of the option `--long` and its text, when the option's value `value` came from
/// it (`given::holding`).
fn variable_holding(long: &str, value: &str) -> Option<(String, String)> {
    let var = variable_of(long)?;
    super::given::holding(&var, value).map(|raw| (var, raw))
}
