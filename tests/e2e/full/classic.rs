//! `dtlto-bridge link`: the classic distributed ThinLTO flow (thin link, jobs, final link) with
//! real clang and lld 14, 19 and 22: programs correct, jobs run through dtlto-bridge (report),
//! archives, response files, modules that are not bitcode or that the thin link dropped, the
//! job commands against integrated DTLTO's, failures named by step.

use crate::space::*;
use serde_json::Value;
use std::fs;

/// Builds examples/hello with clang-VERSION: an object with spaces and parentheses in its name,
/// a regular archive, a thin archive. Returns the link's inputs.
fn hello(space: &Space, version: u32) -> Vec<String> {
    let mut inputs = space.hello_with(&format!("clang-{version}"));
    fs::rename(space.path("greeting.o"), space.path("greet #1 (v2).o")).unwrap();
    inputs[2] = "greet #1 (v2).o".into();
    inputs
}

/// Compiles C text to an object with clang-VERSION and these flags.
fn compile(space: &Space, version: u32, name: &str, text: &str, flags: &[&str]) {
    let src = space.write(&format!("{name}.c"), text);
    let mut args = vec!["-O2", "-c", src.to_str().unwrap(), "-o"];
    let object = format!("{name}.o");
    args.push(&object);
    args.extend(flags);
    space.ok(&mut space.command(&format!("clang-{version}"), &args));
}

/// `dtlto-bridge link` of clang-VERSION's link of `inputs` into `prog`, with a report.
fn link(
    space: &Space,
    version: u32,
    options: &[&str],
    inputs: &[String],
    extra: &[&str],
) -> (std::process::Output, Value) {
    require(&format!("ld.lld-{version}"));
    let report = space.tmp.with_file_name("report.json");
    let _ = fs::remove_file(&report);
    let mut cmd = space.bridge(&["link", &format!("--report={}", report.display())]);
    cmd.args(options)
        .arg("--")
        .arg(require(&format!("clang-{version}")));
    cmd.args([
        "-O2",
        "-flto=thin",
        &format!("-fuse-ld=lld-{version}"),
        "-o",
        "prog",
    ]);
    cmd.args(inputs).args(extra);
    let out = cmd.output().unwrap();
    let report = fs::read_to_string(&report)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    (out, report)
}

fn jobs(report: &Value) -> Vec<Value> {
    report["jobs"].as_array().cloned().unwrap_or_default()
}

