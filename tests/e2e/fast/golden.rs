//! Golden files for `emit` of job files, and the real tools reading them back.
//!
//! `UPDATE_GOLDEN=1 cargo test --test e2e golden` rewrites tests/golden/ from the current output
//! (this file's and full/golden.rs's).

use crate::space::{require, Goldens, Space, FORMATS};
use std::path::{Path, PathBuf};

const CASES: [&str; 3] = ["hello", "nasty", "placeholder"];

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(format!("{name}.json"))
}

fn emit(s: &Space, name: &str, format: &str, wrapper: &str) -> String {
    let json = format!("{name}.json");
    std::fs::copy(data(name), s.path(&json)).unwrap();
    let out = s.ok(&mut s.bridge(&["emit", "--format", format, "--wrapper", wrapper, &json]));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn emitted_files_match_the_golden_files() {
    let s = Space::new();
    let mut goldens = Goldens::new();
    // (golden file, job file, wrapper): `lists` gives each job its own wrapper words.
    let mut cases: Vec<(&str, &str, &str)> = CASES
        .iter()
        .map(|n| {
            (
                *n,
                *n,
                if *n == "nasty" {
                    "distcc --opt='a b'"
                } else {
                    ""
                },
            )
        })
        .collect();
    cases.push((
        "lists",
        "hello",
        "rewrapper --inputs={inputs} --output_files={outputs} --",
    ));
    for (golden_name, name, wrapper) in cases {
        for (format, ext) in FORMATS {
            let got = emit(&s, name, format, wrapper);
            goldens.check(&format!("{golden_name}.{ext}"), &got);
        }
    }
    goldens.finish();
}

/// The job commands, wrapper first, as dtlto-bridge's own parser reads them.
fn expected_commands(name: &str, wrapper: &[&str]) -> Vec<Vec<String>> {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data(name)).unwrap()).unwrap();
    let common: Vec<String> = v["common"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let mut all: Vec<Vec<String>> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            let mut cmd: Vec<String> = wrapper.iter().map(|w| w.to_string()).collect();
            cmd.extend(common.iter().cloned());
            cmd.extend(
                j["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_string()),
            );
            cmd
        })
        .collect();
    all.sort();
    all
}

/// Real ninja (`-t commands`) and make (`-n`) read the emitted files back into exactly the job
/// commands: the escaping is right as the tools themselves see it.
#[test]
fn ninja_and_make_read_back_the_exact_commands() {
    require("ninja");
    require("make");
    let s = Space::new();
    for name in ["hello", "nasty"] {
        let wrapper = ["distcc", "--opt=a b"];
        let expected = expected_commands(name, &wrapper);
        for (format, tool_args) in [
            ("ninja", &["-t", "commands"][..]),
            ("make", &["-n", "-s", "--no-print-directory"][..]),
        ] {
            let text = emit(&s, name, format, "distcc --opt='a b'");
            let file = format!("{name}.{format}");
            s.write(&file, &text);
            // Make checks prerequisites exist before printing recipes; ninja does not care.
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(data(name)).unwrap()).unwrap();
            let common = v["common"]["inputs"].as_array().unwrap().iter();
            let jobs = v["jobs"].as_array().unwrap().iter();
            for input in common.chain(jobs.flat_map(|j| j["inputs"].as_array().unwrap())) {
                let p = s.path(input.as_str().unwrap());
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, "x").unwrap();
            }
            let mut args = vec!["-f", file.as_str()];
            args.extend(tool_args);
            let out = s.ok(&mut s.command(format, &args));
            let mut got: Vec<Vec<String>> = String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(|l| shell_words::split(l).unwrap())
                .collect();
            got.sort();
            assert_eq!(got, expected, "{name} through {format}");
        }
    }
}
