//! The remote path against the in-process REAPI server (`reapi`), with no LLVM: `sh` jobs run
//! on the server, come from its action cache or the disk cache, or run here when the server
//! fails them; `doctor` and `rexec` talk to it too.

use super::reapi::{digest_of, Config, Method, Outputs, Seen, Server};
use crate::space::{job_file, object, sh_job, sh_jobs, stderr, wait_for, Space};
use serde_json::Value;
use std::fs;
use std::process::{Output, Stdio};

/// Runs dtlto-bridge on `j.json` with the server's options, a report and `extra`; the output
/// and the report (Null when none was written).
pub(super) fn link(s: &Space, server: &Server, extra: &[&str]) -> (Output, Value) {
    let report = s.tmp.with_file_name("report.json");
    let _ = fs::remove_file(&report);
    let mut cmd = s.bridge(&[&format!("--report={}", report.display())]);
    cmd.args(server.args()).args(extra).arg("j.json");
    let out = cmd.output().unwrap();
    let report = fs::read_to_string(&report)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    (out, report)
}

/// `link`, which must succeed.
pub(super) fn linked(s: &Space, server: &Server, extra: &[&str]) -> (String, Value) {
    let (out, report) = link(s, server, extra);
    assert!(
        out.status.success(),
        "the link failed with {}:\n{}\ncalls: {:?}",
        out.status,
        stderr(&out),
        server.all_calls()
    );
    (stderr(&out), report)
}

/// One field of each job of a report, by its JSON pointer ("" where it is not a string).
pub(super) fn each_job(report: &Value, pointer: &str) -> Vec<String> {
    let jobs = report["jobs"].as_array().cloned().unwrap_or_default();
    jobs.iter()
        .map(|j| {
            j.pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or("")
                .into()
        })
        .collect()
}

pub(super) fn ran(report: &Value) -> Vec<String> {
    each_job(report, "/ran")
}

/// Three `sh` jobs, each writing an object after reading its inputs (`shared` is everyone's).
pub(super) fn three_jobs(s: &Space) {
    s.write("shared.h", "shared\n");
    let jobs: Vec<(String, Vec<String>, Vec<String>)> = (0..3)
        .map(|i| {
            s.write(&format!("in{i}"), &format!("input {i}\n"));
            let script = format!("cat in{i} shared.h > /dev/null && {} > out{i}.o", obj!());
            let inputs = vec![format!("in{i}"), "shared.h".into()];
            (script, inputs, vec![format!("out{i}.o")])
        })
        .collect();
    s.write(
        "j.json",
        &job_file(jobs.iter().map(|(c, i, o)| sh_job(c, i, o)).collect()),
    );
}

/// The modules of tests/data/main.thinlto.bc, the index shard lld-22 wrote for examples/hello's
/// main, as its module table names them.
pub(super) const MODULES: [&str; 5] = [
    "main.o",
    "add.o",
    "greeting.o",
    "libmul.a(mul.o at 92).4.2481.o",
    "libmul.a(sq.o at 2812).5.2481.o",
];

/// A job file of five jobs as lld writes them, one per module of `MODULES`, each importing the
/// others and reading a copy of the real shard (`jobI.native.o.thinlto.bc`): actions keyed by
/// content. The modules are text (nothing compiles them), and `script` is the compiler: `sh -c
/// SCRIPT MODULE -fthinlto-index=SHARD -o OUTPUT`, so it finds its output in "$3".
pub(super) fn content_jobs(s: &Space, script: &str) {
    lld_jobs(s, "sh", &["-c", script]);
}

