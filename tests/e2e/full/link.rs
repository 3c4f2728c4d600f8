//! Real DTLTO links: clang-22 and ld.lld-22 run dtlto-bridge as their distributor.

use crate::space::{assert_linked, require, stderr, Space, BRIDGE, HELLO};
use std::path::Path;

fn bridge() -> &'static Path {
    Path::new(BRIDGE)
}

/// The user's own build files in the link directory, which a run must never touch.
const SENTINELS: [(&str, &str); 4] = [
    ("build.ninja", "# the user's build.ninja\n"),
    (".ninja_log", "# ninja log v5\n"),
    (".ninja_deps", "deps"),
    ("Makefile", "# the user's Makefile\n"),
];

fn link_hello(backend: &str) {
    require(backend);
    let s = Space::new();
    let inputs = s.hello();
    for (name, text) in SENTINELS {
        s.write(name, text);
    }
    let out = s.link(
        bridge(),
        &[&format!("--backend={backend}")],
        &inputs,
        "hello",
    );
    assert_linked(&out);
    assert_eq!(s.run_program("hello"), HELLO);
    for (name, text) in SENTINELS {
        assert_eq!(s.read(name), text, "{name} was changed");
    }
    assert!(s.leftovers().is_empty(), "left behind: {:?}", s.leftovers());
    assert!(s.files_matching("native.o").is_empty());
}

#[test]
fn links_objects_and_archives_through_ninja() {
    link_hello("ninja");
}

#[test]
fn links_objects_and_archives_through_make() {
    link_hello("make");
}

/// One object per awkward name; main calls a function from each, so every name is an import.
fn awkward_objects(s: &Space) -> Vec<String> {
    let names = [
        "dollar$x.o",
        "percent%.o",
        "equals=.o",
        "quote'.o",
        "dquote\".o",
        "colon:.o",
        "hash#.o",
        "semi;colon.o",
        "star*.o",
        "two  spaces.o",
        "paren(s).o",
    ];
    let mut main = String::from("#include <stdio.h>\n");
    let mut body = String::new();
    for (i, name) in names.iter().enumerate() {
        let src = s.write(
            &format!("f{i}.c"),
            &format!("int f{i}(void) {{ return {i}; }}\n"),
        );
        s.compile(&src, name);
        main.push_str(&format!("int f{i}(void);\n"));
        body.push_str(&format!(" + f{i}()"));
    }
    main.push_str(&format!(
        "int main(void) {{ printf(\"%d\\n\", 0{body}); return 0; }}\n"
    ));
    let src = s.write("main.c", &main);
    s.compile(&src, "main.o");
    let mut inputs = vec!["main.o".to_string()];
    inputs.extend(names.iter().map(|n| n.to_string()));
    inputs
}

#[test]
fn awkward_file_names_link_through_every_backend() {
    let s = Space::new();
    let inputs = awkward_objects(&s);
    for backend in ["ninja", "make", "direct"] {
        let out = s.link(
            bridge(),
            &[&format!("--backend={backend}")],
            &inputs,
            "awkward",
        );
        assert_linked(&out);
        assert_eq!(s.run_program("awkward"), "55\n", "{backend}");
        std::fs::remove_file(s.path("awkward")).unwrap();
    }
}

/// A distributor that emits the build file and runs it with the plain tool, as a user would.
#[test]
fn emitted_files_run_with_plain_ninja_and_make() {
    let s = Space::new();
    let mut inputs = s.hello();
    inputs.extend(awkward_objects(&s).into_iter().skip(1));
    // main.o of the awkward set replaced hello's: link the hello main instead.
    s.compile(&crate::space::examples().join("hello/main.c"), "main.o");
    inputs.retain(|i| i != "main.o");
    inputs.insert(0, "main.o".into());
    for (format, tool) in [("ninja", "ninja -f"), ("make", "make -f")] {
        let script = s.script(
            &format!("emit-{format}.sh"),
            &format!(
                "set -e\n'{BRIDGE}' emit --format {format} \"$1\" -o \"$1.{format}\"\n\
                 cp \"$1.{format}\" emitted.{format}\n{tool} \"$1.{format}\" >&2\n"
            ),
        );
        let out = s.link(&script, &[], &inputs, "hello");
        assert_linked(&out);
        assert_eq!(s.run_program("hello"), HELLO);
        let emitted = s.read(&format!("emitted.{format}"));
        assert!(emitted.contains("libmul.a(mul.o at"), "{emitted}");
    }
}

