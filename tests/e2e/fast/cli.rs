//! The binary on hand-written job files of `sh` jobs: bad input, failing jobs, options and their
//! environment.

use crate::space::{object, require, run, sh_jobs as jobs, stderr, Space};
use std::process::Output;

fn all_backends() -> [&'static str; 3] {
    require("ninja");
    require("make");
    ["--backend=ninja", "--backend=make", "--backend=direct"]
}

#[test]
fn help_and_version() {
    let s = Space::new();
    let help = String::from_utf8(s.ok(&mut s.bridge(&["--help"])).stdout).unwrap();
    for text in [
        "-fthinlto-distributor",
        "DTLTO_BRIDGE_WRAPPER",
        "emit",
        "Exit status",
    ] {
        assert!(help.contains(text), "--help lacks {text}:\n{help}");
    }
    let version = String::from_utf8(s.ok(&mut s.bridge(&["--version"])).stdout).unwrap();
    assert_eq!(
        version.trim(),
        format!("dtlto-bridge {}", env!("CARGO_PKG_VERSION"))
    );
}

/// The man page and the completion scripts come from the same definition as --help.
#[test]
fn a_manual_page_and_completion_scripts_are_generated() {
    let s = Space::new();
    let man = String::from_utf8(s.ok(&mut s.bridge(&["man"])).stdout).unwrap();
    assert!(man.contains(".TH dtlto-bridge 1"), "{man}");
    for text in [
        ".SH SUBCOMMANDS",
        "remote\\-client\\-cert",
        "DTLTO_BRIDGE_REMOTE_CLIENT_CERT",
    ] {
        assert!(man.contains(text), "the page lacks {text}:\n{man}");
    }
    let bash = s.ok(&mut s.bridge(&["completions", "bash"])).stdout;
    s.write("completion.bash", std::str::from_utf8(&bash).unwrap());
    // bash loads the script and then knows how to complete the command.
    let out = s.ok(&mut s.command(
        "bash",
        &["-c", ". ./completion.bash && complete -p dtlto-bridge"],
    ));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("dtlto-bridge"),
        "{}",
        stderr(&out)
    );
    let bash = String::from_utf8_lossy(&bash);
    assert!(bash.contains("--remote-client-key"));
    // The launcher's internal command is no part of the definition.
    assert!(!bash.contains("__job"));
    assert!(!man.contains("__job"));
    // Every page, into a directory: one per subcommand, as the main page's SEE ALSO names them.
    let pages = s.tmp.with_file_name("man1");
    std::fs::create_dir(&pages).unwrap();
    s.ok(&mut s.bridge(&["man", "--dir", pages.to_str().unwrap()]));
    let doctor = std::fs::read_to_string(pages.join("dtlto-bridge-doctor.1")).unwrap();
    assert!(doctor.contains("remote\\-client\\-cert"), "{doctor}");
    assert!(man.contains("dtlto\\-bridge\\-doctor(1)"), "{man}");
    let out = run(&s, &["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// A leading `~` in a file option is the home directory, since no shell expands it inside
/// -Xthinlto-distributor= (here: `--report=~/...` with HOME set for the run).
#[test]
fn a_leading_tilde_in_a_file_option_is_the_home_directory() {
    let s = Space::new();
    let home = s.tmp.with_file_name("home");
    std::fs::create_dir(&home).unwrap();
    s.write("j.json", &jobs(&[(concat!(obj!(), " > o1"), &[], &["o1"])]));
    let mut cmd = s.bridge(&["--backend=make", "--report=~/links/report.json", "j.json"]);
    std::fs::create_dir(home.join("links")).unwrap();
    cmd.env("HOME", &home);
    s.ok(&mut cmd);
    let report = std::fs::read_to_string(home.join("links/report.json")).unwrap();
    assert!(report.contains("\"jobs\""), "{report}");
}

#[test]
fn malformed_job_files_are_rejected_with_their_location() {
    let s = Space::new();
    let cases = [
        ("{\"common\": {", "line 1, column 12: invalid JSON"),
        (
            r#"{"common":{"linker_output":"p","args":["cc"]},"jobs":[{"args":[],"inputs":[],"outputs":[]}]}"#,
            "jobs[0].outputs: is empty",
        ),
        (
            r#"{"common":{"linker_output":"p","args":[]},"jobs":[]}"#,
            "common.args: is empty",
        ),
        (
            r#"{"common":{"linker_output":"p","args":["cc",["primary_output",2]]},"jobs":[{"primary_input":["a"],"summary_index":["i"],"primary_output":["o"]}]}"#,
            "common.args[1][1]: index 2 is out of range",
        ),
    ];
    for (text, message) in cases {
        s.write("bad.json", text);
        let out = run(&s, &["bad.json"]);
        assert_eq!(out.status.code(), Some(2), "{text}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "dtlto-bridge: error: parse job file bad.json: {message}"
            )),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let out = run(&s, &["absent.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("read job file absent.json: No such file"));
}

#[test]
fn missing_inputs_are_listed_and_nothing_runs() {
    let s = Space::new();
    s.write("here.o", "x");
    s.write(
        "j.json",
        &jobs(&[
            ("touch ran0 out0", &["here.o", "gone one.o"], &["out0"]),
            ("touch ran1 out1", &["gone two.o"], &["out1"]),
        ]),
    );
    for backend in all_backends() {
        let out = run(&s, &[backend, "j.json"]);
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert!(err.contains("2 input file(s) do not exist"), "{err}");
        assert!(err.contains("jobs[0] (out0): \"gone one.o\""), "{err}");
        assert!(err.contains("jobs[1] (out1): \"gone two.o\""), "{err}");
        assert!(!s.exists("ran0") && !s.exists("ran1"));
        assert!(s.leftovers().is_empty());
    }
}

#[test]
fn a_failing_job_reports_its_command_and_stderr_and_leaves_no_partial_output() {
    let s = Space::new();
    s.write("in.o", &object());
    s.write(
        "j.json",
        &jobs(&[
            (
                "echo partial > out0; echo boom >&2; exit 3",
                &["in.o"],
                &["out0"],
            ),
            (concat!(obj!(), " > out1"), &["in.o"], &["out1"]),
        ]),
    );
    for backend in all_backends() {
        let out = run(&s, &[backend, "--jobs=1", "j.json"]);
        assert_eq!(out.status.code(), Some(1), "{backend}");
        let err = stderr(&out);
        assert!(err.contains("run job 0 (out0): exit status 3"), "{err}");
        assert!(
            err.contains("command: sh -c 'echo partial > out0; echo boom >&2; exit 3'"),
            "{err}"
        );
        assert!(err.contains("stderr:\ndtlto-bridge:     boom"), "{err}");
        assert!(err.contains("run backend jobs: 1 of 2 failed"), "{err}");
        assert!(!s.exists("out0"), "{backend} left a partial output");
        assert!(s.leftovers().is_empty());
    }
}

#[test]
fn a_job_that_writes_nothing_or_an_empty_file_fails() {
    let s = Space::new();
    s.write("in.o", &object());
    s.write(
        "j.json",
        &jobs(&[
            ("true", &["in.o"], &["none.o"]),
            (": > empty.o", &["in.o"], &["empty.o"]),
        ]),
    );
    for backend in all_backends() {
        let out = run(&s, &[backend, "j.json"]);
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(
            err.contains("run job 0 (none.o): exit status 0, but it did not write none.o"),
            "{err}"
        );
        assert!(
            err.contains("run job 1 (empty.o): exit status 0, but it wrote an empty empty.o"),
            "{err}"
        );
        assert!(!s.exists("empty.o"));
    }
}

#[test]
fn a_missing_program_is_a_job_failure() {
    let s = Space::new();
    s.write(
        "j.json",
        r#"{"common":{"linker_output":"p","args":["no-such-compiler-xyz"],"inputs":[]},
            "jobs":[{"args":["-c"],"inputs":[],"outputs":["o"]},
                    {"args":["-c"],"inputs":[],"outputs":["o2"]}]}"#,
    );
    // Under direct, the start fails on the thread that decided it, once it released the run's
    // lock, and the core hears of it as of a command's end.
    for backend in ["--backend=ninja", "--backend=direct"] {
        let out = run(&s, &[backend, "--jobs=1", "--order=file", "j.json"]);
        assert_eq!(out.status.code(), Some(1), "{backend}");
        assert!(
            stderr(&out).contains("run job 0 (o): could not start: no-such-compiler-xyz"),
            "{backend}: {}",
            stderr(&out)
        );
    }
}

/// Under direct, a command that cannot start after another ended fails on the thread that saw
/// that end (here, the compiler deletes itself), and the run ends.
#[test]
fn a_program_gone_during_the_run_fails_the_next_job_under_direct() {
    let s = Space::new();
    s.write("x.o", &object());
    s.script("cc", "rm -f \"$0\"; cp \"$1\" \"$2\"");
    s.write(
        "j.json",
        r#"{"common":{"linker_output":"p","args":["./cc"],"inputs":[]},
            "jobs":[{"args":["x.o","a.o"],"inputs":["x.o"],"outputs":["a.o"]},
                    {"args":["x.o","b.o"],"inputs":["x.o"],"outputs":["b.o"]}]}"#,
    );
    let out = run(
        &s,
        &["--backend=direct", "--jobs=1", "--order=file", "j.json"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("run job 1 (b.o): could not start: ./cc"),
        "{err}"
    );
    assert!(!s.exists("cc"), "the first job ran");
}

#[test]
fn an_empty_job_list_succeeds_without_running_anything() {
    let s = Space::new();
    s.write("j.json", &jobs(&[]));
    let out = run(&s, &["j.json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(s.leftovers().is_empty());
}

#[test]
fn placeholder_schema_is_expanded_and_run() {
    let s = Space::new();
    s.write("mod.o", "module");
    s.write("mod.idx", "index");
    s.write("imp.o", "import");
    s.write(
        "old.json",
        &r#"{"common":{"linker_output":"p","linker_version":"LLD 20.0.0",
             "args":["sh","-c","{ OBJ; cat \"$1\" \"$2\"; } > \"$3\"","sh",["primary_input",0],
                     ["summary_index","",0],["primary_output","",0]]},
            "jobs":[{"primary_input":["mod.o"],"summary_index":["mod.idx"],
                     "primary_output":["out file.o"],"imports":["imp.o"],"additional_inputs":[]}]}"#
            .replace("OBJ", &obj!().replace('\\', "\\\\")),
    );
    for backend in all_backends() {
        s.ok(&mut s.bridge(&[backend, "old.json"]));
        assert!(s.read("out file.o").ends_with("moduleindex"));
        std::fs::remove_file(s.path("out file.o")).unwrap();
    }
    // The import is an input: without it, nothing runs.
    std::fs::remove_file(s.path("imp.o")).unwrap();
    let out = run(&s, &["old.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("\"imp.o\""));
}

/// Paths each tool can and cannot express: the default backend moves to make for ninja's `|`.
#[test]
fn a_path_ninja_cannot_express_uses_make_or_fails_clearly() {
    let s = Space::new();
    s.write("a|b.o", &object());
    s.write(
        "j.json",
        &jobs(&[("cat 'a|b.o' > out.o", &["a|b.o"], &["out.o"])]),
    );
    let out = run(&s, &["--backend=ninja", "j.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot be written in build.ninja: it has no escape for '|'"),
        "{}",
        stderr(&out)
    );
    s.ok(&mut s.bridge(&["j.json"]));
    assert_eq!(s.read("out.o"), object());
}

fn kept_dir(out: &Output) -> std::path::PathBuf {
    let err = stderr(out);
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("dtlto-bridge: kept "))
        .unwrap_or_else(|| panic!("no 'kept' line in:\n{err}"));
    line.into()
}

#[test]
fn keep_and_the_environment_follow_flag_over_env_over_default() {
    let s = Space::new();
    s.write("in.o", &object());
    s.write("j.json", &jobs(&[("cp in.o out.o", &["in.o"], &["out.o"])]));

    // The environment picks make and keeps the directory.
    let out = s.ok(s
        .bridge(&["j.json"])
        .env("DTLTO_BRIDGE_BACKEND", "make")
        .env("DTLTO_BRIDGE_KEEP", "1"));
    let dir = kept_dir(&out);
    assert!(dir.join("Makefile").is_file() && dir.join("tool.log").is_file());
    assert!(dir.starts_with(&s.tmp));

    // The flag wins over the environment.
    let out = s.ok(s
        .bridge(&["--backend=ninja", "--keep", "j.json"])
        .env("DTLTO_BRIDGE_BACKEND", "make"));
    let dir = kept_dir(&out);
    assert!(dir.join("build.ninja").is_file());
    assert!(
        dir.join(".ninja_log").is_file(),
        "ninja's state stays in the private directory"
    );
    assert!(!s.exists(".ninja_log"));

    // A wrapper from the environment prefixes every job.
    s.script("wrap.sh", "echo wrapped >> wrapped.log\nexec \"$@\"\n");
    s.ok(s
        .bridge(&["j.json"])
        .env("DTLTO_BRIDGE_WRAPPER", "./wrap.sh"));
    assert_eq!(s.read("wrapped.log"), "wrapped\n");

    // Without --keep nothing stays behind.
    std::fs::remove_dir_all(&s.tmp).unwrap();
    std::fs::create_dir(&s.tmp).unwrap();
    s.ok(&mut s.bridge(&["j.json"]));
    assert!(s.leftovers().is_empty());
}

#[test]
fn bad_option_values_are_usage_errors() {
    let s = Space::new();
    s.write("j.json", &jobs(&[]));
    for args in [
        &["--jobs=0", "j.json"][..],
        &["--backend=scons", "j.json"],
        &["--wrapper='open", "j.json"],
    ] {
        let out = run(&s, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}

/// Without a history, jobs that read the most bytes start first; `--order file` keeps the job
/// file's order.
#[test]
fn costliest_jobs_start_first() {
    let s = Space::new();
    for (name, size) in [("small.o", 10), ("big.o", 5000), ("mid.o", 300)] {
        s.write(name, &(object() + &"x".repeat(size)));
    }
    s.write(
        "j.json",
        &jobs(&[
            ("cp small.o o0", &["small.o"], &["o0"]),
            ("cp big.o o1", &["big.o"], &["o1"]),
            ("cp mid.o o2", &["mid.o", "small.o"], &["o2"]),
        ]),
    );
    for (order, want) in [("longest", [1, 2, 0]), ("file", [0, 1, 2])] {
        // The build file's order (direct writes none).
        for backend in &all_backends()[..2] {
            let out = s.ok(&mut s.bridge(&[
                backend,
                "--keep",
                "--no-history",
                "--order",
                order,
                "j.json",
            ]));
            let err = stderr(&out);
            let dir = kept_dir(&out);
            let name = if backend.ends_with("ninja") {
                "build.ninja"
            } else {
                "Makefile"
            };
            let text = std::fs::read_to_string(dir.join(name)).unwrap();
            let got: Vec<usize> = text
                .lines()
                .filter_map(|l| l.strip_prefix("# job "))
                .map(|n| n.parse().unwrap())
                .collect();
            assert_eq!(got, want, "{order} {backend}: {err}");
        }
    }
}

/// Durations remembered from an earlier link of the same output beat the input-bytes estimate.
#[test]
fn remembered_durations_order_the_next_link() {
    let s = Space::new();
    s.write("small.o", &object());
    s.write("big.o", &(object() + &"x".repeat(5000)));
    s.write(
        "j.json",
        &jobs(&[
            ("sleep 0.3; cp small.o o0", &["small.o"], &["o0"]),
            ("cp big.o o1", &["big.o"], &["o1"]),
        ]),
    );
    let order = |extra: &[&str]| -> Vec<usize> {
        let mut args = vec!["--backend=make", "--keep"];
        args.extend(extra);
        args.push("j.json");
        let out = s.ok(&mut s.bridge(&args));
        let text = std::fs::read_to_string(kept_dir(&out).join("Makefile")).unwrap();
        text.lines()
            .filter_map(|l| l.strip_prefix("# job "))
            .map(|n| n.parse().unwrap())
            .collect()
    };
    assert_eq!(order(&[]), [1, 0], "first link: by bytes");
    assert_eq!(order(&[]), [0, 1], "second link: the slow job remembered");
    assert_eq!(order(&["--no-history"]), [1, 0]);
    assert!(s.tmp.with_file_name("history").read_dir().unwrap().count() == 1);
}

/// `emit -o FILE` checks the jobs while it renders; when they fail the check, neither FILE nor a
/// partial file is left, and an existing FILE is untouched.
#[test]
fn emit_writes_nothing_when_the_jobs_fail_their_check() {
    let s = Space::new();
    s.write(
        "dup.json",
        &jobs(&[("true", &[], &["a.o"]), ("true", &[], &["./a.o"])]),
    );
    for format in ["ninja", "make"] {
        let out = run(
            &s,
            &["emit", "--format", format, "dup.json", "-o", "out.file"],
        );
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("names the same file"),
            "{}",
            stderr(&out)
        );
        assert_eq!(
            s.files_matching("out.file"),
            Vec::<String>::new(),
            "{format}"
        );
        s.write("out.file", "before");
        let out = run(
            &s,
            &["emit", "--format", format, "dup.json", "-o", "out.file"],
        );
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(s.read("out.file"), "before");
        std::fs::remove_file(s.path("out.file")).unwrap();
    }
}

/// An empty `DTLTO_BRIDGE_*` variable means an unset one: the link runs as if it were not there,
/// and writes no file named after an empty path (no report, no pool or history in the directory).
#[test]
fn empty_variables_mean_unset() {
    let s = Space::new();
    s.write("in.o", &object());
    s.write("j.json", &jobs(&[("cp in.o out.o", &["in.o"], &["out.o"])]));
    let mut cmd = s.bridge(&["j.json"]);
    for var in [
        "KEEP",
        "QUIET",
        "JOBS",
        "BACKEND",
        "REPORT",
        "TRACE",
        "HISTORY",
        "HOST_POOL",
        "HOST_SLOTS",
        "WRAPPER",
        "ORDER",
        "NO_FALLBACK",
        "NO_HISTORY",
        "SUMMARY",
        "NINJA",
        "MAKE",
    ] {
        cmd.env(format!("DTLTO_BRIDGE_{var}"), "");
    }
    let out = s.ok(&mut cmd);
    assert_eq!(stderr(&out), "");
    let mut files = s.files_matching("");
    files.sort();
    assert_eq!(files, ["in.o", "j.json", "out.o"]);
}

/// A build tool asked for by name is never silently replaced by the other.
#[test]
fn a_missing_build_tool_asked_for_is_an_error() {
    let s = Space::new();
    s.write("j.json", &jobs(&[("touch o", &[], &["o"])]));
    let out = run(&s, &["--ninja=/nonexistent/ninja", "j.json"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("find ninja (--ninja /nonexistent/ninja): "),
        "{}",
        stderr(&out)
    );
    let out = s
        .bridge(&["j.json"])
        .env("DTLTO_BRIDGE_NINJA", "/nonexistent/ninja")
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("find ninja (DTLTO_BRIDGE_NINJA=/nonexistent/ninja): "),
        "{}",
        stderr(&out)
    );
    assert!(!s.exists("o"));
    let out = run(
        &s,
        &[
            "--ninja=/nonexistent/ninja",
            "--make=/nonexistent/make",
            "--backend=make",
            "j.json",
        ],
    );
    assert!(
        stderr(&out).contains("find make (/nonexistent/make)"),
        "{}",
        stderr(&out)
    );
}
