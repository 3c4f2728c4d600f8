//! Test space: a temporary link directory (its name has a space) and the real tools around it.
//!
//! Every test runs the real dtlto-bridge binary and, where it links, real clang-22 and ld.lld-22.
//! A missing tool fails the test; nothing is skipped.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BRIDGE: &str = env!("CARGO_BIN_EXE_dtlto-bridge");

/// What examples/hello prints.
pub const HELLO: &str = "hello from dtlto-bridge: add=5 mul=20 square=36\n";

/// Removes from `cmd`'s environment everything of the developer's that would change what
/// dtlto-bridge or make does: `DTLTO_BRIDGE_*`, jobservers, and make's flags.
pub fn isolate(cmd: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("DTLTO_BRIDGE_")
            || k.contains("MAKEFLAGS")
            || k == "MFLAGS"
            || k == "MAKELEVEL"
        {
            cmd.env_remove(&*k);
        }
    }
    cmd
}

/// One job running `sh -c SCRIPT` with these inputs and outputs.
/// A minimal relocatable ELF object (its 64-byte header, no sections): what `obj!()` writes, for
/// the fake compilers that copy an input to their output.
pub fn object() -> String {
    let mut o = String::from("\x7fELF\x02\x01\x01");
    o.push_str(&"\0".repeat(9));
    o.push_str("\x01\0>\0\x01\0\0\0");
    o.push_str(&"\0".repeat(40));
    o
}

pub fn sh_job<S: AsRef<str>>(script: &str, inputs: &[S], outputs: &[S]) -> serde_json::Value {
    let strings = |v: &[S]| v.iter().map(|s| s.as_ref().to_string()).collect::<Vec<_>>();
    serde_json::json!({"args": ["-c", script], "inputs": strings(inputs), "outputs": strings(outputs)})
}

/// A current-schema job file of these jobs, run by `sh`.
pub fn job_file(jobs: Vec<serde_json::Value>) -> String {
    serde_json::json!({
        "common": {"linker_output": "prog", "args": ["sh"], "inputs": []},
        "jobs": jobs,
    })
    .to_string()
}

/// A job file whose jobs are `sh -c SCRIPT` with the given inputs and outputs.
pub fn sh_jobs(list: &[(&str, &[&str], &[&str])]) -> String {
    job_file(list.iter().map(|(s, i, o)| sh_job(s, i, o)).collect())
}

/// Live processes (not zombies) whose command line contains `text`, as (pid, command line).
pub fn processes_with(text: &str) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
            .unwrap_or(true);
        if cmdline.contains(text) && !zombie {
            found.push((pid, cmdline));
        }
    }
    found
}

/// Panics, failing the test, when a tool the tests need is not on PATH.
pub fn require(tool: &str) -> PathBuf {
    which::which(tool).unwrap_or_else(|_| {
        panic!("{tool} is not on PATH: the tests need it (scripts/setup.sh installs it)")
    })
}

/// make 4.4.1 and ninja 1.13 from PyPI, installed by scripts/setup.sh beside the build.
pub fn pytool(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/pytools/bin")
        .join(name);
    assert!(
        p.is_file(),
        "{} is missing: run scripts/setup.sh",
        p.display()
    );
    p
}

pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

pub struct Space {
    _root: tempfile::TempDir,
    /// Where the link runs: `.../link dir`.
    pub dir: PathBuf,
    /// TMPDIR for dtlto-bridge, so tests can see what it leaves behind.
    pub tmp: PathBuf,
}