/// The module each job compiled: the word before `-fthinlto-index=`.
fn modules(report: &Value) -> Vec<String> {
    let mut v: Vec<String> = jobs(report)
        .iter()
        .map(|j| {
            let cmd: Vec<&str> = j["command"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_str().unwrap())
                .collect();
            let at = cmd
                .iter()
                .position(|w| w.starts_with("-fthinlto-index="))
                .unwrap();
            cmd[at - 1].to_string()
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_example_links_right_with_clang_14_19_and_22() {
    for version in [14, 19, 22] {
        let space = Space::new();
        let mut inputs = hello(&space, version);
        // Something of libm's, so that -lm is needed.
        compile(
            &space,
            version,
            "root",
            "#include <math.h>\nvolatile double x = 27.0;\ndouble cube_root(void) { return cbrt(x); }\n",
            &["-flto=thin"],
        );
        inputs.push("root.o".into());
        let (out, report) = link(&space, version, &[], &inputs, &["-lm"]);
        assert_linked(&out);
        assert_eq!(space.run_program("prog"), HELLO, "clang-{version}");
        let jobs = jobs(&report);
        assert_eq!(jobs.len(), 6, "clang-{version}: {report}");
        assert!(
            jobs.iter().all(|j| j["ok"] == true && j["ran"] == "local"),
            "{report}"
        );
        let m = modules(&report);
        for plain in ["add.o", "greet #1 (v2).o", "main.o", "root.o"] {
            assert!(
                m.contains(&plain.to_string()),
                "clang-{version} compiled {m:?}"
            );
        }
        // The thin archive's member by its own path; the regular archive's, extracted.
        assert!(m.contains(&"sq.o".to_string()), "{m:?}");
        assert!(m.iter().any(|p| p.ends_with("/0-mul.o")), "{m:?}");
        for j in &jobs {
            assert!(j["command"][0]
                .as_str()
                .unwrap()
                .ends_with(&format!("clang-{version}")));
        }
        assert!(
            space.leftovers().is_empty(),
            "left in TMPDIR: {:?}",
            space.leftovers()
        );
    }
}

/// Integrated DTLTO's job file, saved by a distributor that then runs dtlto-bridge.
fn dtlto_jobs(space: &Space, inputs: &[String], flags: &[&str]) -> Value {
    let dist = space.script(
        "dist.sh",
        &format!("for a; do :; done\ncp \"$a\" dtlto.json\nexec '{BRIDGE}' \"$@\"\n"),
    );
    let mut cmd = space.command("clang-22", &["-flto=thin", "-fuse-ld=lld-22", "-o", "prog"]);
    cmd.args(flags)
        .arg(format!("-fthinlto-distributor={}", dist.display()));
    cmd.args(inputs);
    assert_linked(&cmd.output().unwrap());
    serde_json::from_str(&space.read("dtlto.json")).unwrap()
}

#[test]
fn on_clang_22_the_jobs_equal_integrated_dtlto_s_but_for_names() {
    for flags in [
        &["-O2"][..],
        &["-O3", "-no-pie"][..],
        &["-O1", "-shared", "-fPIC"][..],
    ] {
        let space = Space::new();
        let inputs = hello(&space, 22);
        let (inputs, program) = if flags.contains(&"-shared") {
            // A shared library of all but main.
            (inputs[1..].to_vec(), false)
        } else {
            (inputs, true)
        };
        let dtlto = dtlto_jobs(&space, &inputs, flags);
        let expected = if program {
            space.run_program("prog")
        } else {
            String::new()
        };
        fs::remove_file(space.path("prog")).unwrap();

        let report = space.tmp.with_file_name("report.json");
        let mut cmd = space.bridge(&["link", &format!("--report={}", report.display()), "--"]);
        cmd.args(["clang-22", "-flto=thin", "-fuse-ld=lld-22", "-o", "prog"])
            .args(flags);
        cmd.args(&inputs);
        assert_linked(&cmd.output().unwrap());
        let report: Value = serde_json::from_str(&fs::read_to_string(&report).unwrap()).unwrap();
        if program {
            assert_eq!(space.run_program("prog"), expected);
        }
        // lld's common options (its own clang's path aside) against ours (our compiler aside).
        let theirs: Vec<&str> = dtlto["common"]["args"].as_array().unwrap()[1..]
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        let jobs = jobs(&report);
        assert_eq!(
            jobs.len(),
            dtlto["jobs"].as_array().unwrap().len(),
            "{flags:?}"
        );
        for job in &jobs {
            let cmd: Vec<&str> = job["command"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_str().unwrap())
                .collect();
            assert_eq!(cmd[0], "clang-22");
            // lld names no relocation model for a -no-pie link: each job gets its module's
            // (PIE: Debian's clang compiled them), after lld's words, in both flows.
            let cmd = if flags.contains(&"-no-pie") {
                assert_eq!(cmd.last(), Some(&"-fPIE"), "{flags:?}: {cmd:?}");
                &cmd[..cmd.len() - 1]
            } else {
                &cmd[..]
            };
            let own = &cmd[cmd.len() - 4..];
            assert_eq!(&cmd[1..cmd.len() - 4], &theirs[..], "{flags:?}: {cmd:?}");
            // Then, as lld writes it: MODULE -fthinlto-index=SHARD -o OUTPUT.
            assert!(
                own[1].starts_with("-fthinlto-index=") && own[2] == "-o",
                "{own:?}"
            );
        }
    }
}

#[test]
fn archives_whole_archive_response_files_native_and_dropped_modules() {
    let space = Space::new();
    let inputs = hello(&space, 19);
    // In an archive: one member nothing needs (dropped: no job), one native member.
    compile(
        &space,
        19,
        "unused",
        "int unused_fn(int x) { return x * 3; }\n",
        &["-flto=thin"],
    );
    compile(
        &space,
        19,
        "native",
        "int native_fn(void) { return 9; }\n",
        &[],
    );
    // And a member lld leaves out with a warning (neither an object nor bitcode).
    space.write("README", "not an object\n");
    space.ok(&mut space.command(
        "llvm-ar-22",
        &["rc", "libextra.a", "unused.o", "native.o", "README"],
    ));
    // Linked whole: its constructor runs although nothing refers to it.
    compile(
        &space,
        19,
        "ctor",
        "#include <stdio.h>\n__attribute__((constructor)) static void hi(void) { puts(\"whole\"); }\n",
        &["-flto=thin"],
    );
    space.ok(&mut space.command("llvm-ar-22", &["rc", "libwhole.a", "ctor.o"]));
    // A native object passed by itself, which main does not need either.
    compile(
        &space,
        19,
        "plain",
        "int plain_fn(void) { return 1; }\n",
        &[],
    );
    // The inputs from a response file given to clang, and options to lld from one given to lld.
    let words: Vec<String> = inputs.iter().map(|i| format!("\"{i}\"")).collect();
    space.write(
        "inputs.rsp",
        &format!("{}\nlibextra.a plain.o\n", words.join(" ")),
    );
    // --pop-state brings back the --whole-archive that --push-state saved.
    space.write(
        "ld.rsp",
        "--whole-archive --push-state --no-whole-archive --pop-state libwhole.a \
         --no-whole-archive\n",
    );
    let (out, report) = link(
        &space,
        19,
        &[],
        &["@inputs.rsp".into(), "-Wl,@ld.rsp".into()],
        &[],
    );
    assert_linked(&out);
    assert_eq!(space.run_program("prog"), format!("whole\n{HELLO}"));
    let m = modules(&report);
    assert_eq!(m.len(), 6, "{m:?}");
    assert!(m.iter().any(|p| p.ends_with("/0-ctor.o")), "{m:?}");
    assert!(
        !m.iter()
            .any(|p| p.contains("unused") || p.contains("native") || p.contains("plain")),
        "{m:?}"
    );
    assert!(space.leftovers().is_empty(), "{:?}", space.leftovers());
    assert!(
        stderr(&out).contains("libextra.a: member README is neither"),
        "{}",
        stderr(&out)
    );
}

/// lld run directly for another architecture: its -m emulation (joined, as Kbuild writes it)
/// gives the jobs' target, and a
/// word after an option that takes no separate value (--build-id) is an input.
#[test]
fn lld_run_directly_compiles_for_its_emulation() {
    let space = Space::new();
    let flags = ["--target=i386-linux-gnu", "-flto=thin"];
    compile(
        &space,
        22,
        "start",
        "int helper(int);\nint start(void) { return helper(3); }\n",
        &flags,
    );
    compile(
        &space,
        22,
        "helper",
        "int helper(int x) { return x + 1; }\n",
        &flags,
    );
    let report = space.tmp.with_file_name("report.json");
    let out = space.ok(&mut space.bridge(&[
        "link",
        &format!("--report={}", report.display()),
        "--compiler=clang-22",
        "--",
        "ld.lld-22",
        "-melf_i386",
        "-e",
        "start",
        "--build-id",
        "start.o",
        "helper.o",
        "-o",
        "prog",
    ]));
    assert_linked(&out);
    let report: Value = serde_json::from_str(&fs::read_to_string(&report).unwrap()).unwrap();
    for job in jobs(&report) {
        let words = job["command"].to_string();
        assert!(words.contains("--target=i386-unknown-linux-gnu"), "{words}");
    }
    assert_eq!(jobs(&report).len(), 2);
    let elf = fs::read(space.path("prog")).unwrap();
    assert_eq!(
        (&elf[..4], elf[4]),
        (&b"\x7fELF"[..], 1),
        "a 32-bit ELF file"
    );
}

#[test]
fn a_library_named_by_l_and_a_module_path_with_dot_dot_keep_their_identity() {
    let space = Space::new();
    let mut inputs = hello(&space, 22);
    fs::create_dir_all(space.path("arch/x86")).unwrap();
    fs::create_dir_all(space.path("virt")).unwrap();
    fs::rename(space.path("add.o"), space.path("virt/add.o")).unwrap();
    // The kernel's shape: a path through `..`, compiled under exactly that path.
    inputs[1] = "arch/x86/../../virt/add.o".into();
    // The regular archive by -l: found through -L and extracted like the others.
    inputs.retain(|i| i != "libmul.a");
    let (out, report) = link(
        &space,
        22,
        &["--keep-objects=kept"],
        &inputs,
        &["-L.", "-lmul"],
    );
    assert_linked(&out);
    assert_eq!(space.run_program("prog"), HELLO);
    let m = modules(&report);
    assert!(
        m.contains(&"arch/x86/../../virt/add.o".to_string()),
        "{m:?}"
    );
    assert!(m.iter().any(|p| p.ends_with("/0-mul.o")), "{m:?}");
    // The native objects kept, named after their modules.
    for kept in [
        "main.o",
        "arch/x86/__/__/virt/add.o",
        "greet #1 (v2).o",
        "libsq.a.d/sq.o",
        "-lmul.d/mul.o",
    ] {
        let bytes =
            fs::read(space.path("kept").join(kept)).unwrap_or_else(|e| panic!("{kept}: {e}"));
        assert!(
            bytes.starts_with(b"\x7fELF"),
            "{kept} is not a native object"
        );
    }
}

#[test]
fn each_failing_step_is_named_and_its_status_returned() {
    let space = Space::new();
    let inputs = hello(&space, 22);
    // The thin link: an input that is not there (given to lld, so clang does not look).
    let (out, _) = link(&space, 22, &[], &inputs, &["-Wl,missing.o"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("missing.o") && err.contains("thin link: "),
        "{err}"
    );
    assert!(!space.exists("prog"));
    // A job: a backend option the compiler refuses.
    let (out, report) = link(
        &space,
        22,
        &["--backend-arg=-fno-such-option"],
        &inputs,
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("-fno-such-option") && err.contains("the final link did not run"),
        "{err}"
    );
    assert!(jobs(&report).iter().all(|j| j["ok"] == false), "{report}");
    assert!(!space.exists("prog"));
    // The final link: a symbol nothing defines.
    compile(
        &space,
        22,
        "undef",
        "int nowhere(void);\nint use_it(void) { return nowhere(); }\n",
        &[],
    );
    let (out, _) = link(&space, 22, &[], &inputs, &["undef.o"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("nowhere") && err.contains("final link: "),
        "{err}"
    );
    // A full-LTO module: lld does not list it among the ThinLTO modules.
    let src = examples().join("hello/add.c");
    space.ok(&mut space.command(
        "clang-22",
        &["-O2", "-flto", "-c", src.to_str().unwrap(), "-o", "full.o"],
    ));
    let mut full = inputs.clone();
    full[1] = "full.o".into();
    let (out, _) = link(&space, 22, &[], &full, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("did not list full.o") && stderr(&out).contains("full-LTO"),
        "{}",
        stderr(&out)
    );
    assert!(!space.exists("prog"));
    // Not lld: said before anything runs.
    let mut cmd = space.bridge(&[
        "link",
        "--",
        "clang-22",
        "-flto=thin",
        "-fuse-ld=bfd",
        "-o",
        "prog",
    ]);
    let out = cmd.args(&inputs).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not lld"), "{}", stderr(&out));
    assert!(space.leftovers().is_empty(), "{:?}", space.leftovers());
}

#[test]
fn backend_options_can_be_added_and_removed_and_a_wrapper_runs_every_job() {
    let space = Space::new();
    let inputs = hello(&space, 19);
    let log = space.path("wrapper.log");
    let wrapper = space.script(
        "wrap.sh",
        &format!("echo \"$*\" >> '{}'\nexec \"$@\"\n", log.display()),
    );
    let wrapper_arg = format!("--wrapper='{}'", wrapper.display());
    let (out, report) = link(
        &space,
        19,
        &[
            &wrapper_arg,
            "--backend-arg=-mllvm",
            "--backend-arg=-import-instr-limit=0",
            "--backend-remove=-faddrsig",
        ],
        &inputs,
        &[],
    );
    assert_linked(&out);
    assert_eq!(space.run_program("prog"), HELLO);
    let jobs = jobs(&report);
    assert_eq!(jobs.len(), 5);
    for j in &jobs {
        assert_eq!(j["ran"], "wrapper", "{j}");
        let cmd: Vec<&str> = j["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        assert!(!cmd.contains(&"-faddrsig"), "{cmd:?}");
        let at = cmd
            .iter()
            .position(|w| *w == "-import-instr-limit=0")
            .unwrap();
        assert_eq!(cmd[at - 1], "-mllvm");
    }
    assert_eq!(fs::read_to_string(&log).unwrap().lines().count(), 5);
}

/// An archive rewritten while `link --emit` runs (after its members were extracted) is seen by
/// the file's own rule: the file is dated when the emit began reading.
#[test]
fn an_archive_rewritten_during_the_emit_is_seen() {
    let space = Space::new();
    let inputs = hello(&space, 22);
    fs::create_dir(space.path("d")).unwrap();
    compile(
        &space,
        22,
        "d/mul",
        "int mul(int a, int b) { return a * b + 1; }\n",
        &["-flto=thin"],
    );
    // lld, through a script that rebuilds libmul.a when the thin link starts.
    let ld = space.write(
        "ld.lld-rewrite",
        "#!/bin/sh\ncase \"$1\" in --version|-v) ;; *) [ -e rewritten ] || \
         { : > rewritten; llvm-ar-22 rc libmul.a d/mul.o; } ;; esac\nexec ld.lld-22 \"$@\"\n",
    );
    fs::set_permissions(&ld, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut cmd = space.bridge(&["link", "--emit", "l.ninja", "--", "clang-22", "-O2"]);
    cmd.args(["-flto=thin", &format!("--ld-path={}", ld.display())]);
    space.ok(cmd.args(["-o", "prog"]).args(&inputs));
    assert!(space.exists("rewritten"), "the script ran");
    space.ok(&mut space.command("ninja", &["-f", "l.ninja"]));
    // The program says its sums are wrong, and exits 1.
    let run = std::process::Command::new(space.path("prog"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        HELLO.replace("mul=20 square=36", "mul=21 square=37")
    );
}

#[test]
fn an_emitted_link_is_done_by_ninja_or_make_alone() {
    for (version, format, tool) in [(22, "ninja", "ninja"), (14, "make", "make")] {
        let space = Space::new();
        let inputs = hello(&space, version);
        let file = format!("link.{tool}");
        // Named absolute, it is written as the build tool names it from here.
        let absolute = space.path(&file);
        let absolute = absolute.to_str().unwrap();
        let mut cmd = space.bridge(&["link", "--backend", format, "--emit", absolute, "--"]);
        cmd.args([
            &format!("clang-{version}"),
            "-O2",
            "-flto=thin",
            &format!("-fuse-ld=lld-{version}"),
            "-o",
            "prog",
        ]);
        let out = space.ok(cmd.args(&inputs));
        assert!(
            stderr(&out).contains(&format!("{tool} -f {file}")),
            "{}",
            stderr(&out)
        );
        assert!(!space.exists("prog"), "emit links nothing");
        space.ok(&mut space.command(tool, &["-f", &file, "-j2"]));
        assert_eq!(space.run_program("prog"), HELLO, "{tool}");
        let mtime = |f: &str| fs::metadata(space.path(f)).unwrap().modified().unwrap();
        // Nothing changed, or an archive touched but not changed: the file's own rule does not
        // write it again.
        let before = mtime(&file);
        space.ok(&mut space.command(tool, &["-f", &file]));
        space.ok(&mut space.command("touch", &["libmul.a"]));
        space.ok(&mut space.command(tool, &["-f", &file]));
        assert_eq!(
            mtime(&file),
            before,
            "{tool} wrote {file} again for nothing"
        );
        // The check finds nothing changed before it reads any option's file: a remote option
        // that names a missing file (in the environment of a later build) is no failure then.
        space.ok(&mut space.command("touch", &["libmul.a"]));
        space.ok(space
            .command(tool, &["-f", &file])
            .env("DTLTO_BRIDGE_REMOTE", "grpc://127.0.0.1:1")
            .env(
                "DTLTO_BRIDGE_REMOTE_HEADER_FILE",
                space.path("no-such-headers"),
            ));
        assert_eq!(mtime(&file), before, "{tool} wrote {file} again");
        // An archive dated in the future (a clock skewed on a file server): dates cannot tell
        // a change of any archive until then, so every run checks them.
        space.ok(&mut space.command("touch", &["-d", "+1 hour", "libsq.a"]));
        let out = space.ok(&mut space.command("timeout", &["120", tool, "-f", &file]));
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(said.contains("libsq.a dated in the future"), "{said}");
        // A rebuilt archive, dated now (before libsq.a): the file is written again (its member
        // extracted again) and the link redone, whether the tool names the file as it was
        // emitted or by its absolute path, and under an environment that names the other
        // format: the file keeps its own.
        compile(
            &space,
            version,
            "mul",
            "int mul(int a, int b) { return a * b + 1; }\n",
            &["-flto=thin"],
        );
        space.ok(&mut space.command("llvm-ar-22", &["rc", "libmul.a", "mul.o"]));
        let other = if format == "ninja" { "make" } else { "ninja" };
        space.ok(space
            .command("timeout", &["120", tool, "-f", absolute, "-j2"])
            .env("DTLTO_BRIDGE_BACKEND", other));
        // The program now says its sums are wrong, and exits 1.
        let run = std::process::Command::new(space.path("prog"))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&run.stdout),
            HELLO.replace("mul=20 square=36", "mul=21 square=37"),
            "{tool} after libmul.a changed"
        );
        assert!(
            space.read(&file).contains(&format!("--backend={format}")),
            "{tool} wrote {file} again as {format}"
        );
        // Then the file is not written again (ninja would give up, make start over forever);
        // ninja links nothing (make links again: it cannot name "greet #1 (v2).o").
        let before = (mtime(&file), mtime("prog"));
        let out = space.ok(&mut space.command("timeout", &["120", tool, "-f", &file]));
        assert_eq!(mtime(&file), before.0, "{tool} wrote {file} again");
        if tool == "ninja" {
            assert_eq!(
                mtime("prog"),
                before.1,
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        // Emitting again replaces its own files; a directory of someone else's is refused.
        space.ok(space
            .bridge(&["link", "--backend", format, "--emit", &file, "--"])
            .args([
                &format!("clang-{version}"),
                "-flto=thin",
                &format!("-fuse-ld=lld-{version}"),
                "-o",
                "prog",
            ])
            .args(&inputs));
        // An emit that fails leaves no file behind that would build the old link.
        let out = space
            .bridge(&["link", "--backend", format, "--emit", &file, "--"])
            .args([
                &format!("clang-{version}"),
                "-flto=thin",
                &format!("-fuse-ld=lld-{version}"),
                "-o",
                "prog",
                "missing.o",
            ])
            .args(&inputs)
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(!space.exists(&file) && !space.exists(&format!("{file}.dtlto")));
        fs::create_dir(space.path("mine.ninja.dtlto")).unwrap();
        let out = space
            .bridge(&[
                "link",
                "--emit",
                "mine.ninja",
                "--",
                &format!("clang-{version}"),
                "-flto=thin",
                &format!("-fuse-ld=lld-{version}"),
            ])
            .args(&inputs)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(space.path("mine.ninja.dtlto").exists());
        assert!(!space.exists("mine.ninja"));
    }
    // Once linked, ninja has nothing left to do.
    let space = Space::new();
    let inputs = hello(&space, 19);
    let mut cmd = space.bridge(&[
        "link",
        "--emit",
        "l.ninja",
        "--",
        "clang-19",
        "-flto=thin",
        "-fuse-ld=lld-19",
        "-o",
        "prog",
    ]);
    space.ok(cmd.args(&inputs));
    space.ok(&mut space.command("ninja", &["-f", "l.ninja"]));
    let out = space.ok(&mut space.command("ninja", &["-f", "l.ninja"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no work to do"));
}

#[test]
fn an_interrupt_stops_the_jobs_and_leaves_nothing() {
    let space = Space::new();
    let inputs = hello(&space, 22);
    let pids = space.path("pids");
    let wrapper = space.script(
        "hang.sh",
        &format!("echo $$ >> '{}'\nexec sleep 60\n", pids.display()),
    );
    let mut cmd = space.bridge(&[
        "link",
        "--jobs=2",
        &format!("--wrapper='{}'", wrapper.display()),
        "--",
    ]);
    cmd.args(["clang-22", "-flto=thin", "-fuse-ld=lld-22", "-o", "prog"])
        .args(&inputs);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_for("two hanging jobs", || {
        fs::read_to_string(&pids).is_ok_and(|t| t.lines().count() == 2)
    });
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("interrupted by signal 2"),
        "{}",
        stderr(&out)
    );
    for p in fs::read_to_string(&pids).unwrap().lines() {
        assert!(!alive(p.parse().unwrap()), "job {p} still runs");
    }
    assert!(!space.exists("prog"));
    assert!(space.leftovers().is_empty(), "{:?}", space.leftovers());
}
