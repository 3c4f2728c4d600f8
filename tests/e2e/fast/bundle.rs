//! Bundles for distcc and icecream hosts, without LLVM: a wrapper named `distcc` that is a
//! script (it runs what it is given, as a host would), a compiler that is a script checking
//! that the bundle's files are where its command names them, and the real dtlto-bridge on both
//! sides (`__send`, and the host entry reached as `dtlto-clang`). The entry is also fed bundles
//! directly: hostile ones, one for another compiler, and one whose entry is killed.

use super::remote::{lld_jobs, modules};
use crate::space::{stderr, wait_for, Space, BRIDGE};
use std::fs;
use std::process::{Command, Stdio};

/// A compiler script: `--version` prints its version (and logs that it was asked). A compile on
/// a host (in a scratch directory) exits non-zero unless it runs confined (HOME there, no host
/// file readable, nothing writable outside); any compile fails unless its module (`m/...`) and
/// index shard are where its command names them; it sleeps when a word says `-DSLEEP`; then it
/// writes an object.
fn fake_clang(s: &Space, name: &str, version: &str) -> String {
    let body = format!(
        "[ \"$1\" = --version ] && {{ echo asked >> {asked:?}; echo 'fake clang version {version}'; exit; }}\n\
         case $PWD in */dtlto-clang.*)\n\
           [ \"$HOME\" = \"$PWD\" ] || exit 5\n\
           cat /etc/hostname > /dev/null 2>&1 && exit 6\n\
           (: > {escaped:?}) 2> /dev/null && exit 7;;\n\
         esac\n\
         for a; do case $a in\n\
           -fthinlto-index=*) test -s \"${{a#-fthinlto-index=}}\" || exit 3;;\n\
           m/*) test -s \"$a\" || exit 4;;\n\
           -DSLEEP) sleep 31.5;;\n\
         esac; [ \"$prev\" = -o ] && out=$a; prev=$a; done\n\
         {obj} > \"$out\"\n",
        asked = s.path("versions.log"),
        escaped = s.path("escaped"),
        obj = obj!(),
    );
    s.script(name, &body).to_string_lossy().into_owned()
}

/// A wrapper named distcc: the host is this machine, with the environment a host's daemon
/// gives the entry (not the link's: no DTLTO_CLANG_HERE), `extra` set.
fn fake_distcc(s: &Space, extra: &str) {
    fs::create_dir_all(s.path("w")).unwrap();
    s.script(
        "w/distcc",
        &format!(
            "[ \"$1\" = -j ] && {{ echo 3; exit; }}\n\
             echo \"$*\" >> {log:?}\n\
             unset DTLTO_CLANG_HERE\nexport DTLTO_CLANG_HOST=fakehost {extra}\nexec \"$@\"\n",
            log = s.path("distcc.log")
        ),
    );
}

/// Five jobs as lld writes them (`remote::lld_jobs`), run by `compiler`.
fn jobs(s: &Space, compiler: &str) {
    modules(s, None);
    lld_jobs(s, compiler, &["-c", "-O2", "-x", "ir"]);
}

fn link(s: &Space) -> std::process::Output {
    let wrapper = crate::space::wrapper_arg(s, "w/distcc");
    s.bridge(&[&wrapper, "--summary", "--report=r.json", "j.json"])
        .output()
        .unwrap()
}

/// The host entry's scratch directories left in this space's TMPDIR.
fn scratch_left(s: &Space) -> Vec<String> {
    let mut left = s.leftovers();
    left.retain(|n| n.starts_with("dtlto-clang."));
    left
}

#[test]
fn jobs_through_distcc_go_as_bundles_and_compile_on_the_host() {
    let s = Space::new();
    let clang = fake_clang(&s, "clang", "1");
    fake_distcc(&s, "");
    jobs(&s, &clang);
    let out = link(&s);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("(0 local, 5 via wrapper, 0 fell back)"),
        "{err}"
    );
    assert!(err.contains("on hosts: fakehost 5;"), "{err}");
    assert!(
        !err.contains("runs ThinLTO backend jobs on this machine"),
        "{err}"
    );
    for i in 0..5 {
        assert_eq!(s.read(&format!("job{i}.native.o")), crate::space::object());
    }
    // The wrapper got one bundle per job, as `dtlto-clang -c X.i -o OBJECT`.
    let sent = s.read("distcc.log");
    assert_eq!(sent.lines().count(), 5, "{sent}");
    assert!(sent
        .lines()
        .all(|l| l.starts_with("dtlto-clang -c ") && l.contains(".i -o ")));
    // The compiler ran confined in a scratch directory, with the modules and the shard where
    // the command names them (it fails otherwise), and wrote nothing outside.
    assert!(!s.exists("escaped"));
    let report: serde_json::Value = serde_json::from_str(&s.read("r.json")).unwrap();
    assert_eq!(report["totals"]["hosts"]["fakehost"], 5);
    assert!(report["totals"]["bundle_bytes"].as_u64().unwrap() > 5 * 100);
    assert_eq!(report["jobs"][0]["sent"]["host"], "fakehost");
    assert!(scratch_left(&s).is_empty(), "{:?}", scratch_left(&s));
    // The host remembers the compiler's version by the binary's identity: a second link asks
    // it only on the link's side; a changed binary is asked again there too.
    let asked = || s.read("versions.log").lines().count();
    let first = asked();
    assert!(link(&s).status.success());
    assert_eq!(asked(), first + 1);
    fs::write(&clang, fs::read_to_string(&clang).unwrap() + "\n").unwrap();
    assert!(link(&s).status.success());
    assert!(asked() >= first + 3, "{}", asked());
}

