//! Wrapper: what known job wrappers (distcc, icecc, ccache, ...) do with a ThinLTO backend job.
//!
//! It knows the measured behaviour of stock distcc 3.4 and icecream 1.4; it does not run them.

use std::path::Path;

/// What a wrapper will do with a backend job, when dtlto-bridge knows; None for others.
pub fn known_local(wrapper: &[String]) -> Option<String> {
    let first = wrapper.first()?;
    let name = Path::new(first).file_name()?.to_str()?;
    let why = "it ships one source file to another machine, but a ThinLTO backend job reads \
               a bitcode module, its index shard and every imported module";
    match name {
        "distcc" | "pump" => Some(format!(
            "{name} runs ThinLTO backend jobs on this machine: {why}. distcc caps such local jobs \
             at its local slots (DISTCC_HOSTS 'localhost/N', 4 by default) and, when a host is \
             down, backs off from it for 60 s. Use a launcher that takes explicit input lists \
             to run them elsewhere, or drop the wrapper"
        )),
        "icecc" | "icerun" => Some(format!(
            "{name} runs ThinLTO backend jobs on this machine: {why}. iceccd's local job limit \
             applies. Use a launcher that takes explicit input lists to run them elsewhere, or \
             drop the wrapper"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distcc_and_icecc_are_known_to_run_locally() {
        let table: &[(&[&str], Option<&str>)] = &[
            (
                &["distcc"],
                Some("distcc runs ThinLTO backend jobs on this machine"),
            ),
            (&["/usr/bin/distcc", "-v"], Some("distcc runs")),
            (&["icecc"], Some("icecc runs")),
            (&["ccache"], None),
            (&[], None),
        ];
        for (words, want) in table {
            let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            let got = known_local(&words);
            match want {
                Some(text) => assert!(got.as_deref().unwrap_or("").contains(text), "{words:?}"),
                None => assert_eq!(got, None, "{words:?}"),
            }
        }
    }
}
