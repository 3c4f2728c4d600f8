//! A server that lies, hangs, dies or stops, and the cache policies, against the in-process
//! server: every link ends with the local program (or a failure that names the server) within
//! its bounds, the process never aborts, nothing wrong is written or kept, and secrets stay out
//! of what the user reads.

use super::reapi::{Config, Method, Server};
use super::remote::{each_job, link, linked, ran, three_jobs};
use crate::space::{job_file, object, sh_job, stderr, wait_for, Space};
use std::fs;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// Short deadlines, so that a server that hangs costs the test seconds.
const QUICK: &str = "--remote-timeout=2";

/// The longest any of these links may take: far beyond what they need (seconds), far below
/// what the faults cost without their bounds (a hang is forever, a stopped server 205 s).
const BOUND: Duration = Duration::from_secs(60);

/// Runs dtlto-bridge on `j.json` against `server`, killed (and the test failed) past BOUND.
fn bounded(s: &Space, server: &Server, extra: &[&str]) -> (Output, Duration) {
    let mut cmd = s.bridge(&[]);
    cmd.args(server.args()).args(extra).arg("j.json");
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > BOUND {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("the link did not end in {BOUND:?}:\n{}", stderr(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().unwrap(), start.elapsed())
}

/// Every output of `three_jobs` is the object the job wrote, here.
fn assert_objects(s: &Space) {
    for i in 0..3 {
        assert_eq!(s.read(&format!("out{i}.o")), object(), "out{i}.o");
    }
    assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
}

/// `n` jobs that each take `seconds` on the server.
fn slow_jobs(s: &Space, n: usize, seconds: f64) {
    let jobs = (0..n)
        .map(|i| {
            let script = format!("sleep {seconds} && {} > out{i}.o", obj!());
            sh_job(&script, &[] as &[String], &[format!("out{i}.o")])
        })
        .collect();
    s.write("j.json", &job_file(jobs));
}

#[test]
fn outputs_sent_other_than_their_digest_run_here_through_batches_and_bytestream() {
    // 4 MiB batches, then 1 KiB ones: the 64-byte objects come back through ByteStream.
    for max_batch in [4 << 20, 1 << 10] {
        let server = Server::with(Config {
            max_batch,
            ..Config::default()
        });
        server.set(|f| f.corrupt_reads = true);
        let s = Space::new();
        three_jobs(&s);
        let (err, report) = linked(&s, &server, &[]);
        assert_eq!(ran(&report), ["fallback"; 3], "{max_batch}: {err}");
        for reason in each_job(&report, "/fallback_reason") {
            assert!(reason.contains(&server.url()), "{reason}");
            assert!(reason.contains("whose SHA-256 is"), "{reason}");
        }
        assert_objects(&s);
    }
}

#[test]
fn a_cached_result_sent_wrong_is_passed_by_and_never_linked_or_kept() {
    let server = Server::start();
    let s = Space::new();
    three_jobs(&s);
    let (_, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["remote"; 3]);
    server.set(|f| f.corrupt_reads = true);
    let executed = server.executed().len();
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["fallback"; 3], "{err}");
    assert!(
        err.contains("cached output from") && err.contains(&server.url()),
        "{err}"
    );
    // Passed by: each job executed once more, past the cache.
    assert_eq!(server.executed().len(), executed + 3);
    assert_objects(&s);
    // Nothing the server sent wrong was kept: a third link, with the server honest again,
    // links right.
    server.set(|f| f.corrupt_reads = false);
    let (err, report) = linked(&s, &server, &[]);
    assert!(ran(&report).iter().all(|r| r != "fallback"), "{err}");
    assert_objects(&s);
}

#[test]
fn an_output_declared_of_2_63_bytes_is_a_failed_attempt_not_an_abort() {
    let server = Server::start();
    // The 64-byte objects declare i64::MAX bytes.
    server.set(|f| f.output_size_delta = i64::MAX - 64);
    let s = Space::new();
    three_jobs(&s);
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["fallback"; 3], "{err}");
    for reason in each_job(&report, "/fallback_reason") {
        assert!(reason.contains("more than the 4 GiB"), "{reason}");
    }
    assert_objects(&s);
}

