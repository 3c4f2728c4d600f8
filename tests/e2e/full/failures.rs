//! Bad days in real links: wrappers that fail or lie, local fallback, real distcc, concurrent
//! links of one output.

use crate::space::{
    assert_linked, require, stderr, wait_for, wrapper_arg, Space, BAD_WRAPPERS, BRIDGE, HELLO,
};
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