#[test]
fn ld_lld_runs_the_distributor_with_its_arguments() {
    let s = Space::new();
    let src = crate::space::examples().join("hello");
    s.compile(&src.join("add.c"), "add.o");
    s.compile(&src.join("sq.c"), "sq.o");
    s.compile(&src.join("mul.c"), "mul.o");
    let clang = require("clang-22");
    let out = s
        .command(
            "ld.lld-22",
            &[
                "-shared",
                "add.o",
                "sq.o",
                "mul.o",
                "-o",
                "libhello.so",
                &format!("--thinlto-distributor={BRIDGE}"),
                "--thinlto-distributor-arg=--backend=make",
                "--thinlto-distributor-arg=--jobs=1",
                &format!("--thinlto-remote-compiler={}", clang.display()),
            ],
        )
        .output()
        .unwrap();
    assert_linked(&out);
    let nm = s.ok(&mut s.command("llvm-nm-22", &["-D", "--defined-only", "libhello.so"]));
    let symbols = String::from_utf8(nm.stdout).unwrap();
    for sym in ["add", "mul", "square"] {
        assert!(symbols.contains(&format!(" T {sym}\n")), "{symbols}");
    }
}

/// clang-22 exits 0 with an empty object when an import is missing; that job must fail the link.
#[test]
fn empty_object_from_a_missing_import_fails_the_link_naming_the_job() {
    let s = Space::new();
    let inputs = s.hello();
    // The wrapper removes add.o (imported by main.o) just before each job starts.
    let out = s.link(
        bridge(),
        &[
            "--backend=ninja",
            "--jobs=1",
            "--wrapper=sh -c 'rm -f add.o; exec \"$0\" \"$@\"'",
        ],
        &inputs,
        "hello",
    );
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("run job 0 (main.1."), "{err}");
    assert!(
        err.contains("exit status 0, but it wrote an empty main.1."),
        "{err}"
    );
    assert!(err.contains("Error loading imported file add.o"), "{err}");
    assert!(err.contains("command: sh -c"), "{err}");
    // The wrapper is the one deleting the import, so the local re-run fails the same way.
    assert!(
        err.contains("through the wrapper: exit status 0, but it wrote an empty main.1."),
        "{err}"
    );
    assert!(
        err.contains("distributor execution failed"),
        "lld reports it: {err}"
    );
    assert!(!s.exists("hello"));
    assert!(
        s.files_matching("native.o").is_empty(),
        "{:?}",
        s.files_matching("native.o")
    );
    assert!(s.leftovers().is_empty());
}

/// lld 22 leaves ThinLTO cache hits out of the job file: a partial list must work.
#[test]
fn thinlto_cache_hits_leave_a_partial_job_list() {
    let s = Space::new();
    let inputs = s.hello();
    // Records each job file's job count, then runs dtlto-bridge.
    let counter = s.script(
        "count.sh",
        &format!(
            "python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))[\"jobs\"]))' \"$1\" >> counts\n\
             exec '{BRIDGE}' \"$@\"\n"
        ),
    );
    let cache = ["-Wl,--thinlto-cache-dir=cache".to_string()];
    let with_cache = |inputs: &[String]| {
        let all: Vec<String> = cache.iter().chain(inputs).cloned().collect();
        s.link(&counter, &[], &all, "hello")
    };
    assert_linked(&with_cache(&inputs));
    assert_eq!(s.run_program("hello"), HELLO);
    s.write(
        "greeting2.c",
        "const char *greeting(void) { return \"changed\"; }\n",
    );
    s.compile(&s.path("greeting2.c"), "greeting.o");
    assert_linked(&with_cache(&inputs));
    assert_eq!(s.run_program("hello"), "changed: add=5 mul=20 square=36\n");
    let counts: Vec<usize> = s
        .read("counts")
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(counts[0], 5, "{counts:?}");
    assert!(
        counts.len() == 2 && counts[1] >= 1 && counts[1] < 5,
        "second link should see only the changed jobs: {counts:?}"
    );
}

/// `--save DIR` keeps what a link's jobs need after lld has removed its index shards and the
/// archive members it extracted: `emit` of the saved job file runs with plain ninja, from the
/// saved directory, with no input missing.
#[test]
fn a_saved_link_runs_again_with_emit_and_plain_ninja() {
    require("ninja");
    let s = Space::new();
    let inputs = s.hello();
    let out = s.link(bridge(), &["--save=saved"], &inputs, "hello");
    assert_linked(&out);
    let err = stderr(&out);
    assert!(err.contains("dtlto-bridge: saved hello."), "{err}");
    assert!(
        s.files_matching("thinlto.bc").is_empty(),
        "lld removed its shards"
    );
    let saved: Vec<_> = std::fs::read_dir(s.path("saved")).unwrap().collect();
    assert_eq!(saved.len(), 1);
    let run_dir = saved[0].as_ref().unwrap().path();
    let job_file = std::fs::read_dir(&run_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.ends_with(".dist-file.json"))
        .unwrap();
    let mut emit = s.bridge(&["emit", &job_file, "-o", "jobs.ninja"]);
    let out = s.ok(emit.current_dir(&run_dir));
    assert_eq!(stderr(&out), "", "no input is missing");
    s.ok(s
        .command("ninja", &["-f", "jobs.ninja"])
        .current_dir(&run_dir));
    let objects = std::fs::read_dir(&run_dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".native.o")
        })
        .count();
    assert_eq!(objects, 5);
}