#[test]
fn a_server_that_never_answers_a_call_costs_its_timeout_once() {
    for method in [
        Method::GetActionResult,
        Method::FindMissingBlobs,
        Method::BatchReadBlobs,
        Method::Execute,
    ] {
        let server = Server::start();
        server.set(|f| {
            f.hang.insert(method);
        });
        let s = Space::new();
        three_jobs(&s);
        let (out, took) = bounded(&s, &server, &[QUICK]);
        assert!(out.status.success(), "{method:?}: {}", stderr(&out));
        assert_objects(&s);
        let err = stderr(&out);
        assert_eq!(
            err.matches("the jobs still to go run here").count(),
            1,
            "{method:?}, told once: {err}"
        );
        assert!(
            err.contains("no answer in 2 s") || err.contains("DEADLINE_EXCEEDED"),
            "{err}"
        );
        // One timeout, not one per job or per retry (3 jobs × 4 tries × 2 s).
        assert!(
            took < Duration::from_secs(12),
            "{method:?} took {took:?}: {err}"
        );
    }
}

/// Links `n` slow jobs with `extra`, and does `fault` to the server once it runs one: the link
/// must succeed with every object, the user told once that the rest run here. How long the
/// link took after the fault.
fn fault_mid_link(
    server: &mut Server,
    n: usize,
    extra: &[&str],
    fault: fn(&mut Server),
) -> Duration {
    let s = Space::new();
    slow_jobs(&s, n, 2.0);
    let mut cmd = s.bridge(extra);
    cmd.args(server.args()).arg("j.json").stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_for("the server to run a job", || !server.running().is_empty());
    fault(server);
    let at = Instant::now();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        err.matches("the jobs still to go run here").count(),
        1,
        "told once: {err}"
    );
    for i in 0..n {
        assert_eq!(s.read(&format!("out{i}.o")), object());
    }
    at.elapsed()
}

#[test]
fn a_server_killed_mid_link_leaves_the_jobs_to_run_here_told_once() {
    let mut server = Server::start();
    let after = fault_mid_link(&mut server, 4, &["--remote-jobs=1"], Server::kill);
    // Each job left to go did not wait out its own retries (0.25 + 1 + 4 s each, one after
    // another): the four run here, two at a time, in about 4 s.
    assert!(after < Duration::from_secs(15), "{after:?} after the kill");
}

#[test]
fn a_stopped_server_is_found_by_the_keepalive_and_the_jobs_run_here() {
    let mut server = Server::start();
    // As kill -STOP: connections stay open and are taken, nothing answers, not even pings.
    let after = fault_mid_link(&mut server, 3, &[QUICK], |s| s.freeze());
    assert!(after < BOUND, "{after:?} after the stop");
}

#[test]
fn streams_a_proxy_ends_cleanly_are_followed_again_and_not_counted_as_failures() {
    let server = Server::start();
    // More clean ends than the retries a failure has (3).
    server.set(|f| f.end_streams = 6);
    let s = Space::new();
    slow_jobs(&s, 2, 0.5);
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["remote"; 2], "{err}");
    assert!(
        server.calls(Method::WaitExecution) >= 6,
        "{:?}",
        server.all_calls()
    );
    assert_eq!(server.executed().len(), 2, "no job executed twice");
}

#[test]
fn a_cached_result_whose_output_was_evicted_executes_again_and_replaces_the_entry() {
    let server = Server::start();
    let s = Space::new();
    three_jobs(&s);
    let (_, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["remote"; 3]);
    // Every job wrote the same object: one blob, evicted.
    let obj = object();
    server.evict(&super::reapi::digest_of(obj.as_bytes()));
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(
        ran(&report),
        ["remote"; 3],
        "executed again, not run here: {err}"
    );
    assert_objects(&s);
    // The entries were replaced: the next link takes every job from the cache.
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["remote cache"; 3], "{err}");
}

