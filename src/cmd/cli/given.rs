//! Given: a value as the user gave it — a path with its leading `~` expanded (no shell expands
//! it inside `-Xthinlto-distributor=` or a quoted variable), and `--option value` or
//! `VARIABLE=value`, whichever the value came from, for messages.
//!
//! It knows the variables' names (`DTLTO_BRIDGE_` and the option's name, as `args` names every
//! variable); it does not know clap.

use camino::Utf8PathBuf;

/// A path the user typed, with a leading `~` or `~/` replaced by the home directory: no shell
/// expands `~` inside `-Xthinlto-distributor=--save=~/dtlto` or in a quoted variable.
/// `~user` is left alone, and so is every other character.
pub fn user_path(text: &str) -> Result<Utf8PathBuf, String> {
    let rest = match text.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => return Ok(text.into()),
    };
    let home = std::env::home_dir()
        .filter(|h| !h.as_os_str().is_empty())
        .ok_or_else(|| format!("expand ~ in {text:?}: no home directory (HOME is not set)"))?;
    let home = Utf8PathBuf::from_path_buf(home)
        .map_err(|h| format!("expand ~ in {text:?}: the home directory {h:?} is not UTF-8"))?;
    Ok(format!("{home}{rest}").into())
}

/// A program the user typed: a path with a leading `~` expanded as `user_path` does; a bare
/// name (searched on PATH) as it is.
pub fn user_program(text: &str) -> Result<String, String> {
    user_path(text).map(String::from)
}

/// The variable of the option `--long`: `DTLTO_BRIDGE_` and its name in capitals, `-` as `_`
/// (every option's variable is so named: `args`'s tests hold it).
pub fn variable(long: &str) -> String {
    format!(
        "DTLTO_BRIDGE_{}",
        long.trim_start_matches('-')
            .to_uppercase()
            .replace('-', "_")
    )
}

/// The text of the variable `var`, when the value `value` came from it (as written, or with a
/// `~` expanded as `user_path` does).
pub fn holding(var: &str, value: &str) -> Option<String> {
    let raw = std::env::var(var).ok()?;
    let expanded = user_path(&raw).map(String::from).unwrap_or(raw.clone());
    (raw == value || expanded == value).then_some(raw)
}

/// `--option value`, or `VARIABLE=value` when the value is that variable's: how the user gave
/// it, for messages about options whose origins are not tracked.
pub fn as_given(option: &str, value: &str) -> String {
    let var = variable(option);
    match holding(&var, value) {
        Some(raw) => format!("{var}={raw}"),
        None => format!("{option} {value}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_tilde_is_the_home_directory_and_nothing_else_changes() {
        let home = std::env::home_dir().unwrap();
        let home = home.to_str().unwrap();
        for (typed, want) in [
            ("~", home.to_string()),
            ("~/keys/farm.headers", format!("{home}/keys/farm.headers")),
            ("~/", format!("{home}/")),
            ("~alice/keys", "~alice/keys".to_string()),
            ("keys/~/x", "keys/~/x".to_string()),
            ("/etc/~", "/etc/~".to_string()),
            ("$HOME/x", "$HOME/x".to_string()),
        ] {
            assert_eq!(user_path(typed).unwrap().as_str(), want, "{typed}");
        }
    }
}
