//! Bad days in real links: wrappers that fail or lie, local fallback, concurrent links of one
//! output (distcc and its hosts: `hosts`).

use crate::space::{assert_linked, stderr, wrapper_arg, Space, BAD_WRAPPERS, BRIDGE, HELLO};
use std::path::Path;
use std::process::{Child, Stdio};

#[test]
fn a_failing_wrapper_falls_back_to_a_local_run_with_every_backend() {
    let s = Space::new();
    let inputs = s.hello();
    for (name, body) in BAD_WRAPPERS {
        s.script(name, body);
        for backend in ["--backend=ninja", "--backend=make", "--backend=direct"] {
            let out = s.link(
                Path::new(BRIDGE),
                &[backend, &wrapper_arg(&s, name)],
                &inputs,
                "hello",
            );
            assert_linked(&out);
            assert_eq!(s.run_program("hello"), HELLO, "{name} {backend}");
            let err = stderr(&out);
            assert!(
                err.contains("failed through the wrapper ("),
                "{name}: {err}"
            );
            assert!(err.contains("and was run again locally"), "{name}: {err}");
            let why = match name {
                "fails.sh" => "(exit status 1)",
                "nothing.sh" => "but it did not write",
                _ => ", a truncated or damaged ELF object",
            };
            assert!(err.contains(why), "{name}: {err}");
            if name == "fails.sh" {
                assert!(
                    err.contains("remote host refused"),
                    "the wrapper's stderr is shown: {err}"
                );
            }
            std::fs::remove_file(s.path("hello")).unwrap();
        }
    }
    assert_eq!(
        s.read("wrapper.log").lines().count(),
        3 * 3 * 5,
        "every job went through the wrapper"
    );
}

#[test]
fn no_fallback_fails_the_link_instead() {
    let s = Space::new();
    let inputs = s.hello();
    s.script("fails.sh", BAD_WRAPPERS[0].1);
    let out = s.link(
        Path::new(BRIDGE),
        &["--no-fallback", &wrapper_arg(&s, "fails.sh")],
        &inputs,
        "hello",
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("exit status 1"), "{err}");
    assert!(err.contains("remote host refused"), "{err}");
    assert!(!err.contains("run again locally"), "{err}");
    assert!(!s.exists("hello"));
}

/// Two links of the same output in one directory at once (only lld's process ids differ in
/// their file names) never clash on temporary or build files.
#[test]
fn concurrent_links_of_one_output_in_one_directory_do_not_clash() {
    let s = Space::new();
    let inputs = s.hello();
    for backend in ["ninja", "make"] {
        let links: Vec<Child> = (0..2)
            .map(|_| {
                let mut cmd = s.command(
                    "clang-22",
                    &["-O2", "-flto=thin", "-fuse-ld=lld-22", "-o", "hello"],
                );
                cmd.arg(format!("-fthinlto-distributor={BRIDGE}"))
                    .arg(format!("-Xthinlto-distributor=--backend={backend}"))
                    .args(&inputs)
                    .stderr(Stdio::piped());
                cmd.spawn().unwrap()
            })
            .collect();
        for link in links {
            assert_linked(&link.wait_with_output().unwrap());
        }
        assert_eq!(s.run_program("hello"), HELLO);
        assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
        assert!(s.files_matching("dist-file").is_empty());
    }
}