impl Space {
    pub fn new() -> Space {
        let root = tempfile::Builder::new()
            .prefix("dtlto-bridge-test-")
            .tempdir()
            .unwrap();
        let dir = root.path().join("link dir");
        let tmp = root.path().join("tmp");
        fs::create_dir(&dir).unwrap();
        fs::create_dir(&tmp).unwrap();
        Space {
            _root: root,
            dir,
            tmp,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.path(name);
        fs::write(&p, contents).unwrap();
        p
    }

    pub fn read(&self, name: &str) -> String {
        fs::read_to_string(self.path(name)).unwrap()
    }

    pub fn exists(&self, name: &str) -> bool {
        self.path(name).exists()
    }

    /// Writes an executable shell script.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.write(name, &format!("#!/bin/sh\n{body}"));
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// Environment shared by every process a test starts here.
    pub fn env(&self, cmd: &mut Command) {
        isolate(cmd).current_dir(&self.dir).env("TMPDIR", &self.tmp);
        // The host-wide pool of this space alone, so tests running at once do not share it.
        cmd.env("DTLTO_BRIDGE_HOST_POOL", self.tmp.with_file_name("pool"));
        cmd.env("DTLTO_BRIDGE_HISTORY", self.tmp.with_file_name("history"));
    }

    /// Any program, in this space's environment.
    pub fn program(&self, program: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        self.env(&mut cmd);
        cmd.args(args);
        cmd
    }

    /// dtlto-bridge with these arguments, run in the link directory.
    pub fn bridge(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BRIDGE);
        self.env(&mut cmd);
        cmd.args(args);
        cmd
    }

