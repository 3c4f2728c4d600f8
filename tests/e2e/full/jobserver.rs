//! Sharing the host: concurrent real links under make 4.3 (pipe), make 4.4.1 (fifo), cargo, and
//! with no jobserver at all, each job instrumented to log when it starts and ends.

use crate::space::{pytool, require, stderr, wait_for, Space, BRIDGE};
use std::path::Path;
use std::time::{Duration, Instant};

const LINKS: [&str; 3] = ["p1", "p2", "p3"];

/// A wrapper that logs each job's start and end (in nanoseconds) and keeps it busy 0.3 s;
/// returned shell-quoted, as DTLTO_BRIDGE_WRAPPER takes it.
fn instrument(s: &Space) -> String {
    let log = s.path("jobs.log");
    let script = s.script(
        "log.sh",
        &format!(
            "echo \"start $(date +%s%N)\" >> '{log}'\n\"$@\"; rc=$?\nsleep 0.3\n\
             echo \"end $(date +%s%N)\" >> '{log}'\nexit $rc\n",
            log = log.display()
        ),
    );
    shell_words::quote(script.to_str().unwrap()).into_owned()
}

/// The most jobs that ran at once, according to the log.
fn max_concurrency(s: &Space, log: &str) -> usize {
    let mut events: Vec<(u128, i32)> = s
        .read(log)
        .lines()
        .map(|l| {
            let (kind, t) = l.split_once(' ').unwrap();
            (t.parse().unwrap(), if kind == "end" { -1 } else { 1 })
        })
        .collect();
    events.sort();
    let (mut now, mut max) = (0i32, 0i32);
    for (_, d) in events {
        now += d;
        max = max.max(now);
    }
    assert_eq!(now, 0, "every job that started ended");
    max as usize
}

/// clang-22's link line for one program of the hello example, through dtlto-bridge.
fn link_line(inputs: &[String], output: &str, extra: &str) -> String {
    format!(
        "clang-22 -O2 -flto=thin -fuse-ld=lld-22 -fthinlto-distributor='{BRIDGE}' {extra} {} -o {output}",
        inputs.join(" ")
    )
}

/// An outer Makefile that links three programs, each link several backend jobs.
fn outer_makefile(s: &Space, inputs: &[String], plus: &str) {
    let mut mk = format!(
        "export DTLTO_BRIDGE_WRAPPER = {}\nall: {}\n",
        instrument(s),
        LINKS.join(" ")
    );
    for p in LINKS {
        mk.push_str(&format!("{p}:\n\t{plus}{}\n", link_line(inputs, p, "")));
    }
    s.write("outer.mk", &mk);
}

