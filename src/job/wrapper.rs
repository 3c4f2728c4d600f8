//! Wrapper: what known job wrappers (distcc, icecc, ccache, ...) do with a ThinLTO backend job,
//! and the placeholders `{inputs}` and `{outputs}` that give a wrapper a job's explicit lists.
//!
//! It knows what dtlto-bridge does through stock distcc 3.4 and icecream 1.4 (bundles) and what
//! ccache's release notes say; it does not run them.

use std::path::Path;

/// What a wrapper that runs backend jobs on this machine does with them, when dtlto-bridge
/// knows; None for others (distcc and icecc get bundles: `bundle`).
pub fn known_local(wrapper: &[String]) -> Option<String> {
    let first = wrapper.first()?;
    let name = Path::new(first).file_name()?.to_str()?;
    match name {
        "icerun" => Some(
            "icerun runs ThinLTO backend jobs on this machine, under iceccd's local job limit: \
             use icecc to send them to icecream's hosts"
                .to_string(),
        ),
        _ => None,
    }
}

/// What distcc or icecc do with a backend job through dtlto-bridge: each goes to a host as a
/// bundle that the host entry runs.
pub fn bundles(name: &str) -> String {
    format!(
        "{name} sends each ThinLTO backend job to its hosts as one bundle, run there by \
         dtlto-clang (`dtlto-bridge host setup` on each host; `dtlto-bridge host check \
         --wrapper {name}` sends a probe); a job a host refuses runs here"
    )
}

/// What ccache does with a backend job, given the version its `--version` printed (major,
/// minor) and as printed; it knows the release notes (backend jobs cached from 4.13 on), not the
/// hit rate, which dtlto-bridge has not measured.
pub fn ccache(version: Option<((u32, u32), &str)>) -> String {
    let shown = version.map_or("(version unknown)".to_string(), |(_, v)| v.to_string());
    match version {
        Some((v, _)) if v >= (4, 13) => format!(
            "ccache {shown} caches ThinLTO backend jobs (from 4.13 on), but its key includes the \
             index shard's path, which holds lld's process id, so a relink may miss; \
             dtlto-bridge has not measured its hit rate"
        ),
        Some(_) => format!(
            "ccache {shown} never caches ThinLTO backend jobs (-fthinlto-index= compiles are \
             cached from ccache 4.13 on): each job runs here as it would without it, plus \
             ccache's start-up"
        ),
        None => format!(
            "ccache {shown}: before 4.13 ccache never caches ThinLTO backend jobs \
             (-fthinlto-index= compiles)"
        ),
    }
}

/// Replaced, in any wrapper word, by the job's inputs, comma separated.
pub const INPUTS: &str = "{inputs}";
/// Replaced, in any wrapper word, by the job's outputs, comma separated.
pub const OUTPUTS: &str = "{outputs}";

/// Whether any wrapper word names a job's inputs or outputs.
pub fn has_placeholders(wrapper: &[String]) -> bool {
    wrapper
        .iter()
        .any(|w| w.contains(INPUTS) || w.contains(OUTPUTS))
}

/// The wrapper's words for one job, placeholders replaced (reclient's `rewrapper
/// --inputs={inputs} --output_files={outputs} --`, recc's `RECC_DEPS_OVERRIDE={inputs}`).
pub fn expand<S: AsRef<str>>(wrapper: &[String], inputs: &[S], outputs: &[S]) -> Vec<String> {
    let join = |list: &[S]| {
        list.iter()
            .map(AsRef::as_ref)
            .collect::<Vec<&str>>()
            .join(",")
    };
    if !has_placeholders(wrapper) {
        return wrapper.to_vec();
    }
    let (inputs, outputs) = (join(inputs), join(outputs));
    wrapper
        .iter()
        .map(|w| w.replace(INPUTS, &inputs).replace(OUTPUTS, &outputs))
        .collect()
}

/// Why the placeholders cannot name a job's paths: a path with a comma would be split.
pub fn placeholder_problem<S: AsRef<str>>(wrapper: &[String], paths: &[S]) -> Option<String> {
    if !has_placeholders(wrapper) {
        return None;
    }
    paths
        .iter()
        .map(AsRef::as_ref)
        .find(|p| p.contains(','))
        .map(|p| {
            format!(
            "the wrapper's {INPUTS}/{OUTPUTS} join paths with commas, and the path {p:?} has one"
        )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ccache_is_described_by_its_version() {
        for (version, want) in [
            (Some(((4, 7), "4.7.5")), "ccache 4.7.5 never caches"),
            (Some(((4, 12), "4.12.1")), "ccache 4.12.1 never caches"),
            (
                Some(((4, 13), "4.13")),
                "ccache 4.13 caches ThinLTO backend jobs",
            ),
            (
                Some(((5, 0), "5.0")),
                "ccache 5.0 caches ThinLTO backend jobs",
            ),
            (None, "ccache (version unknown): before 4.13"),
        ] {
            let text = ccache(version);
            assert!(text.starts_with(want), "{version:?}: {text}");
        }
    }

    #[test]
    fn placeholders_become_comma_separated_lists() {
        let w: Vec<String> = [
            "rewrapper",
            "--inputs={inputs}",
            "--output_files={outputs}",
            "--",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            expand(&w, &["a.o", "b c.o"], &["o.o"]),
            [
                "rewrapper",
                "--inputs=a.o,b c.o",
                "--output_files=o.o",
                "--"
            ]
        );
        let plain = vec!["distcc".to_string()];
        assert_eq!(expand(&plain, &["a,b.o"], &["o.o"]), plain);
        assert!(placeholder_problem(&plain, &["a,b.o"]).is_none());
        assert!(placeholder_problem(&w, &["a,b.o"])
            .unwrap()
            .contains("a,b.o"));
    }

    #[test]
    fn only_icerun_is_known_to_run_backend_jobs_here() {
        let table: &[(&[&str], Option<&str>)] = &[
            (
                &["icerun"],
                Some("icerun runs ThinLTO backend jobs on this machine"),
            ),
            (&["/usr/bin/icerun", "-v"], Some("icerun runs")),
            // They send bundles (`bundle`).
            (&["distcc"], None),
            (&["icecc"], None),
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
        assert!(bundles("distcc").starts_with("distcc sends each ThinLTO backend job"));
    }
}
