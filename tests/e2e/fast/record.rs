//! What a user sees of a run of `sh` jobs off a terminal: the summary line, or nothing.

use crate::space::{object, stderr, Space};

/// Off a terminal (under ninja, in a build log) a successful link prints nothing, unless the
/// summary is asked for; `--quiet` silences it even then.
#[test]
fn the_summary_shows_on_a_terminal_or_when_asked_and_quiet_wins() {
    let s = Space::new();
    s.write("in.o", &object());
    s.write(
        "j.json",
        r#"{"common":{"linker_output":"p","args":["cp"],"inputs":[]},
            "jobs":[{"args":["in.o","out.o"],"inputs":["in.o"],"outputs":["out.o"]}]}"#,
    );
    let out = s.ok(&mut s.bridge(&["j.json"]));
    assert_eq!(stderr(&out), "", "nothing off a terminal");
    let out = s.ok(s.bridge(&["j.json"]).env("DTLTO_BRIDGE_SUMMARY", "1"));
    assert!(
        stderr(&out).starts_with("dtlto-bridge: 1 job (1 local"),
        "{}",
        stderr(&out)
    );
    assert!(
        !stderr(&out).contains("running"),
        "no progress line without a terminal"
    );
    let out = s.ok(&mut s.bridge(&["--quiet", "--summary", "j.json"]));
    assert_eq!(stderr(&out), "");
}