fn run_outer(s: &Space, make: &Path, env: &[(&str, &str)]) -> String {
    let mut cmd = s.program(make, &["-j2", "-f", "outer.mk"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(out.status.success(), "outer make failed:\n{text}");
    for p in LINKS {
        assert!(s.run_program(p).starts_with("hello from dtlto-bridge"));
    }
    text
}

fn under_outer_make(make: &Path, env: &[(&str, &str)]) {
    let s = Space::new();
    let inputs = s.hello();
    outer_makefile(&s, &inputs, "+");
    let out = run_outer(&s, make, env);
    assert!(!out.contains("warning"), "{out}");
    let max = max_concurrency(&s, "jobs.log");
    assert_eq!(
        max, 2,
        "15 backend jobs under make -j2 ran at most {max} at once"
    );
}

#[test]
fn make_4_3_pipe_jobserver_bounds_three_links_with_ninja_1_11() {
    require("ninja");
    under_outer_make(&require("make"), &[("DTLTO_BRIDGE_BACKEND", "ninja")]);
}

#[test]
fn make_4_3_pipe_jobserver_bounds_three_links_with_make() {
    under_outer_make(&require("make"), &[("DTLTO_BRIDGE_BACKEND", "make")]);
}

#[test]
fn make_4_4_fifo_jobserver_bounds_three_links_with_ninja_1_13() {
    let ninja = pytool("ninja");
    under_outer_make(
        &pytool("make"),
        &[
            ("DTLTO_BRIDGE_BACKEND", "ninja"),
            ("DTLTO_BRIDGE_NINJA", ninja.to_str().unwrap()),
        ],
    );
}

#[test]
fn make_4_4_fifo_jobserver_bounds_three_links_with_make_4_4() {
    let make = pytool("make");
    under_outer_make(
        &make,
        &[
            ("DTLTO_BRIDGE_BACKEND", "make"),
            ("DTLTO_BRIDGE_MAKE", make.to_str().unwrap()),
        ],
    );
}

/// make 4.3 closes its jobserver descriptors in recipes not marked '+' (CMake's Makefile
/// generator writes such recipes): the links share the host pool instead of running one job at a
/// time, and the advice to add '+' is given once for the whole build, not once per link.
#[test]
fn an_unusable_jobserver_shares_the_host_pool_and_advises_once_per_build() {
    let s = Space::new();
    let inputs = s.hello();
    outer_makefile(&s, &inputs, "");
    let out = run_outer(&s, &require("make"), &[("DTLTO_BRIDGE_HOST_SLOTS", "2")]);
    assert_eq!(
        out.matches("Mark the link recipe with '+'").count(),
        1,
        "three links, one piece of advice:\n{out}"
    );
    assert_eq!(
        max_concurrency(&s, "jobs.log"),
        2,
        "the host pool's two slots, not one job at a time"
    );
}

/// `-j` wins over the parent's jobserver, and the warning names where it came from: the option
/// the linker passed, or the variable.
#[test]
fn an_explicit_jobs_count_overrides_the_jobserver_and_says_so() {
    let s = Space::new();
    let inputs = s.hello();
    s.write(
        "outer.mk",
        &format!(
            "all: p1 p2\np1:\n\t+{}\np2:\n\t+DTLTO_BRIDGE_JOBS=2 {}\n",
            link_line(&inputs, "p1", "-Xthinlto-distributor=-j3"),
            link_line(&inputs, "p2", "")
        ),
    );
    let out = s.ok(&mut s.command("make", &["-j2", "-f", "outer.mk"]));
    let err = stderr(&out);
    assert!(
        err.contains("-j 3 (passed by the linker) overrides the jobserver of the parent build"),
        "{err}"
    );
    assert!(
        err.contains("DTLTO_BRIDGE_JOBS=2 overrides the jobserver of the parent build"),
        "{err}"
    );
}

/// With no jobserver (Debian's ninja 1.11, MSBuild, a shell loop), three links at once still run
/// at most the available parallelism of backend jobs in total, through the host-wide pool.
#[test]
fn three_links_without_a_jobserver_share_the_host_pool() {
    let s = Space::new();
    let inputs = s.hello();
    let wrapper = instrument(&s);
    let children: Vec<_> = LINKS
        .iter()
        .map(|p| {
            let mut cmd = s.command("sh", &["-c", &link_line(&inputs, p, "")]);
            cmd.env("DTLTO_BRIDGE_WRAPPER", &wrapper)
                .env("DTLTO_BRIDGE_HOST_SLOTS", "2");
            cmd.spawn().unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    for p in LINKS {
        assert!(s.run_program(p).starts_with("hello"));
    }
    let max = max_concurrency(&s, "jobs.log");
    assert_eq!(
        max, 2,
        "three links with a pool of 2 ran {max} jobs at once"
    );
}

/// cargo passes its jobserver to build scripts: three build scripts, each doing a DTLTO link,
/// under `cargo build -j2` never run more than 2 backend jobs at once.
#[test]
fn cargo_jobserver_bounds_links_in_build_scripts() {
    let s = Space::new();
    let inputs = s.hello();
    let wrapper = instrument(&s);
    let mut members = Vec::new();
    for p in LINKS {
        let krate = format!("c{p}");
        let dir = s.path(&krate);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(
            dir.join("Cargo.toml"),
            format!("[package]\nname = \"{krate}\"\nversion = \"0.0.0\"\nedition = \"2021\"\n"),
        )
        .unwrap();
        std::fs::write(dir.join("src/lib.rs"), "").unwrap();
        std::fs::write(
            dir.join("build.rs"),
            format!(
                "fn main() {{\n    let ok = std::process::Command::new(\"sh\").arg(\"-c\").arg({:?})\n        \
                 .current_dir({:?}).status().unwrap().success();\n    assert!(ok);\n}}\n",
                link_line(&inputs, p, ""),
                s.dir
            ),
        )
        .unwrap();
        members.push(format!("\"{krate}\""));
    }
    s.write(
        "Cargo.toml",
        &format!(
            "[workspace]\nresolver = \"2\"\nmembers = [{}]\n",
            members.join(", ")
        ),
    );
    let out = s
        .command("cargo", &["build", "-j2", "--offline", "--quiet"])
        .env("DTLTO_BRIDGE_WRAPPER", &wrapper)
        .env("CARGO_TARGET_DIR", s.path("target"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for p in LINKS {
        assert!(s.run_program(p).starts_with("hello"));
    }
    let max = max_concurrency(&s, "jobs.log");
    assert_eq!(max, 2, "cargo -j2 ran {max} backend jobs at once");
}

/// A link killed with SIGTERM, or with SIGKILL (its launchers give the tokens back then), returns
/// its jobserver tokens, so the rest of the build runs at full parallelism; it leaves no job
/// running and no partial output.
#[test]
fn a_killed_link_returns_its_tokens() {
    for backend in ["ninja", "direct"] {
        for sig in [libc::SIGTERM, libc::SIGKILL] {
            killed_link_returns_its_tokens(sig, backend);
        }
    }
}

fn killed_link_returns_its_tokens(sig: i32, backend: &str) {
    let s = Space::new();
    let inputs = s.hello();
    let wrapper = instrument(&s);
    s.script("hang.sh", "echo $$ >> hang.pids\nexec sleep 60\n");
    s.script(
        "dist-a.sh",
        &format!("echo $$ > a.pid\nexec '{BRIDGE}' \"$@\"\n"),
    );
    // A: its jobs hang, holding make's implicit slot and the one free token of -j3.
    // B: starts once A holds them, so B alone cannot reach two jobs unless A gives its token back.
    let a = format!(
        "+DTLTO_BRIDGE_WRAPPER=\"{}\" DTLTO_BRIDGE_BACKEND={backend} clang-22 -O2 -flto=thin \
         -fuse-ld=lld-22 -fthinlto-distributor='{}' {} -o pa",
        shell_words::quote(s.path("hang.sh").to_str().unwrap()),
        s.path("dist-a.sh").display(),
        inputs.join(" ")
    );
    let b = format!(
        "+while [ \"$$(wc -l < hang.pids 2>/dev/null || echo 0)\" -lt 2 ]; do sleep 0.05; done; \
         DTLTO_BRIDGE_WRAPPER=\"{}\" {}",
        wrapper,
        link_line(&inputs, "pb", "")
    );
    s.write("outer.mk", &format!("all: pa pb\npa:\n\t{a}\npb:\n\t{b}\n"));
    let outer = s
        .command("make", &["-k", "-j3", "-f", "outer.mk"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("link A to run two jobs", || {
        s.exists("hang.pids") && s.read("hang.pids").lines().count() >= 2
    });
    // Let B start its first job on its implicit slot, then kill A's dtlto-bridge alone.
    wait_for("link B to start", || s.exists("jobs.log"));
    let pid: i32 = s.read("a.pid").trim().parse().unwrap();
    let killed_at = Instant::now();
    unsafe { libc::kill(pid, sig) };
    let out = outer.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert!(
        !out.status.success(),
        "A was killed, so the outer make fails:\n{text}"
    );
    if sig == libc::SIGTERM {
        assert!(text.contains("interrupted by signal 15"), "{text}");
    }
    assert!(killed_at.elapsed() < Duration::from_secs(20));
    assert!(s.run_program("pb").starts_with("hello"));
    assert!(!s.exists("pa"));
    // make -j3 has three slots; with A gone, B may use all three: its implicit slot, the token
    // make frees when A's recipe ends, and the token A's job gives back. A leaked token caps B at 2.
    assert_eq!(
        max_concurrency(&s, "jobs.log"),
        3,
        "{backend} {sig}: B got A's token back"
    );
    for pid in s.read("hang.pids").lines() {
        assert!(
            !crate::space::alive(pid.parse().unwrap()),
            "job process {pid} of the killed link is still running"
        );
    }
    assert!(s.files_matching("native.o").is_empty());
}
