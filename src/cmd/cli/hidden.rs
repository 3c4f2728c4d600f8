//! Hidden: the command lines a run gives its own helpers (`__job`, `__guard`), read before the
//! command line's definition, so help, the manual and completions never show them, and a job's
//! start does not build the definition.
//!
//! It knows their words; it does not know what the helpers do.

use camino::Utf8PathBuf;

/// The command lines a run gives its own helpers, which no user types.
pub enum Hidden {
    /// `dtlto-bridge __job DIR N`, which generated build files run for each job.
    Job(Utf8PathBuf, usize),
    /// `dtlto-bridge __guard DIR`, the guard of the `--backend direct` run whose private
    /// directory is DIR (named so that `ps` tells which run it guards).
    Guard,
}

/// A helper's command line (`Hidden`): None for any other command line. It is no part of the
/// command-line definition, so help, the manual and completions never show it, and a job's
/// start does not build the definition.
pub fn hidden_args() -> Option<Result<Hidden, String>> {
    let mut args = std::env::args_os().skip(1);
    let first = args.next()?;
    if first == "__guard" {
        return Some(match (args.next(), args.next()) {
            (Some(_), None) => Ok(Hidden::Guard),
            _ => Err("run __guard: expected `__guard DIR` (a direct run starts it)".into()),
        });
    }
    if first != "__job" {
        return None;
    }
    let usage = "run __job: expected `__job DIR N` (generated build files run it)";
    Some(match (args.next(), args.next(), args.next()) {
        (Some(dir), Some(index), None) => {
            let dir = Utf8PathBuf::from_path_buf(dir.into())
                .map_err(|d| format!("{usage}: {d:?} is not UTF-8"));
            let index = index.to_str().and_then(|i| i.parse().ok());
            match (dir, index) {
                (Ok(dir), Some(index)) => Ok(Hidden::Job(dir, index)),
                (Err(e), _) => Err(e),
                (_, None) => Err(format!("{usage}: N is not a number")),
            }
        }
        _ => Err(usage.to_string()),
    })
}