/// The jobs of `content_jobs`, run as `PROGRAM BEFORE... MODULE -fthinlto-index=SHARD -o
/// OUTPUT`.
pub(super) fn lld_jobs(s: &Space, program: &str, before: &[&str]) {
    let shard = include_bytes!("../../data/main.thinlto.bc");
    let jobs = (0..MODULES.len())
        .map(|i| {
            let out = format!("job{i}.native.o");
            let index = format!("{out}.thinlto.bc");
            fs::write(s.path(&index), shard).unwrap();
            let mut inputs = vec![MODULES[i].to_string(), index.clone()];
            inputs.extend(
                (MODULES.iter().enumerate())
                    .filter(|(k, _)| *k != i)
                    .map(|(_, m)| m.to_string()),
            );
            let mut args: Vec<String> = before.iter().map(|w| w.to_string()).collect();
            args.extend([
                MODULES[i].to_string(),
                format!("-fthinlto-index={index}"),
                "-o".into(),
                out.clone(),
            ]);
            serde_json::json!({"args": args, "inputs": inputs, "outputs": [out]})
        })
        .collect();
    let mut file: serde_json::Value = serde_json::from_str(&job_file(jobs)).unwrap();
    file["common"]["args"] = serde_json::json!([program]);
    s.write("j.json", &file.to_string());
}

/// Writes the modules of `content_jobs` (`changed` gets other bytes).
pub(super) fn modules(s: &Space, changed: Option<&str>) {
    for m in MODULES {
        let extra = if Some(m) == changed { " changed" } else { "" };
        s.write(m, &format!("module {m}{extra}\n"));
    }
}

/// A compiler script for `content_jobs`: checks its module is there, writes an object.
pub(super) const COMPILE: &str = concat!("test -s \"$0\" && ", obj!(), " > \"$3\"");

#[test]
fn every_job_runs_remotely_with_exactly_its_inputs_and_each_blob_goes_up_once() {
    let server = Server::start();
    let s = Space::new();
    three_jobs(&s);
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["remote"; 3], "{err}");
    assert_eq!(each_job(&report, "/remote/worker"), ["in-process"; 3]);
    for i in 0..3 {
        assert_eq!(s.read(&format!("out{i}.o")), object());
    }
    let mut executed = server.executed();
    assert_eq!(executed.len(), 3, "{executed:?}");
    executed.sort_by(|a, b| a.arguments.cmp(&b.arguments));
    for (i, e) in executed.iter().enumerate() {
        // No shard: keyed by names, in the linker's directory, which is the input root.
        assert_eq!(e.arguments[..2], ["sh", "-c"]);
        assert!(e.arguments[2].contains(&format!("> out{i}.o")), "{e:?}");
        assert_eq!(e.working_directory, "");
        let mut inputs = e.inputs.clone();
        inputs.sort();
        assert_eq!(inputs, [format!("in{i}"), "shared.h".into()], "{e:?}");
        assert!(
            (e.environment.iter())
                .any(|(k, v)| k == "DTLTO_BRIDGE_COMPILER" && v.starts_with("sha256:")),
            "{e:?}"
        );
    }
    // shared.h went up once for the three jobs.
    let remote = &report["remote"];
    assert_eq!(
        remote["uploaded_blobs"], remote["distinct_blobs"],
        "{remote}"
    );
    assert_eq!(remote["server"], server.url());
    // Each job's own blobs are asked for when it is sent, so that it executes as soon as they
    // are in.
    assert_eq!(server.calls(Method::FindMissingBlobs), 3);
    assert_eq!(server.calls(Method::GetCapabilities), 1, "one connection");
    assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
}

