//! Bad days: wrappers that fail or lie, local fallback, cancellation by signal, real distcc.

mod common;

use common::{alive, assert_linked, require, stderr, wait_for, Space, BRIDGE};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const HELLO: &str = "hello from dtlto-bridge: add=5 mul=20 square=36\n";

/// Wrappers with a known way of failing; each logs that it ran.
const BAD_WRAPPERS: [(&str, &str); 3] = [
    ("fails.sh", "echo ran >> wrapper.log\necho 'remote host refused' >&2\nexit 1\n"),
    ("nothing.sh", "echo ran >> wrapper.log\nexit 0\n"),
    (
        "truncates.sh",
        // Runs the job, then keeps only the first 200 bytes of its object.
        "echo ran >> wrapper.log\n\"$@\" || exit\nwhile [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n\
         head -c 200 \"$out\" > \"$out.cut\" && mv \"$out.cut\" \"$out\"\n",
    ),
];

fn wrapper_arg(s: &Space, name: &str) -> String {
    format!(
        "--wrapper={}",
        shell_words::quote(s.path(name).to_str().unwrap())
    )
}

#[test]
fn a_failing_wrapper_falls_back_to_a_local_run_with_both_backends() {
    let s = Space::new();
    let inputs = s.hello();
    for (name, body) in BAD_WRAPPERS {
        s.script(name, body);
        for backend in ["--backend=ninja", "--backend=make"] {
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
                _ => "but it wrote a truncated",
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
        3 * 2 * 5,
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

/// Jobs that record their pid, write a partial output, then hang.
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
    jobs.push(serde_json::json!({"args": ["-c", "echo done > done.o"], "inputs": [], "outputs": ["done.o"]}));
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
    wait_for("three running jobs and one done", || {
        s.exists("pids")
            && s.read("pids").lines().count() == 3
            && s.files_matching("0badcafe").len() == 3
            && s.exists("done.o")
    });
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
        "done\n",
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
    for backend in ["--backend=ninja", "--backend=make"] {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            cancel(backend, sig, false);
        }
        cancel(backend, libc::SIGINT, true);
    }
}

/// distccd on 127.0.0.1, stopped when dropped.
struct Distccd(Child);

impl Drop for Distccd {
    fn drop(&mut self) {
        // Its preforked children share its process group.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Stock distcc cannot ship a ThinLTO backend job: with a real distccd as its only host it runs
/// every job on localhost, and so it does when that host is down. dtlto-bridge says so.
#[test]
fn real_distcc_runs_backend_jobs_locally_and_dtlto_bridge_warns() {
    let distccd = require("distccd");
    require("distcc");
    let s = Space::new();
    let inputs = s.hello();
    let port = free_port();
    let log = s.path("distccd.log");
    let mut cmd = s.program(&distccd, &[]);
    cmd.args([
        "--daemon",
        "--no-detach",
        "--allow",
        "127.0.0.1",
        "--listen",
        "127.0.0.1",
    ])
    .args([
        "--port",
        &port.to_string(),
        "--log-level",
        "info",
        "--log-file",
    ])
    .arg(&log);
    if unsafe { libc::getuid() } == 0 {
        cmd.args(["--user", "nobody"]);
        std::fs::set_permissions(&s.dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
    }
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let _server = Distccd(cmd.spawn().unwrap());
    wait_for("distccd to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });

    let down = free_port();
    for hosts in [format!("127.0.0.1:{port}"), format!("127.0.0.1:{down}")] {
        let client_log = s.path("distcc-client.log");
        let _ = std::fs::remove_file(&client_log);
        let mut link = s.command(
            "clang-22",
            &["-O2", "-flto=thin", "-fuse-ld=lld-22", "-o", "hello"],
        );
        link.arg(format!("-fthinlto-distributor={BRIDGE}"))
            .arg("-Xthinlto-distributor=--wrapper=distcc")
            .args(&inputs)
            .env("DISTCC_HOSTS", &hosts)
            .env("DISTCC_LOG", &client_log)
            .env("DISTCC_VERBOSE", "0");
        let out = link.output().unwrap();
        assert_linked(&out);
        assert_eq!(s.run_program("hello"), HELLO);
        let err = stderr(&out);
        assert!(
            err.contains("distcc runs ThinLTO backend jobs on this machine"),
            "{err}"
        );
        assert_eq!(
            err.matches("dtlto-bridge: warning: distcc").count(),
            1,
            "warned once: {err}"
        );
        let client = std::fs::read_to_string(&client_log).unwrap();
        assert_eq!(
            client.matches("exec on localhost").count(),
            5,
            "{hosts}: {client}"
        );
    }
    let server = std::fs::read_to_string(&log).unwrap();
    assert!(server.contains("preforking daemon started"), "{server}");
    assert!(
        !server.contains("job complete"),
        "no job reached distccd: {server}"
    );
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