#[test]
fn a_server_that_refuses_cache_writes_is_told_once_with_the_option_that_reads_only() {
    let server = Server::start();
    server.set(|f| f.refuse_cache_writes = true);
    let s = Space::new();
    three_jobs(&s);
    let (err, _) = linked(&s, &server, &[]);
    assert_eq!(server.calls(Method::UpdateActionResult), 1);
    assert_eq!(err.matches("PERMISSION_DENIED").count(), 1, "{err}");
    assert!(err.contains("--remote-no-cache-write"), "{err}");
    // Asked not to write, the link writes nothing and says nothing of it.
    let (err, report) = linked(&s, &server, &["--remote-no-cache-write"]);
    assert_eq!(
        server.calls(Method::UpdateActionResult),
        1,
        "no more writes"
    );
    assert!(!err.contains("PERMISSION_DENIED"), "{err}");
    assert_eq!(
        ran(&report),
        ["remote cache"; 3],
        "the cache is still read: {err}"
    );
}

#[test]
fn no_link_entry_takes_only_each_job_result() {
    let server = Server::start();
    let s = Space::new();
    three_jobs(&s);
    linked(&s, &server, &["--remote-no-link-entry"]);
    assert_eq!(
        server.calls(Method::UpdateActionResult),
        0,
        "no entry written"
    );
    let asked = server.calls(Method::GetActionResult);
    let (err, report) = linked(&s, &server, &["--remote-no-link-entry"]);
    assert_eq!(ran(&report), ["remote cache"; 3], "{err}");
    // One question per job, none for an entry.
    assert_eq!(server.calls(Method::GetActionResult) - asked, 3);
    assert_eq!(server.calls(Method::UpdateActionResult), 0);
}

#[test]
fn header_values_stay_out_of_messages_reports_and_traces() {
    let server = Server::start();
    let s = Space::new();
    three_jobs(&s);
    // A line with no `=`: named by its number, its text not shown.
    s.write("keys", "# keys\nx-api-key: SECRET-IN-FILE\n");
    let file = format!("--remote-header-file={}", s.path("keys").display());
    let (out, _) = link(&s, &server, &[&file]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("line 2 is not NAME=VALUE"), "{err}");
    assert!(!err.contains("SECRET-IN-FILE"), "{err}");
    // A line split at an `=` inside its value: its would-be name holds the key.
    s.write("keys", "Authorization: Basic dXNlcjpTRUNSRVQ=\n");
    let (out, _) = link(&s, &server, &[&file]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("line 1 is not NAME=VALUE"), "{err}");
    assert!(!err.contains("dXNlcjpTRUNSRVQ"), "{err}");
    // The same in the variable, where clap would have printed it.
    let mut cmd = s.bridge(&["j.json"]);
    cmd.args(server.args())
        .env("DTLTO_BRIDGE_REMOTE_HEADER", "SECRET-IN-VARIABLE");
    let out = cmd.output().unwrap();
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("header 1 is not NAME=VALUE"), "{err}");
    assert!(!err.contains("SECRET-IN-VARIABLE"), "{err}");
    // A good header goes with every call and into no file the link writes.
    let trace = s.path("trace.json");
    let (out, _) = link(
        &s,
        &server,
        &[
            "--remote-header=x-api-key=SECRET-IN-OPTION",
            &format!("--trace={}", trace.display()),
            "--summary",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let written = [
        stderr(&out),
        fs::read_to_string(s.tmp.with_file_name("report.json")).unwrap(),
        fs::read_to_string(&trace).unwrap(),
    ];
    for text in written {
        assert!(!text.contains("SECRET-IN-OPTION"), "{text}");
    }
}

#[test]
fn a_blob_one_job_failed_to_send_is_sent_by_the_next_job_that_needs_it() {
    let server = Server::start();
    // The first job's upload fails with every retry (1 + 3 calls); the server is fine after.
    server.set(|f| {
        f.fail_times(Method::BatchUpdateBlobs, tonic::Code::Internal, 4);
    });
    let s = Space::new();
    three_jobs(&s);
    // One job at a time: the first fails alone, the others send shared.h themselves.
    let (err, report) = linked(&s, &server, &["--remote-jobs=1"]);
    let mut ran = ran(&report);
    ran.sort();
    assert_eq!(ran, ["fallback", "remote", "remote"], "{err}");
    assert_objects(&s);
}