#[test]
fn a_host_whose_compiler_differs_refuses_and_the_job_runs_here() {
    let s = Space::new();
    let clang = fake_clang(&s, "clang", "1");
    let other = fake_clang(&s, "other-clang", "2");
    fake_distcc(&s, &format!("DTLTO_CLANG_COMPILER='{other}'"));
    jobs(&s, &clang);
    let out = link(&s);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("(0 local, 0 via wrapper, 5 fell back)"),
        "{err}"
    );
    assert!(err.contains("on hosts: none;"), "{err}");
    assert_eq!(
        err.matches("refused on fakehost").count(),
        1,
        "said once: {err}"
    );
    assert!(
        err.contains("refused on fakehost: the compiler here, ")
            && err.contains(
                "is \"fake clang version 2\"; the bundle was made for \"fake clang version 1\""
            ),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_str(&s.read("r.json")).unwrap();
    let why = report["jobs"][0]["fallback_reason"].as_str().unwrap();
    assert!(
        why.starts_with("refused on fakehost: the compiler here"),
        "{why}"
    );
    for i in 0..5 {
        assert_eq!(s.read(&format!("job{i}.native.o")), crate::space::object());
    }
}

/// A wrapper that found no host runs the bundle on this machine: the entry there refuses, and
/// the link runs the job itself, on a local slot.
#[test]
fn a_bundle_the_wrapper_runs_here_is_left_to_the_links_fallback() {
    let s = Space::new();
    let clang = fake_clang(&s, "clang", "1");
    fs::create_dir_all(s.path("w")).unwrap();
    s.script(
        "w/distcc",
        "[ \"$1\" = -j ] && { echo 3; exit; }\nexec \"$@\"\n",
    );
    jobs(&s, &clang);
    let out = link(&s);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("5 fell back"), "{err}");
    assert!(
        err.contains(
            "5 jobs (job 0 (job0.native.o), job 1 (job1.native.o), job 2 \
                      (job2.native.o), 2 more) failed through the wrapper (no host took its \
                      bundle) and were run again locally"
        ),
        "one warning for them all: {err}"
    );
}

/// A bundle by hand for the fake clang of `version`.
fn bundle(compiler: &str, version: &str, files: &[(&str, &[u8])], args: &[&str]) -> Vec<u8> {
    let line = format!("fake clang version {version}");
    bundle_for(compiler, &line, files, args)
}

/// A bundle by hand: the header, the manifest (the compiler's version line `version`), the
/// files.
pub(crate) fn bundle_for(
    compiler: &str,
    version: &str,
    files: &[(&str, &[u8])],
    args: &[&str],
) -> Vec<u8> {
    let entries: Vec<serde_json::Value> = files
        .iter()
        .map(|(n, b)| {
            use sha2::Digest;
            let hash = sha2::Sha256::digest(b);
            let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
            serde_json::json!({"name": n, "size": b.len(), "sha256": hex})
        })
        .collect();
    let manifest = serde_json::json!({
        "compiler": {"path": compiler, "version": version},
        "arguments": args, "output": "o.o", "files": entries,
    })
    .to_string();
    let mut out = b"DTLTO-BRIDGE BUNDLE 1\n".to_vec();
    out.extend((manifest.len() as u64).to_le_bytes());
    out.extend(manifest.as_bytes());
    for (_, b) in files {
        out.extend(*b);
    }
    out
}

/// The entry as a daemon runs it, its bundle on stdin (`-`, as iceccd sends it) or named; the
/// host allows the compiler `clang` of this space (as `host setup` lists them).
fn entry(s: &Space) -> Command {
    let link = s.path("dtlto-clang");
    if !link.exists() {
        std::os::unix::fs::symlink(BRIDGE, &link).unwrap();
        s.write(
            "dtlto-clang-compilers",
            &format!("{}\n", s.path("clang").display()),
        );
    }
    let mut cmd = s.program(&link, &[]);
    cmd.env_remove("DTLTO_CLANG_HERE")
        .env("DTLTO_CLANG_HOST", "h");
    cmd
}