#[test]
fn actions_keyed_by_content_hold_no_name_lld_chose() {
    let server = Server::start();
    let s = Space::new();
    modules(&s, None);
    content_jobs(&s, COMPILE);
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["remote"; 5], "{err}");
    assert_eq!(each_job(&report, "/remote/key"), ["content"; 5], "{err}");
    let executed = server.executed();
    assert_eq!(executed.len(), 5);
    for e in &executed {
        assert_eq!(
            e.arguments[4..],
            [
                "-fthinlto-index=dtlto-job.native.o.thinlto.bc",
                "-o",
                "dtlto-job.native.o"
            ],
            "{e:?}"
        );
        assert!(
            e.arguments[3].starts_with("m/") && e.arguments[3].ends_with(".o"),
            "{e:?}"
        );
        let mut inputs = e.inputs.clone();
        inputs.sort();
        assert_eq!(inputs.len(), 6, "{inputs:?}");
        assert_eq!(inputs[0], "dtlto-job.native.o.thinlto.bc");
        assert!(
            inputs[1..].iter().all(|i| i.starts_with("m/")),
            "{inputs:?}"
        );
        let names = format!("{e:?}");
        assert!(
            !names.contains("2481") && !names.contains("job0"),
            "{names}"
        );
    }
    for i in 0..5 {
        assert_eq!(s.read(&format!("job{i}.native.o")), object());
    }
}

#[test]
fn a_relink_takes_every_job_from_the_link_entry_in_one_lookup() {
    let server = Server::start();
    let s = Space::new();
    three_jobs(&s);
    linked(&s, &server, &[]);
    // Three jobs' results, cached by the server as it executed them, and the link's entry.
    assert_eq!(server.cache_entries(), 4);
    assert_eq!(server.calls(Method::UpdateActionResult), 1);
    for i in 0..3 {
        fs::remove_file(s.path(&format!("out{i}.o"))).unwrap();
    }
    let lookups = server.calls(Method::GetActionResult);
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["remote cache"; 3], "{err}");
    assert_eq!(report["backend"], "none", "no build tool ran");
    assert_eq!(server.executed().len(), 3, "nothing executed again");
    assert_eq!(server.calls(Method::Execute), 3);
    assert_eq!(
        server.calls(Method::GetActionResult) - lookups,
        1,
        "the link's entry answered for every job"
    );
    assert_eq!(
        server.calls(Method::UpdateActionResult),
        1,
        "the entry is not written again"
    );
    for i in 0..3 {
        assert_eq!(s.read(&format!("out{i}.o")), object());
    }
}

/// `n` `sh` jobs, job i reading its own input of (i + 1) * 64 bytes and `shared.h`, writing
/// `out{i}.o`: without a history a job's cost is its module's size, so the later the costlier.
/// The costliest runs `last` first, when given.
fn sized_jobs(s: &Space, n: usize, last: Option<&str>) {
    s.write("shared.h", "shared\n");
    let jobs: Vec<Value> = (0..n)
        .map(|i| {
            s.write(&format!("in{i}"), &"x".repeat((i + 1) * 64));
            let before = last.filter(|_| i == n - 1).unwrap_or("true");
            let script = format!(
                "{before}; cat in{i} shared.h > /dev/null && {} > out{i}.o",
                obj!()
            );
            let inputs = [format!("in{i}"), "shared.h".into()];
            sh_job(&script, &inputs, &[format!("out{i}.o")])
        })
        .collect();
    s.write("j.json", &job_file(jobs));
}

#[test]
fn the_costliest_jobs_lead_and_a_relink_still_starts_nothing() {
    let server = Server::start();
    let s = Space::new();
    sized_jobs(&s, 32, None);
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["remote"; 32], "{err}");
    // One job in 16 leads: the two costliest are looked up, then executed, as soon as they
    // are read; the link's entry is looked up once all are read. Both leads missed: the other
    // 30 ask the cache through their Execute, not one lookup each.
    assert_eq!(
        server.calls(Method::GetActionResult),
        1 + 2,
        "{:?}",
        server.all_calls()
    );
    assert_eq!(server.calls(Method::Execute), 32);
    assert_eq!(server.executed().len(), 32);
    // A relink: these jobs (keyed by names) are not remembered, so the same two lead again;
    // their hits are written with the others', which the link's entry answers, and nothing
    // starts.
    for i in 0..32 {
        fs::remove_file(s.path(&format!("out{i}.o"))).unwrap();
    }
    let lookups = server.calls(Method::GetActionResult);
    let (err, again) = linked(&s, &server, &[]);
    assert_eq!(ran(&again), ["remote cache"; 32], "{err}");
    assert_eq!(again["backend"], "none", "no build tool ran");
    assert_eq!(server.calls(Method::GetActionResult) - lookups, 1 + 2);
    assert_eq!(server.calls(Method::Execute), 32, "nothing executed again");
    // The two leads changed, the rest not: both leads miss, so the rest are not looked up one
    // by one, and Execute answers them from the cache all the same.
    s.write("in31", &"y".repeat(32 * 64));
    s.write("in30", &"y".repeat(31 * 64));
    let (err, third) = linked(&s, &server, &[]);
    let mut want = vec!["remote cache"; 30];
    want.extend(["remote"; 2]);
    assert_eq!(ran(&third), want, "{err}");
    assert_eq!(
        server.executed().len(),
        34,
        "only the two changed jobs executed"
    );
    for i in 0..32 {
        assert_eq!(s.read(&format!("out{i}.o")), object());
    }
}

