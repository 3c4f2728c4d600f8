//! Bad days on `sh` jobs: a wrapper and then the local run failing, no retry without a wrapper,
//! cancellation by signal.

use crate::space::{alive, object, require, stderr, wait_for, wrapper_arg, Space, BAD_WRAPPERS};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn sh_jobs(scripts: &[(&str, &str)]) -> String {
    let jobs: Vec<serde_json::Value> = scripts
        .iter()
        .map(|(script, out)| serde_json::json!({"args": ["-c", script], "inputs": [], "outputs": [out]}))
        .collect();
    serde_json::json!({"common": {"linker_output": "p", "args": ["sh"], "inputs": []}, "jobs": jobs})
        .to_string()
}

#[test]
fn when_the_local_run_fails_too_the_job_fails_with_both_stories() {
    let s = Space::new();
    s.script("fails.sh", BAD_WRAPPERS[0].1);
    s.write(
        "j.json",
        &sh_jobs(&[("echo local trouble >&2; exit 4", "o.o")]),
    );
    let out = s
        .bridge(&[&wrapper_arg(&s, "fails.sh"), "j.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("run job 0 (o.o): exit status 4"), "{err}");
    assert!(
        err.contains("through the wrapper: exit status 1; then locally:"),
        "{err}"
    );
    assert!(
        err.contains("remote host refused") && err.contains("local trouble"),
        "{err}"
    );
}

#[test]
fn a_job_failing_without_a_wrapper_is_not_retried() {
    let s = Space::new();
    s.write("j.json", &sh_jobs(&[("echo try >> tries; exit 2", "o.o")]));
    let out = s.bridge(&["j.json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(s.read("tries"), "try\n");
}

/// Three jobs that record their pid, write a partial output and a temporary as clang names them,
/// then hang; and one that finishes at once (its output must survive a cancelled run: with
/// --save-temps lld keeps it).
fn hanging_jobs(s: &Space) {
    let hang = "echo $$ >> pids; echo partial > \"$0\"; : > \"${0%.o}-0badcafe.o.tmp\"; \
                exec sleep 60";
    let mut jobs: Vec<serde_json::Value> = (0..3)
        .map(|i| {
            let out = format!("out{i}.o");
            serde_json::json!({"args": ["-c", hang, out], "inputs": [], "outputs": [out]})
        })
        .collect();
    // Written aside and renamed, so that done.o appears whole. The job has ended for the run
    // only when its launcher (the shell's parent) has exited: that pid goes to done.launcher;
    // without launchers (direct), when the run has reaped the shell, whose pid goes to done.pid.
    let done = concat!(
        "echo $PPID > done.launcher && echo $$ > done.pid && ",
        obj!(),
        " > done.part && mv done.part done.o"
    );
    jobs.push(serde_json::json!({"args": ["-c", done], "inputs": [], "outputs": ["done.o"]}));
    s.write(
        "hang.json",
        &serde_json::json!({"common": {"linker_output": "p", "args": ["sh"], "inputs": []}, "jobs": jobs})
            .to_string(),
    );
}

/// Sends `sig` to dtlto-bridge alone, or to its whole process group (Ctrl-C at a terminal).
fn cancel(backend: &str, sig: i32, group: bool) {
    let s = Space::new();
    hanging_jobs(&s);
    let mut cmd = s.bridge(&[backend, "--jobs=4", "--report=report.json", "hang.json"]);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    if group {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let child: Child = cmd.spawn().unwrap();
    let pid = child.id() as i32;
    let ended = || {
        let launcher: i32 = s.read("done.launcher").trim().parse().unwrap();
        if launcher != pid {
            return !alive(launcher);
        }
        let shell = s.read("done.pid");
        !std::path::Path::new(&format!("/proc/{}", shell.trim())).exists()
    };
    wait_for("three running jobs and one done", || {
        s.exists("pids")
            && s.read("pids").lines().count() == 3
            && s.files_matching("0badcafe").len() == 3
            && s.exists("done.o")
            && ended()
    });
    if backend.ends_with("direct") {
        // Reaped, the job is told to the scheduler within microseconds; this leaves room.
        std::thread::sleep(Duration::from_millis(100));
    }
    let sent = Instant::now();
    unsafe { libc::kill(if group { -pid } else { pid }, sig) };
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(128 + sig),
        "{backend} signal {sig}: {err}"
    );
    // Jobs die at once on the signal; a run is gone in ~40 ms here. The bound leaves room for a
    // loaded CI machine running the other tests at the same time.
    assert!(
        took < Duration::from_secs(2),
        "{backend} took {took:?} to stop"
    );
    assert!(
        err.contains(&format!("interrupted by signal {sig}")),
        "{err}"
    );
    for p in s.read("pids").lines() {
        assert!(
            !alive(p.parse().unwrap()),
            "{backend}: job {p} still runs after signal {sig}"
        );
    }
    assert_eq!(
        s.files_matching("out"),
        Vec::<String>::new(),
        "partial outputs or temporaries left"
    );
    assert_eq!(
        s.read("done.o"),
        object(),
        "a finished job keeps its output"
    );
    // A cancelled run writes its report too: three jobs killed by the signal, one finished.
    let report: serde_json::Value = serde_json::from_str(&s.read("report.json")).unwrap();
    let jobs: Vec<(bool, Option<i64>)> = report["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["ok"].as_bool().unwrap(), j["signal"].as_i64()))
        .collect();
    let killed = (false, Some(i64::from(sig)));
    assert_eq!(
        jobs,
        [killed, killed, killed, (true, None)],
        "{backend} {sig}"
    );
    assert!(
        s.leftovers().is_empty(),
        "{backend} signal {sig} group {group}: temporary files left: {:?}",
        s.leftovers()
    );
}

#[test]
fn sigint_sigterm_sighup_sigquit_stop_every_job_and_leave_nothing_behind() {
    require("ninja");
    for backend in ["--backend=ninja", "--backend=make", "--backend=direct"] {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            cancel(backend, sig, false);
        }
        cancel(backend, libc::SIGINT, true);
    }
}

/// Without a build tool (direct), a job that ignores the cancelling signal is killed a few
/// seconds later, and the run still ends as the signal says, leaving no partial output.
#[test]
fn a_job_that_ignores_the_signal_is_killed_under_direct() {
    let s = Space::new();
    s.write(
        "deaf.json",
        &sh_jobs(&[(
            "trap '' INT TERM; echo $$ > deaf.pid; echo partial > deaf.o; \
             while :; do sleep 0.1; done",
            "deaf.o",
        )]),
    );
    let child = s
        .bridge(&["--backend=direct", "deaf.json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the job to start", || s.exists("deaf.o"));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let pid: i32 = s.read("deaf.pid").trim().parse().unwrap();
    assert!(!alive(pid), "the job {pid} still runs");
    assert!(!s.exists("deaf.o"), "its partial output was left");
}

/// Under direct, as ninja and make stop, no job starts once one has failed.
#[test]
fn after_a_failure_no_job_starts_under_direct() {
    let s = Space::new();
    s.write(
        "j.json",
        &sh_jobs(&[
            ("exit 3", "a.o"),
            ("touch ran1; exit 0", "b.o"),
            ("touch ran2; exit 0", "c.o"),
        ]),
    );
    let out = s
        .bridge(&["--backend=direct", "--jobs=1", "--order=file", "j.json"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("1 of 3 failed, 2 not run"), "{err}");
    assert!(
        !s.exists("ran1") && !s.exists("ran2"),
        "a job started after the failure"
    );
}
