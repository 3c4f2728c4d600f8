//! Kernel-shaped links with clang and lld 22: a relocatable (`-r`) link of `-fno-PIE
//! -mcmodel=kernel` modules through integrated DTLTO and through `link` gives the in-process
//! object; `link` reads Kbuild's command lines (`--start-group` around bitcode archives, the
//! modules' triple, links without bitcode, `--version`); the report names each link.

use crate::space::*;
use serde_json::Value;
use std::fs;

/// The issue's reproduction: `b` takes the address of a static, a global and an extern in `"i"`
/// asm operands (only a non-PIC compile has them as immediates); `c` defines the extern and a
/// function whose code shows the kernel code model (`R_X86_64_32S`).
const SOURCES: [(&str, &str); 3] = [
    (
        "a",
        "int g; int b(void);\nint a(void) { return b() + g; }\n",
    ),
    (
        "b",
        "extern int g; extern int e; static int s = 3;\n\
         int b(void) { asm volatile(\"# %0 %1 %2\" :: \"i\"(&s), \"i\"(&g), \"i\"(&e)); return s; }\n",
    ),
    (
        "c",
        "int e = 5;\nint c(void) { return e; }\nlong addr(void) { return (long)&e; }\n",
    ),
];

/// Compiles the sources as Kbuild compiles the kernel's (x86-64, no PIE, kernel code model).
fn kernel_modules(s: &Space) {
    for (name, text) in SOURCES {
        let src = s.write(&format!("{name}.c"), text);
        s.ok(&mut s.command(
            "clang-22",
            &[
                "--target=x86_64-linux-gnu",
                "-fno-PIE",
                "-mcmodel=kernel",
                "-flto=thin",
                "-O2",
                "-c",
                src.to_str().unwrap(),
                "-o",
                &format!("{name}.o"),
            ],
        ));
    }
}