#[test]
fn the_costliest_job_sends_its_inputs_alone_first() {
    let server = Server::start();
    // Each upload answered late: leads that sent side by side would ask for their inputs
    // while the first one's were still under way.
    server.slow(Method::BatchUpdateBlobs, 300);
    let s = Space::new();
    sized_jobs(&s, 32, None);
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["remote"; 32], "{err}");
    // The two costliest lead: job 31 (the largest input), then job 30.
    let hash = |i: usize| digest_of("x".repeat((i + 1) * 64).as_bytes()).hash;
    let seen = server.seen();
    let stored = |h: &str| seen.iter().position(|e| *e == Seen::Put(h.into()));
    let asked = |h: &str| {
        (seen.iter()).position(|e| matches!(e, Seen::Asked(hs) if hs.iter().any(|x| x == h)))
    };
    let (first, second) = (stored(&hash(31)), asked(&hash(30)));
    assert!(
        first.is_some() && second.is_some() && first < second,
        "the second lead asked for its inputs (at {second:?} of {} calls and blobs stored) \
         before the first's were stored (at {first:?})",
        seen.len()
    );
    // And every other job's inputs come after the leads'.
    let lead_stored = stored(&hash(30)).expect("the second lead's input is stored");
    for i in 0..30 {
        let other = asked(&hash(i)).expect("every input is asked for");
        assert!(
            other > lead_stored,
            "job {i} asked before the leads' inputs were stored"
        );
    }
}

