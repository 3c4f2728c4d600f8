//! Golden files for `link --emit` of a real link of examples/hello.
//!
//! `UPDATE_GOLDEN=1 cargo test --test e2e golden` rewrites tests/golden/ from the current output.

use crate::space::{Goldens, Space, BRIDGE, FORMATS};

/// `link --emit` of lld itself (no driver, so no paths of this machine's C runtime): the whole
/// flow as build.ninja and Makefile.
#[test]
fn emitted_link_files_match_the_golden_files() {
    let s = Space::new();
    let inputs = s.hello();
    std::fs::rename(s.path("greeting.o"), s.path("greet #1 (v2).o")).unwrap();
    let mut goldens = Goldens::new();
    for (format, ext) in FORMATS {
        let file = format!("link.{ext}");
        let mut cmd = s.bridge(&["link", "--backend", format, "--emit", &file]);
        cmd.args([
            "--compiler=clang-22",
            "--",
            "ld.lld-22",
            "-o",
            "prog",
            "-e",
            "main",
        ]);
        cmd.args(
            inputs
                .iter()
                .map(|i| i.replace("greeting.o", "greet #1 (v2).o")),
        );
        s.ok(&mut cmd);
        // The command that writes the file again names this build's binary, and the file's
        // absolute name this test's directory.
        let root = s.path("");
        let root = root.parent().unwrap().to_str().unwrap();
        let got = s
            .read(&file)
            .replace(BRIDGE, "dtlto-bridge")
            .replace(root, "/TEST");
        assert!(
            got.contains("dtlto-bridge link --quiet --emit-check --backend="),
            "{got}"
        );
        goldens.check(&format!("link.{ext}"), &got);
    }
    goldens.finish();
}
