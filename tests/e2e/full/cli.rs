//! The binary where it meets the toolchain: `doctor` (which asks clang-22 and ld.lld-22, and
//! the wrappers distcc and ccache), and bad options passed by a real link.

use crate::space::{run, sh_jobs as jobs, stderr, Space, BRIDGE};
use std::path::Path;

#[test]
fn doctor_reports_tools_jobserver_and_wrapper() {
    let s = Space::new();
    let out = s.ok(&mut s.bridge(&["doctor", "--wrapper", "distcc"]));
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "clang:     ",
        "supports DTLTO (-fthinlto-distributor=)",
        "supports DTLTO (--thinlto-distributor=)",
        "ninja:     ",
        "make:      ",
        "jobserver: none in the environment",
        "wrapper:   distcc sends each ThinLTO backend job to its hosts as one bundle",
        "ok: dtlto-bridge can run links here",
    ] {
        assert!(text.contains(want), "doctor lacks {want:?}:\n{text}");
    }
    // ccache, by its version: Debian bookworm's 4.7.5 predates ThinLTO backend caching (4.13).
    let version = String::from_utf8(s.ok(&mut s.command("ccache", &["--version"])).stdout).unwrap();
    let version = version.split_whitespace().nth(2).unwrap().to_string();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let caches = (parts.next().unwrap(), parts.next().unwrap_or(0)) >= (4, 13);
    let out = s.ok(&mut s.bridge(&["doctor", "--wrapper", "ccache"]));
    let text = String::from_utf8(out.stdout).unwrap();
    let want = if caches {
        format!("wrapper:   ccache {version} caches ThinLTO backend jobs")
    } else {
        format!("wrapper:   ccache {version} never caches ThinLTO backend jobs")
    };
    assert!(text.contains(&want), "{want}:\n{text}");

    let out = run(
        &s,
        &[
            "doctor",
            "--backend=make",
            "--make=no-such-make",
            "--wrapper=no-such-wrapper",
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("make:      MISSING: no-such-make is not on PATH"),
        "{text}"
    );
    assert!(
        stderr(&out).contains("missing or unusable: make, wrapper"),
        "{}",
        stderr(&out)
    );

    // Under make: with '+' the jobserver is usable; without it make 4.3 closes the descriptors.
    s.write(
        "outer.mk",
        &format!(
            "all:\n\t+'{0}' doctor > plus.txt\n\t'{0}' doctor > plain.txt\n",
            crate::space::BRIDGE
        ),
    );
    s.ok(&mut s.command("make", &["-j2", "-f", "outer.mk"]));
    assert!(
        s.read("plus.txt")
            .contains("jobserver: usable, from MAKEFLAGS="),
        "{}",
        s.read("plus.txt")
    );
    assert!(
        s.read("plain.txt").contains("but unusable") && s.read("plain.txt").contains("'+'"),
        "{}",
        s.read("plain.txt")
    );
}

/// A bad value names where it came from: the variable, or the option (and that the linker
/// passed it); an unknown option gets no clap tip that cannot apply; every line is prefixed.
#[test]
fn bad_values_name_the_variable_or_option_they_came_from() {
    let s = Space::new();
    s.write("j.json", &jobs(&[]));
    let out = s
        .bridge(&["j.json"])
        .env("DTLTO_BRIDGE_BACKEND", "bazel")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "dtlto-bridge: error: DTLTO_BRIDGE_BACKEND=bazel: invalid value; possible values: ninja, make, direct\n"
    );
    let out = run(&s, &["--jobs=0", "j.json"]);
    assert!(
        stderr(&out).starts_with("dtlto-bridge: error: --jobs 0: invalid value"),
        "{}",
        stderr(&out)
    );
    let out = run(&s, &["--bakend=make", "j.json"]);
    assert_eq!(
        stderr(&out),
        "dtlto-bridge: error: unknown option --bakend; did you mean --backend?\n"
    );
    // Through the linker.
    let inputs = s.hello();
    let out = s.link(Path::new(BRIDGE), &["--bogus"], &inputs, "hello");
    let err = stderr(&out);
    assert!(
        err.contains("dtlto-bridge: error: unknown option --bogus (passed by the linker: -Xthinlto-distributor= or --thinlto-distributor-arg=)"),
        "{err}"
    );
    assert!(!err.contains("tip:"), "{err}");
    for line in err
        .lines()
        .filter(|l| !l.starts_with("ld.lld") && !l.starts_with("clang"))
    {
        assert!(line.starts_with("dtlto-bridge: "), "{line:?} in {err}");
    }
}