#[test]
fn an_interrupt_cancels_a_leading_job_and_leaves_nothing() {
    let server = Server::start();
    let s = Space::new();
    sized_jobs(&s, 16, Some("sleep 30"));
    let mut cmd = s.bridge(&["j.json"]);
    cmd.args(server.args()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    // The other 15 end; the costliest, which led, sleeps.
    wait_for("the 15 quick jobs to end", || server.executed().len() == 15);
    wait_for("the leading job to run", || server.running().len() == 1);
    interrupted(&s, &server, child, "out15.o");
}

#[test]
fn a_link_that_fails_after_its_lookup_leaves_no_lead_running_and_no_output() {
    let server = Server::start();
    // The link's own lookup (its entry, then each job) outlasts a lead's lookup and Execute.
    server.slow(Method::GetActionResult, 1000);
    let failed = |s: &Space| {
        let (out, _) = link(s, &server, &["--ninja=/nonexistent/ninja"]);
        let err = stderr(&out);
        assert!(!out.status.success() && err.contains("ninja"), "{err}");
        let left: Vec<String> = (0..16)
            .map(|i| format!("out{i}.o"))
            .filter(|o| s.exists(o))
            .collect();
        assert!(left.is_empty(), "outputs of a failed link: {left:?}\n{err}");
        assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
    };
    // A lead still executing when the link fails is cancelled on the server.
    let s = Space::new();
    sized_jobs(&s, 16, Some("sleep 30"));
    failed(&s);
    assert_eq!(server.cancelled().len(), 1, "{:?}", server.all_calls());
    wait_for("the lead's command to be killed", || {
        server.running().is_empty()
    });
    // A lead that ended before the link failed loses its output with the rest.
    let s = Space::new();
    sized_jobs(&s, 16, None);
    let before = server.executed().len();
    failed(&s);
    assert_eq!(server.executed().len() - before, 1, "the lead executed");
}

#[test]
fn a_changed_module_or_command_misses_and_says_why() {
    let server = Server::start();
    let s = Space::new();
    modules(&s, None);
    content_jobs(&s, COMPILE);
    // Inputs left alone for a second have their digests remembered for the next link.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (err, first) = linked(&s, &server, &[]);
    assert_eq!(ran(&first), ["remote"; 5], "{err}");

    // add.o changed: its own job misses for it, every other job for its import.
    modules(&s, Some("add.o"));
    let (err, second) = linked(&s, &server, &[]);
    assert_eq!(ran(&second), ["remote"; 5], "{err}");
    let misses = each_job(&second, "/remote/miss");
    assert_eq!(misses[1], "the module add.o changed", "{misses:?}");
    for k in [0, 2, 3, 4] {
        assert_eq!(misses[k], "an import add.o changed", "{misses:?}");
    }
    assert_eq!(server.executed().len(), 10);

    // Another option for the compiler: every job misses for its command; the same link again
    // takes them all from the cache.
    content_jobs(&s, &format!("{COMPILE} # -O3"));
    let (err, third) = linked(&s, &server, &["--summary"]);
    assert_eq!(
        each_job(&third, "/remote/miss"),
        ["the command changed"; 5],
        "{err}"
    );
    assert!(
        err.contains("not from the cache: 5 (the command changed: 5)"),
        "{err}"
    );
    let (err, fourth) = linked(&s, &server, &[]);
    assert_eq!(ran(&fourth), ["remote cache"; 5], "{err}");
    assert_eq!(server.executed().len(), 15);
}

#[test]
fn a_server_that_is_down_leaves_every_job_to_run_here_with_one_warning() {
    let mut server = Server::start();
    server.kill();
    let s = Space::new();
    three_jobs(&s);
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["local"; 3], "{err}");
    assert!(
        err.contains("remote: connect to") && err.contains("every job runs here"),
        "{err}"
    );
    assert_eq!(err.matches("every job runs here").count(), 1, "{err}");
    for i in 0..3 {
        assert_eq!(s.read(&format!("out{i}.o")), object());
    }
}

#[test]
fn a_command_that_fails_remotely_runs_here_with_the_remote_stderr() {
    let server = Server::start();
    let s = Space::new();
    // `here` is no input of the job: it is in the linker's directory, not in the action.
    s.write("here", "");
    s.write(
        "j.json",
        &sh_jobs(&[(
            concat!(
                "[ -e here ] || { echo not on this worker >&2; exit 3; }; ",
                obj!(),
                " > o.o"
            ),
            &[],
            &["o.o"],
        )]),
    );
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["fallback"], "{err}");
    let reason = each_job(&report, "/fallback_reason").remove(0);
    assert!(
        reason.contains("exit status 3") && reason.contains("in-process"),
        "{reason}"
    );
    assert!(err.contains("job 0 (o.o) failed remotely"), "{err}");
    assert!(
        err.contains("not on this worker"),
        "the remote stderr is shown: {err}"
    );
    assert_eq!(s.read("o.o"), object());
    assert_eq!(server.cache_entries(), 0, "a failed action is not cached");
}

