//! The recipes of the README, run as a user would from the projects in examples/: cargo (pure
//! Rust, and Rust with C through the cc crate), CMake (Ninja and Makefile generators, through a
//! toolchain file), and make. Each build is checked with `dtlto-bridge check`, so a recipe that
//! silently skips DTLTO fails here.

use crate::space::{require, stderr, Space, BRIDGE};
use std::path::{Path, PathBuf};
use std::process::Output;

fn example(name: &str) -> PathBuf {
    crate::space::examples().join(name)
}

/// Copies an example project into the space (the repository stays clean).
fn copy_example(s: &Space, name: &str) -> PathBuf {
    let to = s.path(name);
    s.ok(&mut s.command(
        "cp",
        &["-r", example(name).to_str().unwrap(), to.to_str().unwrap()],
    ));
    to
}

/// `(linker output, jobs)` for each link `check` listed.
fn checked_links(out: &Output) -> Vec<(String, u64)> {
    stderr(out)
        .lines()
        .filter_map(|l| l.strip_prefix("dtlto-bridge: check: "))
        .filter_map(|l| {
            let (output, rest) = l.split_once(" in ")?;
            let jobs = rest.split(": ").nth(1)?.split(' ').next()?.parse().ok()?;
            Some((output.to_string(), jobs))
        })
        .collect()
}

/// `sh -c SCRIPT` in `dir`, after sourcing examples/cargo-dtlto.sh.
fn cargo_build(s: &Space, dir: &Path, script: &str) -> Output {
    require("cargo");
    let env = example("cargo-dtlto.sh");
    let mut cmd = s.command("sh", &["-c", &format!(". '{}' && {script}", env.display())]);
    cmd.current_dir(dir)
        .env("DTLTO_BRIDGE", BRIDGE)
        .env("CARGO_TARGET_DIR", dir.join("target"));
    cmd.output().unwrap()
}

#[test]
fn cargo_pure_rust_links_through_dtlto() {
    let s = Space::new();
    let dir = copy_example(&s, "cargo-rust");
    let check = format!("'{BRIDGE}' check -- cargo build --offline --locked --release");
    let out = cargo_build(&s, &dir, &check);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let links = checked_links(&out);
    let (_, jobs) = links
        .iter()
        .find(|(o, _)| o.contains("/deps/shapes-"))
        .unwrap_or_else(|| panic!("no link of the program: {err}"));
    assert!(*jobs >= 1, "{err}");
    assert!(
        err.contains("linker stderr: dtlto-bridge: "),
        "-W linker-messages shows the summary: {err}"
    );
    let run = s.ok(&mut s.program(&dir.join("target/release/shapes"), &[]));
    assert_eq!(String::from_utf8_lossy(&run.stdout), "total area 7.14\n");

    // Without -flto=thin on the link, clang drops the distributor and nothing shows: check says so.
    s.ok(&mut s.command("rm", &["-rf", dir.join("target").to_str().unwrap()]));
    let without =
        format!("RUSTFLAGS=$(echo \"$RUSTFLAGS\" | sed 's/-C link-arg=-flto=thin//') && {check}");
    let out = cargo_build(&s, &dir, &without);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no link went through dtlto-bridge")
            && stderr(&out).contains("-C link-arg=-flto=thin"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn cargo_rust_and_c_link_through_dtlto() {
    let s = Space::new();
    let dir = copy_example(&s, "cargo-c");
    let out = cargo_build(
        &s,
        &dir,
        &format!("'{BRIDGE}' check -- cargo build --offline --locked --release"),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let links = checked_links(&out);
    let (_, jobs) = links
        .iter()
        .find(|(o, _)| o.contains("/deps/mixer-"))
        .unwrap_or_else(|| panic!("no link of the program: {err}"));
    // The Rust code's codegen units and the C module from libmix.a.
    assert!(*jobs >= 2, "{links:?}");
    let run = s.ok(&mut s.program(&dir.join("target/release/mixer"), &[]));
    assert_eq!(String::from_utf8_lossy(&run.stdout), "mix = 65\n");
}

fn cmake_build(generator: &str) -> (Space, Output) {
    require("cmake");
    let s = Space::new();
    let build = s.path("build");
    let configure = s
        .command(
            "cmake",
            &[
                "-G",
                generator,
                &format!(
                    "-DCMAKE_TOOLCHAIN_FILE={}",
                    example("cmake/dtlto-toolchain.cmake").display()
                ),
                "-S",
                example("cmake/project").to_str().unwrap(),
                "-B",
                build.to_str().unwrap(),
            ],
        )
        .env("DTLTO_BRIDGE", BRIDGE)
        .output()
        .unwrap();
    assert!(configure.status.success(), "{}", stderr(&configure));
    let out = s
        .command(
            BRIDGE,
            &[
                "check",
                "--",
                "cmake",
                "--build",
                build.to_str().unwrap(),
                "-j2",
            ],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{generator}: {}", stderr(&out));
    let links = checked_links(&out);
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!(links[0].1, 3, "main, add and mul: {links:?}");
    let run = s.ok(&mut s.program(&build.join("calc-demo"), &[]));
    assert_eq!(String::from_utf8_lossy(&run.stdout), "calc: add=5 mul=20\n");
    (s, out)
}

#[test]
fn cmake_with_the_ninja_generator() {
    let (_s, out) = cmake_build("Ninja");
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
}

/// Under make 4.3, CMake's Makefile generator writes link recipes without '+': the links share
/// the host pool, and the advice (which names what a CMake user can do) comes once.
#[test]
fn cmake_with_the_makefile_generator() {
    let (_s, out) = cmake_build("Unix Makefiles");
    let err = stderr(&out);
    assert_eq!(err.matches("dtlto-bridge: warning:").count(), 1, "{err}");
    assert!(err.contains("use make 4.4 or the Ninja generator"), "{err}");
}

/// The make recipe: the link's recipe marked '+', so its jobs share make's slots; no warning.
#[test]
fn make_with_a_plus_recipe() {
    let s = Space::new();
    let out = s
        .command(
            BRIDGE,
            &[
                "check",
                "--",
                "make",
                "-j2",
                "-f",
                example("make/Makefile").to_str().unwrap(),
                &format!("DTLTO_BRIDGE={BRIDGE}"),
            ],
        )
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(checked_links(&out), [("hello".to_string(), 5)]);
    assert_eq!(
        s.run_program("hello"),
        "hello from dtlto-bridge: add=5 mul=20 square=36\n"
    );
}