/// The object's code and relocations, without the line that names the file.
fn code(s: &Space, object: &str) -> String {
    let out = s.ok(&mut s.command("llvm-objdump-22", &["-dr", object]));
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .filter(|l| !l.contains("file format"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `dtlto-bridge link --report=REPORT --compiler=clang-22 -- ld.lld-22 ARGS`.
fn link(s: &Space, report: &std::path::Path, args: &[&str]) -> std::process::Command {
    let report = format!("--report={}", report.display());
    let mut cmd = s.bridge(&["link", &report, "--compiler=clang-22", "--", "ld.lld-22"]);
    cmd.args(args);
    cmd
}

fn report(s: &Space, name: &str) -> Value {
    let path = s.tmp.with_file_name(name);
    serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn a_relocatable_link_of_kernel_modules_gives_the_in_process_object_both_ways() {
    let s = Space::new();
    kernel_modules(&s);
    let clang = require("clang-22");
    let objects = ["a.o", "b.o", "c.o"];
    let mut plain = vec!["-r", "-o", "inproc.o"];
    plain.extend(objects);
    s.ok(&mut s.command("ld.lld-22", &plain));
    let want = code(&s, "inproc.o");
    assert!(
        want.contains("R_X86_64_32S\te"),
        "kernel code model:\n{want}"
    );

    let reports = s.tmp.with_file_name("r-{output}.json");
    let distributor = format!("--thinlto-distributor={BRIDGE}");
    let compiler = format!("--thinlto-remote-compiler={}", clang.display());
    let report_arg = format!("--thinlto-distributor-arg=--report={}", reports.display());
    let mut integrated = vec!["-r", "-o", "dtlto.o", &distributor, &compiler, &report_arg];
    integrated.extend(objects);
    let out = s.ok(&mut s.command("ld.lld-22", &integrated));
    let said = stderr(&out);
    assert_eq!(
        said.matches("name no relocation model").count(),
        1,
        "said once: {said}"
    );
    assert!(said.contains("-fno-pic for 3"), "{said}");
    assert_eq!(code(&s, "dtlto.o"), want, "integrated DTLTO");

    let mut classic = vec!["-r", "-o", "link.o"];
    classic.extend(objects);
    let out = s.ok(&mut link(&s, &reports, &classic));
    assert!(stderr(&out).contains("-fno-pic for 3"), "{}", stderr(&out));
    assert_eq!(code(&s, "link.o"), want, "dtlto-bridge link");

    // One --report setting, a report per link, each with its jobs' own model.
    for name in ["r-dtlto.o.json", "r-link.o.json"] {
        let r = report(&s, name);
        assert_eq!(r["totals"]["succeeded"], 3, "{name}");
        for job in r["jobs"].as_array().unwrap() {
            let words = job["command"].to_string();
            assert!(words.contains("\"-fno-pic\""), "{name}: {words}");
        }
    }
    assert!(s.leftovers().is_empty(), "left behind: {:?}", s.leftovers());
}

#[test]
fn link_reads_kbuild_s_command_lines() {
    let s = Space::new();
    kernel_modules(&s);
    s.ok(&mut s.command("llvm-ar-22", &["rcsT", "liba.a", "a.o"]));
    s.ok(&mut s.command("llvm-ar-22", &["rcsT", "libb.a", "b.o", "c.o"]));
    let tail = [
        "-m",
        "elf_x86_64",
        "-r",
        "--start-group",
        "liba.a",
        "libb.a",
        "--end-group",
        "-u",
        "a",
    ];
    let mut plain = vec!["-o", "inproc.o"];
    plain.extend(tail);
    s.ok(&mut s.command("ld.lld-22", &plain));
    let mut classic = vec!["-o", "link.o"];
    classic.extend(tail);
    let out = s.ok(&mut link(&s, &s.tmp.with_file_name("r.json"), &classic));
    let said = stderr(&out);
    // The modules' triple (x86_64-unknown-linux-gnu), not the emulation's (x86_64-pc-...).
    assert!(!said.contains("different target triples"), "{said}");
    assert!(!said.contains("override-module"), "{said}");
    let r = report(&s, "r.json");
    for job in r["jobs"].as_array().unwrap() {
        let words = job["command"].to_string();
        assert!(
            words.contains("\"--target=x86_64-unknown-linux-gnu\""),
            "{words}"
        );
    }
    // c.o is taken for `e`, which only an asm operand names: the final link keeps the thin
    // link's choice of members, as lld's in-process link does.
    assert_eq!(code(&s, "link.o"), code(&s, "inproc.o"));
    assert!(code(&s, "link.o").contains("<addr>:"));

    // Kbuild's other uses of LD pass through: a link without bitcode, and --version.
    s.write("boot.s", ".globl start\nstart: ret\n");
    s.ok(&mut s.command("clang-22", &["-c", "boot.s", "-o", "boot.o"]));
    let out = s.ok(&mut s.bridge(&[
        "link",
        "--compiler=clang-22",
        "--",
        "ld.lld-22",
        "-m",
        "elf_x86_64",
        "-r",
        "-o",
        "setup.o",
        "boot.o",
    ]));
    assert!(
        stderr(&out).contains("no input is bitcode"),
        "{}",
        stderr(&out)
    );
    s.ok(&mut s.command("ld.lld-22", &["-r", "-o", "plain-setup.o", "boot.o"]));
    assert_eq!(
        fs::read(s.path("setup.o")).unwrap(),
        fs::read(s.path("plain-setup.o")).unwrap()
    );
    let out = s.ok(&mut s.bridge(&[
        "link",
        "--compiler=clang-22",
        "--",
        "ld.lld-22",
        "--version",
    ]));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Debian LLD 22"));
    assert_eq!(stderr(&out), "", "nothing to say of --version");
    assert!(s.leftovers().is_empty(), "left behind: {:?}", s.leftovers());
}

/// A failed link's report counts the jobs that ran and failed apart from those never run.
#[test]
fn a_failed_link_s_report_counts_what_did_not_run_apart() {
    let s = Space::new();
    // Every job fails; after the first failure the build tool starts no more, and only those
    // it had started (a few dozen waiting launchers) run.
    let jobs: Vec<Value> = (0..120)
        .map(|i| sh_job("exit 3", &[] as &[String], &[format!("o{i}")]))
        .collect();
    s.write("jobs.json", &job_file(jobs));
    let report_opt = format!("--report={}", s.tmp.with_file_name("r.json").display());
    let out = s
        .bridge(&["--jobs=1", &report_opt, "jobs.json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let t = report(&s, "r.json")["totals"].clone();
    let count = |k: &str| t[k].as_u64().unwrap();
    assert!(count("not_run") > 0, "{t}");
    assert_eq!(count("failed") + count("not_run"), 120, "{t}");
    let line = format!("{} of 120 failed", count("failed"));
    assert!(stderr(&out).contains(&line), "{line}: {}", stderr(&out));
}