#[test]
fn with_no_fallback_a_remote_failure_fails_the_link_naming_the_job() {
    let server = Server::start();
    server.set(|f| f.exit = Some((3, "failing on purpose\n".into())));
    let s = Space::new();
    three_jobs(&s);
    let (out, _) = link(&s, &server, &["--no-fallback"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("run job 0 (out0.o): remote: exit status 3 on worker in-process"),
        "{err}"
    );
    assert!(
        err.contains("failing on purpose"),
        "the remote stderr is shown: {err}"
    );
    assert!(s.files_matching("out").is_empty(), "no output is left");
    assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
}

#[test]
fn outputs_that_come_back_empty_missing_no_object_or_short_run_here() {
    let cases: [(Outputs, i64, &str); 4] = [
        (Outputs::Empty, 0, "empty"),
        (Outputs::Missing, 0, "has no output"),
        (
            Outputs::Replaced(b"no object at all\n".to_vec()),
            0,
            "no object",
        ),
        (Outputs::Real, 10, "sent 64 bytes of its 74"),
    ];
    for (outputs, delta, says) in cases {
        let server = Server::start();
        server.set(|f| {
            f.outputs = outputs.clone();
            f.output_size_delta = delta;
        });
        let s = Space::new();
        three_jobs(&s);
        let (err, report) = linked(&s, &server, &[]);
        assert_eq!(ran(&report), ["fallback"; 3], "{outputs:?}: {err}");
        for reason in each_job(&report, "/fallback_reason") {
            assert!(reason.contains(says), "{outputs:?}: {reason}");
        }
        for i in 0..3 {
            assert_eq!(s.read(&format!("out{i}.o")), object(), "{outputs:?}");
        }
        assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
    }
}

#[test]
fn an_interrupt_cancels_the_remote_operation_and_leaves_nothing() {
    let server = Server::start();
    let s = Space::new();
    s.write(
        "j.json",
        &sh_jobs(&[(concat!("sleep 30; ", obj!(), " > slow.o"), &[], &["slow.o"])]),
    );
    let mut cmd = s.bridge(&["j.json"]);
    cmd.args(server.args()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_for("the server to run the job", || !server.running().is_empty());
    interrupted(&s, &server, child, "slow.o");
}

/// Interrupts `child`, a link whose one job still running on `server` writes `output`: the link
/// exits 130, the server cancels the operation and kills the command, and nothing is left.
fn interrupted(s: &Space, server: &Server, child: std::process::Child, output: &str) {
    let group = server.running()[0];
    // The client names the operation to cancel once Execute's first message has reached it;
    // an interrupt within some 30 ms of the command's start finds no name and cancels nothing
    // (a known defect of the client), so this waits past that.
    std::thread::sleep(std::time::Duration::from_millis(300));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(
        server.cancelled().len(),
        1,
        "{:?}\n{}",
        server.all_calls(),
        stderr(&out)
    );
    wait_for("the cancelled command to be killed", || {
        server.running().is_empty()
    });
    assert!(
        !crate::space::alive(group),
        "the command {group} still runs"
    );
    assert!(!s.exists(output), "{output} was written");
    assert!(s.leftovers().is_empty(), "{:?}", s.leftovers());
}

#[test]
fn the_disk_cache_answers_a_relink_before_the_server_is_asked() {
    let server = Server::start();
    let s = Space::new();
    let disk = s.tmp.with_file_name("disk");
    let disk_arg = format!("--remote-disk-cache={}", disk.display());
    modules(&s, None);
    content_jobs(&s, COMPILE);
    let (err, first) = linked(&s, &server, &[&disk_arg]);
    assert_eq!(ran(&first), ["remote"; 5], "{err}");
    let kept = fs::read_dir(disk.join("cas"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(kept >= 1, "the outputs are kept in {}", disk.display());
    for i in 0..5 {
        fs::remove_file(s.path(&format!("job{i}.native.o"))).unwrap();
    }
    let (lookups, reads) = (
        server.calls(Method::GetActionResult),
        server.calls(Method::BatchReadBlobs),
    );
    let (err, second) = linked(&s, &server, &[&disk_arg]);
    assert_eq!(ran(&second), ["remote cache"; 5], "{err}");
    assert_eq!(
        each_job(&second, "/remote/worker"),
        ["disk cache"; 5],
        "{err}"
    );
    assert_eq!(
        server.calls(Method::GetActionResult),
        lookups,
        "the cache was not asked"
    );
    assert_eq!(
        server.calls(Method::BatchReadBlobs),
        reads,
        "nothing was fetched"
    );
    assert_eq!(server.calls(Method::Execute), 5);
    for i in 0..5 {
        assert_eq!(s.read(&format!("job{i}.native.o")), object());
    }
}

#[test]
fn blobs_larger_than_a_batch_go_through_bytestream_both_ways() {
    let server = Server::with(Config {
        max_batch: 8 << 10,
        ..Config::default()
    });
    let s = Space::new();
    let big_input = "x".repeat(40_000);
    s.write("big.in", &big_input);
    // An object of 64 + 40,000 bytes: its header, then zeros.
    let script = concat!(
        "test $(wc -c < big.in) = 40000 && { ",
        obj!(),
        "; head -c 40000 /dev/zero; } > big.o"
    );
    s.write(
        "j.json",
        &sh_jobs(&[
            (script, &["big.in"], &["big.o"]),
            (concat!(obj!(), " > small.o"), &[], &["small.o"]),
        ]),
    );
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["remote"; 2], "{err}");
    assert!(server.calls(Method::Write) >= 1, "{:?}", server.all_calls());
    assert!(server.calls(Method::Read) >= 1, "{:?}", server.all_calls());
    let big = fs::read(s.path("big.o")).unwrap();
    assert_eq!(big.len(), 40_064);
    assert_eq!(big[..64], *object().as_bytes());
    assert!(
        report["remote"]["uploaded_bytes"].as_u64().unwrap() > 40_000,
        "{report}"
    );
    assert!(
        report["remote"]["downloaded_bytes"].as_u64().unwrap() > 40_000,
        "{report}"
    );
    // A relink reads the big object from the cache through ByteStream too.
    fs::remove_file(s.path("big.o")).unwrap();
    let reads = server.calls(Method::Read);
    let (err, again) = linked(&s, &server, &[]);
    assert_eq!(ran(&again), ["remote cache"; 2], "{err}");
    assert!(server.calls(Method::Read) > reads);
    assert_eq!(fs::read(s.path("big.o")).unwrap(), big);
}

#[test]
fn a_server_that_refuses_cache_writes_still_links_and_caches_what_it_executed() {
    let server = Server::start();
    server.set(|f| f.refuse_cache_writes = true);
    let s = Space::new();
    three_jobs(&s);
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["remote"; 3], "{err}");
    assert_eq!(server.calls(Method::UpdateActionResult), 1);
    assert!(
        err.contains("PERMISSION_DENIED"),
        "the refused entry is one warning: {err}"
    );
    // No link entry: the relink asks for each job, and the server's own results answer.
    let lookups = server.calls(Method::GetActionResult);
    let (err, again) = linked(&s, &server, &[]);
    assert_eq!(ran(&again), ["remote cache"; 3], "{err}");
    assert_eq!(
        server.calls(Method::GetActionResult) - lookups,
        4,
        "the entry, then each job"
    );
    assert_eq!(server.executed().len(), 3);
}

#[test]
fn transient_failures_are_retried_and_a_broken_stream_is_reattached() {
    let server = Server::start();
    server.set(|f| {
        f.fail_times(Method::FindMissingBlobs, tonic::Code::Unavailable, 2);
        f.break_streams = 3;
    });
    let s = Space::new();
    three_jobs(&s);
    let (err, report) = linked(&s, &server, &[]);
    assert_eq!(ran(&report), ["remote"; 3], "{err}");
    assert_eq!(
        server.calls(Method::FindMissingBlobs),
        5,
        "two failures, then an answer, and one call for each of the other two jobs"
    );
    assert_eq!(server.calls(Method::Execute), 3);
    assert_eq!(
        server.calls(Method::WaitExecution),
        3,
        "each broken stream re-attached"
    );
    assert_eq!(server.executed().len(), 3, "no job executed twice");
}

#[test]
fn remote_no_cache_neither_reads_nor_writes_the_action_cache() {
    let server = Server::start();
    let s = Space::new();
    three_jobs(&s);
    for _ in 0..2 {
        let (err, report) = linked(&s, &server, &["--remote-no-cache"]);
        assert_eq!(ran(&report), ["remote"; 3], "{err}");
    }
    assert_eq!(server.calls(Method::GetActionResult), 0);
    assert_eq!(server.calls(Method::UpdateActionResult), 0);
    assert_eq!(server.executed().len(), 6);
    assert!(server.executed().iter().all(|e| e.do_not_cache));
    assert_eq!(server.cache_entries(), 0);
}

#[test]
fn doctor_executes_one_uncached_test_action_and_names_a_server_that_is_down() {
    let mut server = Server::start();
    let s = Space::new();
    let mut cmd = s.bridge(&["doctor"]);
    cmd.args(["--remote", &server.url(), "--remote-instance=main"]);
    // No clang here: doctor exits 3 for that, whatever the server says.
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with("remote:"))
        .unwrap_or_default();
    for said in [
        "REAPI 2.2",
        "SHA-256 yes",
        "execution enabled",
        "cache updates yes",
        "round trip",
        "on worker in-process",
    ] {
        assert!(line.contains(said), "{said}: {text}");
    }
    assert!(!line.contains("MISSING"), "{text}");
    let executed = server.executed();
    assert_eq!(executed.len(), 1);
    assert_eq!(
        executed[0].arguments,
        ["/bin/sh", "-c", "echo dtlto-bridge > doctor.txt"]
    );
    assert!(executed[0].do_not_cache);
    assert_eq!(server.cache_entries(), 0);

    server.kill();
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("remote:    MISSING: connect to"), "{text}");
}

