//! distcc shops: backend jobs sent as bundles to two stock distccd on 127.0.0.1, each allowed to
//! run the host entry through the DISTCC_CMDLIST that `dtlto-bridge host setup` writes, with
//! `--wrapper distcc` the only change on the link's side.

use crate::space::{assert_linked, require, stderr, wait_for, Space, BRIDGE, HELLO};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// distccd on 127.0.0.1, stopped when dropped (its preforked children share its group).
struct Distccd {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Distccd {
    fn drop(&mut self) {
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Distccd {
    /// A daemon named `name` (DTLTO_CLANG_HOST) allowing what `cmdlist` lists, its files in
    /// `host` (its TMPDIR and its log), `env` added.
    fn start(host: &Path, name: &str, cmdlist: &Path, env: &[(&str, &str)]) -> Distccd {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = host.join(format!("{name}.log"));
        let tmp = host.join(format!("{name}.tmp"));
        fs::create_dir_all(&tmp).unwrap();
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o777)).unwrap();
        let mut cmd = Command::new(require("distccd"));
        crate::space::isolate(&mut cmd)
            .args([
                "--daemon",
                "--no-detach",
                "--allow",
                "127.0.0.1",
                "--listen",
                "127.0.0.1",
                // Its default is the number of CPUs and 2.
                "--jobs",
                "8",
            ])
            .args([
                "--port",
                &port.to_string(),
                "--log-level",
                "info",
                "--log-file",
            ])
            .arg(&log)
            .env("DISTCC_CMDLIST", cmdlist)
            .env("DTLTO_CLANG_HOST", name)
            .env("TMPDIR", &tmp)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if unsafe { libc::getuid() } == 0 {
            cmd.args(["--user", "nobody"]);
        }
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.spawn().unwrap();
        wait_for("distccd to listen", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Distccd { child, port, log }
    }

    fn host(&self, slots: usize) -> String {
        format!("127.0.0.1:{}/{slots}", self.port)
    }

    /// How many jobs it compiled.
    fn compiled(&self) -> usize {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .matches("COMPILE_OK")
            .count()
    }

    /// Scratch directories left in its TMPDIR.
    fn scratch_left(&self) -> usize {
        let tmp = self.log.with_extension("tmp");
        (fs::read_dir(tmp).unwrap().flatten())
            .filter(|e| e.file_name().to_string_lossy().starts_with("dtlto-clang."))
            .count()
    }
}

/// A directory the daemons (user nobody when the tests run as root) can read and write, with
/// the binary in `bin/` (the checkout's directories may be closed to that user).
fn host_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("dtlto-bridge-hosts-")
        .tempdir()
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let bin = dir.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let exe = bin.join("dtlto-bridge");
    if fs::hard_link(BRIDGE, &exe).is_err() {
        fs::copy(BRIDGE, &exe).unwrap();
    }
    dir
}

/// `dtlto-bridge host setup --dir DIR`, twice: the second run finds everything done. Returns
/// the DISTCC_CMDLIST file.
fn setup(s: &Space, dir: &Path) -> PathBuf {
    let dir_arg = format!("--dir={}", dir.display());
    let first = s.ok(&mut s.bridge(&["host", "setup", &dir_arg]));
    let said = String::from_utf8_lossy(&first.stdout);
    assert!(
        said.contains("linked ") && said.contains("wrote "),
        "{said}"
    );
    let again = s.ok(&mut s.bridge(&["host", "setup", &dir_arg]));
    let said = String::from_utf8_lossy(&again.stdout);
    assert!(
        said.contains("already links") && said.contains("already allows"),
        "{said}"
    );
    let list = dir.join("distcc-cmdlist");
    assert!(fs::read_to_string(&list)
        .unwrap()
        .starts_with(&format!("{}/dtlto-clang\n", dir.display())));
    list
}

/// clang-22 links through `--wrapper distcc` with DISTCC_HOSTS `hosts`.
fn link(s: &Space, inputs: &[String], output: &str, hosts: &str) -> std::process::Output {
    fs::create_dir_all(s.tmp.join("distcc")).unwrap();
    let mut cmd = s.command(
        "clang-22",
        &["-O2", "-flto=thin", "-fuse-ld=lld-22", "-o", output],
    );
    cmd.arg(format!("-fthinlto-distributor={BRIDGE}"))
        .args([
            "-Xthinlto-distributor=--wrapper=distcc",
            "-Xthinlto-distributor=--summary",
        ])
        .args(inputs)
        .env("DISTCC_HOSTS", hosts)
        .env("DISTCC_DIR", s.tmp.join("distcc"));
    cmd.output().unwrap()
}

/// The same link in-process-free and wrapper-free: what every program must equal.
fn local(s: &Space, inputs: &[String], output: &str) -> Vec<u8> {
    assert_linked(&s.link(Path::new(BRIDGE), &[], inputs, output));
    fs::read(s.path(output)).unwrap()
}

#[test]
fn hello_links_through_two_distccd_hosts_byte_for_byte() {
    let s = Space::new();
    let inputs = s.hello();
    let hosts = host_dir();
    let cmdlist = setup(&s, &hosts.path().join("bin"));
    // Each host's entry is `slow/dtlto-clang`: it waits until two bundles are on the hosts at
    // once (or 20 s pass), so that distcc, which takes a slot on each host in turn, uses both.
    let slow = barrier_entry(hosts.path(), &hosts.path().join("bin/dtlto-clang"), 2);
    let a = Distccd::start(hosts.path(), "a", &cmdlist, &[]);
    let b = Distccd::start(hosts.path(), "b", &slow, &[]);
    let check = s.ok(&mut s.bridge(&[
        "host",
        "check",
        "--wrapper=distcc",
        "--compiler=clang-22",
        &a.host(1),
    ]));
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(
        said.starts_with("host a runs bundles with Debian clang version 22"),
        "{said}"
    );
    let _ = fs::remove_file(&a.log);
    let a = Distccd::start(hosts.path(), "a", &slow, &[]);

    let want = local(&s, &inputs, "hello.local");
    let out = link(
        &s,
        &inputs,
        "hello",
        // distcc's usual `localhost` entry: a bundle is never sent there.
        &format!("localhost/2 {} {}", a.host(2), b.host(2)),
    );
    let err = linked_on_hosts(&s, &out, &want);
    assert!(!err.contains("on this machine"), "{err}");
    assert_eq!(
        a.compiled() + b.compiled(),
        5,
        "every job compiled on a host: {err}"
    );
    assert!(a.compiled() > 0 && b.compiled() > 0, "both hosts: {err}");
    let on = format!("on hosts: a {}, b {};", a.compiled(), b.compiled());
    assert!(err.contains(&on), "{on}: {err}");
    assert_eq!(a.scratch_left() + b.scratch_left(), 0);
}

/// Checks that `out` linked examples/hello as `want`, every job through the wrapper; its stderr.
pub(super) fn linked_on_hosts(s: &Space, out: &std::process::Output, want: &[u8]) -> String {
    assert_linked(out);
    let err = stderr(out);
    assert_eq!(
        fs::read(s.path("hello")).unwrap(),
        want,
        "the same program: {err}"
    );
    assert_eq!(s.run_program("hello"), HELLO);
    assert!(
        err.contains("(0 local, 5 via wrapper, 0 fell back)"),
        "{err}"
    );
    err
}

/// An entry that counts the bundles on the hosts at once (each leaves a file in
/// `dir/running` while it runs, and logs the count it saw to `dir/counts`), and waits until
/// `barrier` of them run (or 20 s pass, once) before it runs `entry`. Returns its
/// DISTCC_CMDLIST.
fn barrier_entry(dir: &Path, entry: &Path, barrier: usize) -> PathBuf {
    let d = dir.display();
    let script = format!(
        "#!/bin/sh\nmkdir -p {d}/running\ntouch {d}/running/$$\n\
         i=0\nwhile [ ! -e {d}/released ] && [ $(ls {d}/running | wc -l) -lt {barrier} ] && [ $i -lt 200 ]; do\n\
         sleep 0.1; i=$((i+1)); done\ntouch {d}/released\n\
         ls {d}/running | wc -l >> {d}/counts\n\
         {entry} \"$@\"\nrc=$?\nrm -f {d}/running/$$\nexit $rc\n",
        entry = entry.display()
    );
    let slow = dir.join("slow");
    fs::create_dir_all(&slow).unwrap();
    let path = slow.join("dtlto-clang");
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    let list = dir.join("slow-cmdlist");
    fs::write(&list, format!("{}\n", path.display())).unwrap();
    list
}

#[test]
fn a_host_that_is_down_and_one_whose_clang_differs_leave_the_jobs_to_this_machine() {
    let s = Space::new();
    let inputs = s.hello();
    let hosts = host_dir();
    let cmdlist = setup(&s, &hosts.path().join("bin"));
    let clang19 = require("clang-19");
    let old = Distccd::start(
        hosts.path(),
        "old",
        &cmdlist,
        &[("DTLTO_CLANG_COMPILER", clang19.to_str().unwrap())],
    );
    let down = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let want = local(&s, &inputs, "hello.local");
    for hosts in [old.host(4), format!("127.0.0.1:{down}/4")] {
        let out = link(&s, &inputs, "hello", &hosts);
        assert_linked(&out);
        let err = stderr(&out);
        assert_eq!(fs::read(s.path("hello")).unwrap(), want, "{hosts}: {err}");
        assert!(
            err.contains("(0 local, 0 via wrapper, 5 fell back)"),
            "{hosts}: {err}"
        );
        assert!(err.contains("were run again locally"), "{hosts}: {err}");
        if hosts == old.host(4) {
            assert!(
                err.contains("(refused on old: the compiler here, "),
                "{err}"
            );
            assert!(err.contains("is \"Debian clang version 19"), "{err}");
            assert!(
                err.contains("the bundle was made for \"Debian clang version 22"),
                "{err}"
            );
        } else {
            assert!(
                err.contains("failed through the wrapper (no host took its bundle: ERROR: "),
                "{err}"
            );
        }
    }
    assert_eq!(old.scratch_left(), 0);
}

/// Bundles take the hosts' slots, not this machine's: under `make -j2` (two local slots), a
/// link of 20 jobs through two hosts of 8 slots has 16 bundles on the hosts at once.
#[test]
fn under_make_j2_two_hosts_of_eight_slots_run_sixteen_bundles_at_once() {
    let s = Space::new();
    let mut inputs = Vec::new();
    let mut main = String::new();
    for k in 0..20 {
        s.write(
            &format!("f{k}.c"),
            &format!("int f{k}(int x) {{ return x * {k} + {k}; }}\n"),
        );
        s.compile(&s.path(&format!("f{k}.c")), &format!("f{k}.o"));
        inputs.push(format!("f{k}.o"));
        main.push_str(&format!("int f{k}(int);\n"));
    }
    main.push_str("#include <stdio.h>\nint main(int c, char **v) { int t = 0;\n");
    for k in 0..20 {
        main.push_str(&format!("t += f{k}(c);\n"));
    }
    main.push_str("printf(\"%d\\n\", t); return 0; }\n");
    s.write("main.c", &main);
    s.compile(&s.path("main.c"), "main.o");
    inputs.push("main.o".into());

    let hosts = host_dir();
    setup(&s, &hosts.path().join("bin"));
    let list = barrier_entry(hosts.path(), &hosts.path().join("bin/dtlto-clang"), 16);
    let a = Distccd::start(hosts.path(), "a", &list, &[]);
    let b = Distccd::start(hosts.path(), "b", &list, &[]);
    let want = local(&s, &inputs, "many.local");

    let recipe = format!(
        "+clang-22 -O2 -flto=thin -fuse-ld=lld-22 -fthinlto-distributor={BRIDGE} \
         -Xthinlto-distributor=--wrapper=distcc -Xthinlto-distributor=--summary {} -o many\n",
        inputs.join(" ")
    );
    s.write("Makefile", &format!("many:\n\t{recipe}"));
    fs::create_dir_all(s.tmp.join("distcc")).unwrap();
    let mut make = s.command("make", &["-j2"]);
    make.env("DISTCC_HOSTS", format!("{} {}", a.host(8), b.host(8)))
        .env("DISTCC_DIR", s.tmp.join("distcc"));
    let out = make.output().unwrap();
    assert_linked(&out);
    let err = stderr(&out);
    assert_eq!(fs::read(s.path("many")).unwrap(), want, "{err}");
    assert!(
        err.contains("(0 local, 21 via wrapper, 0 fell back)"),
        "{err}"
    );
    let counts = fs::read_to_string(hosts.path().join("counts")).unwrap();
    let most = counts
        .lines()
        .filter_map(|l| l.trim().parse::<usize>().ok())
        .max();
    assert_eq!(most, Some(16), "bundles on the hosts at once: {counts}");
    assert_eq!(a.compiled() + b.compiled(), 21);
}

/// A bundle whose module includes a host file (module asm's `.incbin`) gets nothing: clang runs
/// confined to the bundle's files, and the host refuses the job.
#[test]
fn a_module_that_includes_a_host_file_gets_nothing_back() {
    let s = Space::new();
    let hosts = host_dir();
    setup(&s, &hosts.path().join("bin"));
    let clang = fs::canonicalize(require("clang-22")).unwrap();
    let version = String::from_utf8(s.ok(&mut s.command("clang-22", &["--version"])).stdout)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let secret = hosts.path().join("secret");
    fs::write(&secret, "the host's secret\n").unwrap();
    let module = format!(
        "module asm \".section .data.leak,\\22a\\22\"\nmodule asm \".incbin \\22{}\\22\"\n",
        secret.display()
    );
    let data = crate::fast::bundle::bundle_for(
        clang.to_str().unwrap(),
        &version,
        &[("a.ll", module.as_bytes())],
        &["-c", "-x", "ir", "a.ll", "-o", "o.o"],
    );
    fs::write(s.path("leak.i"), data).unwrap();
    let entry = hosts.path().join("bin/dtlto-clang");
    let out = s
        .program(&entry, &["-c", "leak.i", "-o", "leak.o"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("Could not find incbin file"), "{err}");
    assert!(err.contains("dtlto-clang: refused on "), "{err}");
    let object = fs::read(s.path("leak.o")).unwrap_or_default();
    let leaked = object.windows(8).any(|w| w == b"host's s");
    assert!(!leaked, "the host file came back: {err}");
}