fn fed(s: &Space, data: &[u8], args: &[&str]) -> (std::process::Output, Vec<u8>) {
    let _ = fs::remove_file(s.path("out.o"));
    let mut child = entry(s)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    let _ = child.stdin.take().unwrap().write_all(data);
    let out = child.wait_with_output().unwrap();
    (out, fs::read(s.path("out.o")).unwrap_or_default())
}

#[test]
fn the_entry_compiles_a_bundle_from_stdin_and_refuses_hostile_ones() {
    let s = Space::new();
    let clang = fake_clang(&s, "clang", "1");
    let c: &[u8] = b"int x;\n";
    let good = bundle(&clang, "1", &[("m/a.o", c)], &["-c", "m/a.o", "-o", "o.o"]);
    let icecc = [
        "-x",
        "c",
        "-Xclang",
        "-main-file-name",
        "-Xclang",
        "job.i",
        "-c",
        "-",
        "-o",
        "out.o",
    ];
    let (out, object) = fed(&s, &good, &icecc);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("dtlto-clang: compiled on h with fake clang version 1"));
    assert_eq!(object, crate::space::object().into_bytes());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "truncated",
            good[..good.len() - 2].to_vec(),
            "do not add up",
        ),
        (
            "../x",
            bundle(&clang, "1", &[("../x", c)], &["-c", "-o", "o.o"]),
            "has a .. in it",
        ),
        (
            "absolute",
            bundle(&clang, "1", &[("/tmp/x", c)], &["-c", "-o", "o.o"]),
            "is absolute",
        ),
        (
            "a plug-in",
            bundle(
                &clang,
                "1",
                &[("a", c)],
                &["-c", "-fpass-plugin=a", "-o", "o.o"],
            ),
            "loads a plug-in",
        ),
        (
            "a response file",
            bundle(&clang, "1", &[("a", c)], &["-c", "@a", "-o", "o.o"]),
            "response file",
        ),
        (
            "another compiler",
            bundle(&clang, "9", &[("a", c)], &["-c", "a", "-o", "o.o"]),
            "the bundle was made for \"fake clang version 9\"",
        ),
        (
            "an output elsewhere",
            bundle(&clang, "1", &[("a", c)], &["-c", "a", "-o", "../o.o"]),
            "not the bundle's object",
        ),
    ];
    for (what, data, want) in cases {
        let (out, object) = fed(&s, &data, &icecc);
        let err = stderr(&out);
        assert!(
            err.contains("dtlto-clang: refused on h: ") && err.contains(want),
            "{what}: {err}"
        );
        // The reason takes the object's place, where `__send` reads it (and a wrapper does not
        // run the job again on the linking machine, dropping the host's stderr).
        let text = String::from_utf8_lossy(&object);
        assert!(
            text.starts_with("dtlto-clang refusal: h: ") && text.contains(want),
            "{what}: {text}"
        );
    }
    assert!(scratch_left(&s).is_empty(), "{:?}", scratch_left(&s));
}

/// An entry killed with its compiler leaves its scratch directory; the next entry removes it.
#[test]
fn a_scratch_directory_left_by_a_killed_entry_is_removed_by_the_next() {
    let s = Space::new();
    let clang = fake_clang(&s, "clang", "1");
    let good = bundle(
        &clang,
        "1",
        &[("m/a.o", b"int x;\n")],
        &["-c", "m/a.o", "-DSLEEP", "-o", "o.o"],
    );
    fs::write(s.path("job.i"), &good).unwrap();
    let mut slow = entry(&s);
    slow.args(["-c", "job.i", "-o", "out.o"]);
    std::os::unix::process::CommandExt::process_group(&mut slow, 0);
    let mut child = slow.stderr(Stdio::null()).spawn().unwrap();
    wait_for("the entry's scratch directory", || {
        !scratch_left(&s).is_empty()
    });
    // The compiler runs: a `sleep` in this space's scratch directory.
    wait_for("the compiler to sleep", || {
        crate::space::processes_with("sleep 31.5")
            .iter()
            .any(|(pid, _)| {
                fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(&s.tmp))
            })
    });
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    child.wait().unwrap();
    let left = scratch_left(&s);
    assert_eq!(left.len(), 1, "{left:?}");
    let quick = bundle(
        &clang,
        "1",
        &[("m/a.o", b"int x;\n")],
        &["-c", "m/a.o", "-o", "o.o"],
    );
    fs::write(s.path("job.i"), &quick).unwrap();
    let out = entry(&s)
        .args(["-c", "job.i", "-o", "out.o"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(scratch_left(&s).is_empty(), "{:?}", scratch_left(&s));
}