#[test]
fn rexec_runs_a_command_remotely_then_takes_it_from_the_cache() {
    let server = Server::start();
    let s = Space::new();
    s.write("in.txt", "input\n");
    let rexec = |out: &str| {
        let mut cmd = s.bridge(&["rexec", "--inputs=in.txt", &format!("--outputs={out}")]);
        cmd.args(server.args()).args([
            "--",
            "sh",
            "-c",
            concat!("cat in.txt > /dev/null && ", obj!(), " > \"$0\""),
            out,
        ]);
        s.ok(&mut cmd)
    };
    let out = rexec("r.o");
    assert!(
        !stderr(&out).contains("here, not remotely"),
        "{}",
        stderr(&out)
    );
    assert_eq!(s.read("r.o"), object());
    assert_eq!(server.executed().len(), 1);
    fs::remove_file(s.path("r.o")).unwrap();
    // The same command: Execute answers from the action cache.
    rexec("r.o");
    assert_eq!(s.read("r.o"), object());
    assert_eq!(server.calls(Method::Execute), 2);
    assert_eq!(server.executed().len(), 1, "not executed again");
}

/// A client killed outright cancels nothing; the server's handle still stops the command it
/// runs when the test ends, so nothing outlives the test.
#[test]
fn a_server_dropped_mid_job_kills_the_command_it_runs() {
    let server = Server::start();
    let s = Space::new();
    s.write(
        "j.json",
        &sh_jobs(&[(concat!("sleep 30; ", obj!(), " > slow.o"), &[], &["slow.o"])]),
    );
    let mut cmd = s.bridge(&["j.json"]);
    cmd.args(server.args()).stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    wait_for("the server to run the job", || !server.running().is_empty());
    let group = server.running()[0];
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(server.cancelled().is_empty());
    assert!(crate::space::alive(group), "the command runs on");
    drop(server);
    assert!(
        !crate::space::alive(group),
        "the command {group} outlived the server"
    );
}