    pub fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(require(program));
        self.env(&mut cmd);
        cmd.args(args);
        cmd
    }

    /// Runs and returns the output, panicking with its stderr when it fails.
    pub fn ok(&self, cmd: &mut Command) -> Output {
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{cmd:?} failed with {}:\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Compiles C source to ThinLTO bitcode.
    pub fn compile(&self, source: &Path, object: &str) {
        self.compile_with("clang-22", source, object);
    }

    /// Compiles C source to ThinLTO bitcode with `clang` (clang-19, ...).
    pub fn compile_with(&self, clang: &str, source: &Path, object: &str) {
        let src = source.to_str().unwrap();
        self.ok(&mut self.command(clang, &["-O2", "-flto=thin", "-c", src, "-o", object]));
    }

    /// Builds examples/hello here: plain objects, a regular archive, a thin archive.
    /// Returns the link inputs in order.
    pub fn hello(&self) -> Vec<String> {
        self.hello_with("clang-22")
    }

    /// `hello`, compiled by `clang`.
    pub fn hello_with(&self, clang: &str) -> Vec<String> {
        let src = examples().join("hello");
        for f in ["main", "add", "mul", "sq", "greeting"] {
            self.compile_with(clang, &src.join(format!("{f}.c")), &format!("{f}.o"));
        }
        self.ok(&mut self.command("llvm-ar-22", &["rc", "libmul.a", "mul.o"]));
        self.ok(&mut self.command("llvm-ar-22", &["rc", "--thin", "libsq.a", "sq.o"]));
        ["main.o", "add.o", "greeting.o", "libmul.a", "libsq.a"]
            .map(String::from)
            .to_vec()
    }

    /// clang-22 links `inputs` into `output` with `distributor` and its arguments.
    pub fn link(
        &self,
        distributor: &Path,
        args: &[&str],
        inputs: &[String],
        output: &str,
    ) -> Output {
        require("ld.lld-22");
        let mut cmd = self.command(
            "clang-22",
            &["-O2", "-flto=thin", "-fuse-ld=lld-22", "-o", output],
        );
        cmd.arg(format!("-fthinlto-distributor={}", distributor.display()));
        for a in args {
            cmd.arg(format!("-Xthinlto-distributor={a}"));
        }
        cmd.args(inputs);
        cmd.output().unwrap()
    }

    /// Runs a program built here and returns its stdout.
    pub fn run_program(&self, name: &str) -> String {
        let out = self.ok(&mut Command::new(self.path(name)));
        String::from_utf8(out.stdout).unwrap()
    }

    /// What dtlto-bridge left in TMPDIR (should be nothing).
    pub fn leftovers(&self) -> Vec<String> {
        fs::read_dir(&self.tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// Files in the link directory whose names contain `pattern`.
    pub fn files_matching(&self, pattern: &str) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(pattern))
            .collect();
        v.sort();
        v
    }
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn assert_linked(out: &Output) {
    assert!(
        out.status.success(),
        "link failed with {}:\n{}",
        out.status,
        stderr(out)
    );
}

/// Polls `done` until it holds, failing the test after 30 s.
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(
            std::time::Instant::now() < until,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Whether a process runs (a zombie does not: it only waits to be reaped).
pub fn alive(pid: i32) -> bool {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ")
        .is_some_and(|(_, rest)| !rest.starts_with('Z'))
}

/// dtlto-bridge with these arguments, run in the link directory, whatever its exit status.
pub fn run(s: &Space, args: &[&str]) -> Output {
    s.bridge(args).output().unwrap()
}

/// Wrappers with a known way of failing; each logs that it ran.
pub const BAD_WRAPPERS: [(&str, &str); 3] = [
    ("fails.sh", "echo ran >> wrapper.log\necho 'remote host refused' >&2\nexit 1\n"),
    ("nothing.sh", "echo ran >> wrapper.log\nexit 0\n"),
    (
        "truncates.sh",
        // Runs the job, then keeps only the first 200 bytes of its object.
        "echo ran >> wrapper.log\n\"$@\" || exit\nwhile [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n\
         head -c 200 \"$out\" > \"$out.cut\" && mv \"$out.cut\" \"$out\"\n",
    ),
];

/// `--wrapper=` the script `name` in `s`, quoted.
pub fn wrapper_arg(s: &Space, name: &str) -> String {
    format!(
        "--wrapper={}",
        shell_words::quote(s.path(name).to_str().unwrap())
    )
}

/// The build file formats `emit` writes, and the extension of their golden files.
pub const FORMATS: [(&str, &str); 2] = [("ninja", "ninja"), ("make", "mk")];

/// 16 jobs whose inputs grow with their index (so the costliest is the last in the file), each
/// appending its index to `starts` when it starts. Job 15 then holds its slot until job 0 has
/// started (and fails after some 20 s without it), so after the first two every job is granted
/// the one slot freed by the end of the job before it: the order cannot depend on two slots
/// freeing together.
pub fn ordered_jobs(s: &Space) {
    let jobs = (0..16)
        .map(|i| {
            s.write(&format!("in{i}"), &"x".repeat((i + 1) * 100));
            let wait = match i {
                15 => "n=0; until grep -qx 0 starts || [ $n -ge 2000 ]; do sleep 0.01; n=$((n+1)); done; \
                       [ $n -lt 2000 ] || { echo job 0 never started >&2; exit 1; }",
                14 => "sleep 0.1",
                _ => "sleep 0.03",
            };
            let script = format!("echo {i} >> starts; {wait}; {} > out{i}", obj!());
            sh_job(&script, &[format!("in{i}")], &[format!("out{i}")])
        })
        .collect();
    s.write("j.json", &job_file(jobs));
}

/// The order the jobs started in: costliest first. The first two start together on two free
/// slots, so either may log first; every later start follows the end of the job before it.
pub fn assert_costliest_first(s: &Space, how: &str) {
    let starts: Vec<usize> = s
        .read("starts")
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let mut first = starts[..2].to_vec();
    first.sort();
    assert_eq!(first, [14, 15], "{how}: {starts:?}");
    assert_eq!(
        starts[2..],
        (0..14).rev().collect::<Vec<_>>(),
        "{how}: jobs must start costliest first: {starts:?}"
    );
}

/// The golden files of tests/golden: each output compared with its file, or, with
/// UPDATE_GOLDEN=1, written to it.
pub struct Goldens {
    dir: PathBuf,
    update: bool,
    stale: Vec<String>,
}

impl Goldens {
    pub fn new() -> Goldens {
        Goldens {
            dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden"),
            update: std::env::var_os("UPDATE_GOLDEN").is_some(),
            stale: Vec::new(),
        }
    }

    /// Compares (or writes) the golden file `name`.
    pub fn check(&mut self, name: &str, got: &str) {
        let golden = self.dir.join(name);
        if self.update {
            fs::write(&golden, got).unwrap();
        } else if fs::read_to_string(&golden).ok().as_deref() != Some(got) {
            self.stale.push(golden.display().to_string());
        }
    }

    /// Fails when any output differed from its file.
    pub fn finish(self) {
        let stale = self.stale;
        assert!(
            stale.is_empty(),
            "emitted output differs from {stale:?}; check the diff and rerun with UPDATE_GOLDEN=1"
        );
    }
}
