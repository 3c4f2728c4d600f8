//! Remote execution against a real REAPI server: BuildGrid (from PyPI, installed by
//! `scripts/setup.sh --tests`) on a Unix socket, with the test-only worker of tests/remote/.
//! Each test starts its own server and workers and stops them by PID.

use crate::space::*;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn pytools() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pytools/bin");
    assert!(
        p.join("bgd").exists(),
        "BuildGrid is not installed in {}: run scripts/setup.sh --tests",
        p.display()
    );
    p
}

/// A BuildGrid server and its workers, stopped (by PID) when dropped.
pub struct Farm {
    pub dir: tempfile::TempDir,
    server: Child,
    workers: Vec<Child>,
}

impl Farm {
    /// A server with `workers` workers, each started with `worker_args`.
    pub fn start(workers: usize, worker_args: &[&str]) -> Farm {
        let dir = tempfile::Builder::new().prefix("farm").tempdir().unwrap();
        Farm::start_in(dir, "", workers, worker_args)
    }

    /// A server in `dir` that also listens on `channel` (YAML for one more `!channel` of
    /// its `server:` list, such as a TLS port), with `workers` workers on the Unix socket.
    pub fn start_in(
        dir: tempfile::TempDir,
        channel: &str,
        workers: usize,
        worker_args: &[&str],
    ) -> Farm {
        let socket = dir.path().join("bgd.sock");
        let config = fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/remote/buildgrid.yml"),
        )
        .unwrap()
        .replace("${SOCKET}", socket.to_str().unwrap())
        .replace("\nauthorization:", &format!("{channel}\nauthorization:"));
        let config_path = dir.path().join("buildgrid.yml");
        fs::write(&config_path, config).unwrap();
        let tmp = dir.path().join("tmp");
        fs::create_dir(&tmp).unwrap();
        let server = Command::new(pytools().join("bgd"))
            .args(["server", "start"])
            .arg(&config_path)
            .env("TMPDIR", &tmp)
            .stdin(Stdio::null())
            .stdout(fs::File::create(dir.path().join("server.log")).unwrap())
            .stderr(fs::File::create(dir.path().join("server.err")).unwrap())
            .spawn()
            .unwrap();
        let mut farm = Farm {
            dir,
            server,
            workers: Vec::new(),
        };
        let until = Instant::now() + Duration::from_secs(60);
        while !socket.exists() {
            if let Ok(Some(status)) = farm.server.try_wait() {
                panic!(
                    "BuildGrid exited with {status}:\n{}",
                    fs::read_to_string(farm.dir.path().join("server.err")).unwrap_or_default()
                );
            }
            assert!(Instant::now() < until, "BuildGrid did not start in 60 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        for i in 0..workers {
            farm.add_worker(&format!("w{i}"), worker_args);
        }
        farm
    }

    fn add_worker(&mut self, name: &str, args: &[&str]) {
        let worker = Command::new(pytools().join("python"))
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/remote/worker.py"))
            .arg("--remote")
            .arg(format!("unix:{}", self.socket().display()))
            .args(["--instance", "main", "--name", name, "--log"])
            .arg(self.log_path())
            .args(args)
            .stdin(Stdio::null())
            .stderr(fs::File::create(self.dir.path().join(format!("{name}.err"))).unwrap())
            .spawn()
            .unwrap();
        self.workers.push(worker);
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("bgd.sock")
    }

    fn url(&self) -> String {
        format!("unix:{}", self.socket().display())
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("worker.jsonl")
    }

    /// What the workers did: one entry per action started or ended.
    fn log(&self) -> Vec<Value> {
        fs::read_to_string(self.log_path())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Actions the workers ran to their end.
    pub fn executed(&self) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|e| e.get("exit_code").is_some())
            .collect()
    }

    /// The options a link needs to use this farm.
    pub fn args(&self) -> Vec<String> {
        vec![
            format!("--remote={}", self.url()),
            "--remote-instance=main".into(),
        ]
    }

    fn kill_server(&mut self) {
        // A stopped server dies of SIGKILL too.
        let _ = self.server.kill();
        let _ = self.server.wait();
    }

    /// Sends the server `signal` (SIGKILL, SIGSTOP), by its PID.
    fn signal_server(&mut self, signal: i32) {
        let pid = self.server.id() as i32;
        assert_eq!(
            unsafe { libc::kill(pid, signal) },
            0,
            "signal {signal} to {pid}"
        );
    }
}

impl Drop for Farm {
    fn drop(&mut self) {
        for w in &mut self.workers {
            let _ = w.kill();
            let _ = w.wait();
        }
        self.kill_server();
    }
}

/// Links with the farm, a report and these extra distributor arguments.
pub fn link(
    space: &Space,
    farm_args: &[String],
    extra: &[&str],
    inputs: &[String],
) -> (std::process::Output, Value) {
    let report = space.tmp.with_file_name("report.json");
    let _ = fs::remove_file(&report);
    let mut args: Vec<String> = farm_args.to_vec();
    args.push(format!("--report={}", report.display()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = space.link(Path::new(BRIDGE), &args, inputs, "prog");
    let report = fs::read_to_string(&report)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    (out, report)
}

/// The one file of the history with this extension (`.digests`, `.actions`).
pub fn history_file(space: &Space, extension: &str) -> PathBuf {
    let files: Vec<PathBuf> = fs::read_dir(space.tmp.with_file_name("history"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    let [file] = files.as_slice() else {
        panic!("one {extension} file, not {files:?}")
    };
    file.clone()
}

/// One field of each job of a report, by its JSON pointer ("" where it is not a string).
pub fn each_job(report: &Value, pointer: &str) -> Vec<String> {
    report["jobs"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|j| {
            j.pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// Each job's action key ("content", or "names: " and why).
fn keys(report: &Value) -> Vec<String> {
    each_job(report, "/remote/key")
}

/// Where each job ran.
pub fn ran(report: &Value) -> Vec<String> {
    each_job(report, "/ran")
}

#[test]
fn every_job_of_a_link_with_archives_and_parent_directory_inputs_runs_on_a_worker() {
    let farm = Farm::start(2, &[]);
    let space = Space::new();
    let mut inputs = space.hello();
    // An input outside the linker's directory: the input root is their common ancestor.
    let lib = space.dir.parent().unwrap().join("lib");
    fs::create_dir(&lib).unwrap();
    fs::rename(space.path("add.o"), lib.join("add.o")).unwrap();
    inputs[1] = "../lib/add.o".into();
    let trace = space.tmp.with_file_name("trace.json");
    let trace_arg = format!("--trace={}", trace.display());
    let (out, report) = link(&space, &farm.args(), &[&trace_arg], &inputs);
    assert_linked(&out);
    assert_eq!(space.run_program("prog"), HELLO);
    let ran = ran(&report);
    assert_eq!(ran.len(), 5);
    assert!(
        ran.iter().all(|r| r == "remote"),
        "{ran:?}\n{}",
        stderr(&out)
    );
    let executed = farm.executed();
    assert_eq!(executed.len(), 5, "the workers ran every job: {executed:?}");
    for job in report["jobs"].as_array().unwrap() {
        let worker = job["remote"]["worker"].as_str().unwrap();
        assert!(worker == "w0" || worker == "w1", "{job}");
    }
    // Each distinct blob went up once: what was sent equals what the link needed.
    let remote = &report["remote"];
    assert_eq!(
        remote["uploaded_blobs"], remote["distinct_blobs"],
        "{remote}"
    );
    let inputs_bytes: u64 = ["main.o", "greeting.o", "mul.o", "sq.o"]
        .iter()
        .map(|f| fs::metadata(space.path(f)).unwrap().len())
        .sum::<u64>()
        + fs::metadata(lib.join("add.o")).unwrap().len();
    assert!(
        remote["uploaded_bytes"].as_u64().unwrap() >= inputs_bytes,
        "{remote}"
    );
    assert!(space.leftovers().is_empty(), "{:?}", space.leftovers());
    // The trace shows each remote job's steps.
    let trace: Value = serde_json::from_str(&fs::read_to_string(&trace).unwrap()).unwrap();
    let steps: Vec<&str> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "remote")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps.iter().filter(|s| **s == "execute").count(),
        5,
        "{steps:?}"
    );
    assert!(
        steps.contains(&"queued") && steps.contains(&"download"),
        "{steps:?}"
    );
}

/// Each job's reason for not coming from the action cache ("" when it did).
pub fn misses(report: &Value) -> Vec<String> {
    each_job(report, "/remote/miss")
}

/// An action keyed by content changes exactly when the object could: a relink takes every job
/// from the cache; a changed import, option or compiler misses, and the report and the summary
/// say which.
#[test]
fn a_relink_misses_the_action_cache_only_where_an_import_an_option_or_the_compiler_changed() {
    let farm = Farm::start(1, &[]);
    let space = Space::new();
    let mut inputs = space.hello();
    // A compiler at a fixed path whose content changes later (lld names it in every job).
    let compiler = space.script("cc", "exec /usr/lib/llvm-22/bin/clang \"$@\"\n");
    inputs.push(format!(
        "-Wl,--thinlto-remote-compiler={}",
        compiler.display()
    ));
    let relink = |extra: &[&str], inputs: &[String]| {
        let (out, report) = link(&space, &farm.args(), extra, inputs);
        assert_linked(&out);
        assert_eq!(space.run_program("prog"), HELLO);
        (stderr(&out), report)
    };
    // Inputs left alone for a second have their digests remembered for the next link.
    std::thread::sleep(Duration::from_millis(1100));
    let (err, first) = relink(&[], &inputs);
    assert_eq!(ran(&first), ["remote"; 5], "{err}");
    assert_eq!(
        misses(&first),
        ["no earlier link of this module here to compare with"; 5]
    );
    let memo = &history_file(&space, "digests");
    // main.o, add.o, greeting.o and the thin archive's sq.o, by their inode numbers (the
    // regular archive's member is a new file lld extracted for this link).
    let remembered = fs::read_to_string(memo).unwrap();
    for object in ["main.o", "add.o", "greeting.o", "sq.o"] {
        use std::os::unix::fs::MetadataExt;
        let ino = fs::metadata(space.path(object)).unwrap().ino();
        assert!(
            remembered
                .lines()
                .any(|l| l.split(' ').nth(1) == Some(&ino.to_string())),
            "{object} (inode {ino}) is not remembered:\n{remembered}\n{err}"
        );
    }
    let executed = farm.executed().len();
    assert_eq!(executed, 5);

    // Same inputs, another lld (other member names in the shards): every job from the cache.
    let (err, second) = relink(&["--summary"], &inputs);
    assert_eq!(ran(&second), ["remote cache"; 5], "{err}");
    assert!(!err.contains("not from the cache"), "{err}");
    assert_eq!(
        farm.executed().len(),
        executed,
        "no Execute reached a worker"
    );

    // One more backend option: every job misses, because of its command.
    let mut with_option = inputs.clone();
    with_option.push("-Wl,--thinlto-remote-compiler-arg=-fno-unroll-loops".into());
    let (err, third) = relink(&["--summary"], &with_option);
    assert_eq!(ran(&third), ["remote"; 5], "{err}");
    assert_eq!(misses(&third), ["the command changed"; 5]);
    assert!(
        err.contains("not from the cache: 5 (the command changed: 5)"),
        "{err}"
    );

    // add.o changed (main imports add): its own job and main's miss, and say why (its
    // remembered digest is not used: the file is another); the jobs that do not import it
    // come from the cache.
    let add = space.write("add2.c", "int add(int a, int b) { return b + a; }\n");
    space.compile_with("clang-22", &add, "add.o");
    let (err, fourth) = relink(&[], &with_option);
    // The misses alone went to the build tool.
    assert_eq!(fourth["backend"], "ninja", "{err}");
    let jobs: Vec<(String, String, String)> = fourth["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            let module = j["outputs"][0].as_str().unwrap().to_string();
            (
                module,
                j["ran"].as_str().unwrap().into(),
                j["remote"]["miss"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    for (output, ran, miss) in &jobs {
        let expected = if output.starts_with("main.") {
            ("remote", "an import add.o changed")
        } else if output.starts_with("add.") {
            ("remote", "the module add.o changed")
        } else {
            ("remote cache", "")
        };
        assert_eq!(
            (ran.as_str(), miss.as_str()),
            expected,
            "{output}: {jobs:?}\n{err}"
        );
    }

    // mul.o changed inside the regular archive (sq and main import it), behind a new member
    // that moves its offset: the member is known by its archive and name, whatever lld's pid
    // and its place; its job and its importers miss, and say so.
    let mul = space.write("mul2.c", "int mul(int a, int b) { return b * a; }\n");
    space.compile_with("clang-22", &mul, "mul.o");
    let pad = space.write("pad.c", "int dtlto_unused_pad(void) { return 7; }\n");
    space.compile_with("clang-22", &pad, "pad.o");
    fs::remove_file(space.path("libmul.a")).unwrap();
    space.ok(&mut space.command("llvm-ar-22", &["rc", "libmul.a", "pad.o", "mul.o"]));
    let (err, member) = relink(&[], &with_option);
    let mut said: Vec<(String, String)> = member["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["ran"] == "remote")
        .map(|j| {
            let output = j["outputs"][0].as_str().unwrap();
            let module = output.split('.').next().unwrap().to_string();
            (module, j["remote"]["miss"].as_str().unwrap().to_string())
        })
        .collect();
    said.sort();
    assert_eq!(
        said,
        [
            (
                "libmul".to_string(),
                "the module libmul.a(mul.o) changed".to_string()
            ),
            ("main".into(), "an import libmul.a(mul.o) changed".into()),
            ("sq".into(), "an import libmul.a(mul.o) changed".into()),
        ],
        "{err}"
    );

    // The compiler replaced at the same path: every job misses, because of the compiler.
    space.script("cc", "# upgraded\nexec /usr/lib/llvm-22/bin/clang \"$@\"\n");
    let (err, fifth) = relink(&[], &with_option);
    assert_eq!(ran(&fifth), ["remote"; 5], "{err}");
    assert_eq!(misses(&fifth), ["the compiler changed"; 5]);
}

/// Links with `farm` (default settings), and does `fault` to it once a worker has started a
/// job: the link's output and report, and how long it took after the fault.
fn link_while(
    space: &Space,
    inputs: &[String],
    farm: &mut Farm,
    fault: impl FnOnce(&mut Farm),
) -> (std::process::Output, Value, Duration) {
    let args = farm.args();
    std::thread::scope(|s| {
        let handle = s.spawn(|| link(space, &args, &[], inputs));
        wait_for("a worker to start a job", || {
            farm.log().iter().any(|e| e.get("started").is_some())
        });
        let at = Instant::now();
        fault(farm);
        let (out, report) = handle.join().unwrap();
        (out, report, at.elapsed())
    })
}

#[test]
fn a_server_that_is_down_or_dies_mid_link_leaves_the_jobs_to_run_here() {
    let space = Space::new();
    let inputs = space.hello();
    // Down before the link: one warning, every job local.
    let nowhere = vec![format!(
        "--remote=unix:{}",
        space.tmp.with_file_name("none.sock").display()
    )];
    let (out, report) = link(&space, &nowhere, &[], &inputs);
    assert_linked(&out);
    assert_eq!(space.run_program("prog"), HELLO);
    assert!(
        stderr(&out).contains("every job runs here"),
        "{}",
        stderr(&out)
    );
    assert!(
        ran(&report).iter().all(|r| r == "local"),
        "{:?}",
        ran(&report)
    );

    // Killed while its workers run the jobs: each job falls back, the link succeeds.
    let mut farm = Farm::start(1, &["--delay", "3"]);
    let (out, report, _) = link_while(&space, &inputs, &mut farm, Farm::kill_server);
    assert_linked(&out);
    assert_eq!(space.run_program("prog"), HELLO);
    assert!(
        ran(&report).iter().all(|r| r == "fallback"),
        "{:?}",
        ran(&report)
    );
    assert!(stderr(&out).contains("remote"), "{}", stderr(&out));
}

#[test]
fn a_worker_that_fails_or_returns_empty_objects_means_a_local_run_or_with_no_fallback_a_failure() {
    let space = Space::new();
    let inputs = space.hello();
    {
        let farm = Farm::start(1, &["--empty-outputs"]);
        let (out, report) = link(&space, &farm.args(), &[], &inputs);
        assert_linked(&out);
        assert_eq!(space.run_program("prog"), HELLO);
        assert!(
            ran(&report).iter().all(|r| r == "fallback"),
            "{:?}",
            ran(&report)
        );
        let reason = report["jobs"][0]["fallback_reason"].as_str().unwrap();
        assert!(reason.contains("empty"), "{reason}");
    }
    let farm = Farm::start(1, &["--fail-exit", "3"]);
    let (out, _) = link(&space, &farm.args(), &["--no-fallback"], &inputs);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("exit status 3"), "{err}");
    assert!(
        err.contains("failing on purpose"),
        "the remote stderr is shown: {err}"
    );
    assert!(err.contains("native.o"), "the job is named: {err}");
    assert!(
        space.files_matching("native.o").is_empty(),
        "no partial outputs"
    );
}

/// Actions keyed by content: lld's per-link member names (a regular archive), the checkout's
/// path and absolute paths leave the action unchanged, so a relink, a second checkout and a link
/// by absolute paths all take every job from the action cache; the program is the one a local
/// link makes, byte for byte.
#[test]
fn relinks_other_checkouts_and_absolute_paths_take_every_job_from_the_action_cache() {
    let farm = Farm::start(1, &[]);
    let first = Space::new();
    let inputs = first.hello();
    let (out, report) = link(&first, &farm.args(), &[], &inputs);
    assert_linked(&out);
    assert_eq!(first.run_program("prog"), HELLO);
    assert_eq!(ran(&report), ["remote"; 5], "{}", stderr(&out));
    for job in report["jobs"].as_array().unwrap() {
        assert_eq!(job["remote"]["key"], "content", "{job}");
    }
    let executed = farm.executed().len();
    assert_eq!(executed, 5);
    let remote_prog = fs::read(first.path("prog")).unwrap();
    // The same link without the farm: the same program.
    let local = first.link(Path::new(BRIDGE), &[], &inputs, "prog");
    assert_linked(&local);
    assert!(
        remote_prog == fs::read(first.path("prog")).unwrap(),
        "the programs differ"
    );

    // A relink (another lld, so other member names in every shard). Every job is answered
    // before anything starts: no build tool runs (this ninja would say so), so no launcher.
    let said = first.tmp.with_file_name("ninja-ran");
    let ninja = first.script(
        "recording-ninja",
        &format!("echo \"$@\" >> '{}'\nexec ninja \"$@\"\n", said.display()),
    );
    let ninja = format!("--ninja={}", ninja.display());
    let (out, report) = link(&first, &farm.args(), &[&ninja], &inputs);
    assert_linked(&out);
    assert_eq!(ran(&report), ["remote cache"; 5], "{}", stderr(&out));
    assert_eq!(report["backend"], "none", "{}", stderr(&out));
    assert!(!said.exists(), "ninja ran: {:?}", fs::read_to_string(&said));
    assert!(first.leftovers().is_empty(), "{:?}", first.leftovers());
    // A link in `space` that gives the program and takes every job from the cache.
    let from_the_cache = |space: &Space, inputs: &[String]| {
        let (out, report) = link(space, &farm.args(), &[], inputs);
        assert_linked(&out);
        assert_eq!(space.run_program("prog"), HELLO);
        assert_eq!(
            ran(&report),
            ["remote cache"; 5],
            "{:?}\n{}",
            keys(&report),
            stderr(&out)
        );
    };
    // A second checkout, at another path.
    let second = Space::new();
    let inputs = second.hello();
    from_the_cache(&second, &inputs);
    // Every input by its absolute path, in both checkouts: lld numbers a shard's modules and
    // values in the order of their names (absolute names sort before relative ones), and the
    // action does not depend on that order.
    for space in [&first, &second] {
        let absolute: Vec<String> = (inputs.iter())
            .map(|i| space.path(i).display().to_string())
            .collect();
        from_the_cache(space, &absolute);
    }
    assert_eq!(farm.executed().len(), executed, "nothing executed again");
}

/// A job that cannot be keyed by content (here no index shard) keeps its paths; with an
/// absolute one it runs here and says why.
#[test]
fn a_job_keyed_by_name_with_an_absolute_path_runs_here_and_says_why() {
    let farm = Farm::start(1, &[]);
    let space = Space::new();
    let input = space.write("in.txt", &crate::space::object());
    let input = input.display().to_string();
    space.write(
        "j.json",
        &crate::space::job_file(vec![
            crate::space::sh_job("cat in.txt > o1", &[input.as_str()], &["o1"]),
            crate::space::sh_job(concat!(obj!(), " > o2"), &[] as &[&str], &["o2"]),
        ]),
    );
    let report = space.tmp.with_file_name("report.json");
    let mut cmd = space.bridge(&["j.json", &format!("--report={}", report.display())]);
    cmd.args(farm.args());
    let out = space.ok(&mut cmd);
    let err = stderr(&out);
    assert!(
        err.contains("not remotely") && err.contains("absolute"),
        "{err}"
    );
    let report: Value = serde_json::from_str(&fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(ran(&report), ["local", "remote"]);
    let key = report["jobs"][1]["remote"]["key"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(key.starts_with("names: "), "{key}");
}

#[test]
fn an_interrupt_cancels_the_remote_operations_and_leaves_nothing() {
    let mut farm = Farm::start(1, &["--delay", "5"]);
    let space = Space::new();
    // The job file and its inputs, kept to run dtlto-bridge on them directly.
    let (run_dir, job_file) = saved_link(&space);
    let mut cmd = Command::new(BRIDGE);
    space.env(&mut cmd);
    cmd.current_dir(&run_dir)
        .arg(&job_file)
        .args(farm.args())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_for("a worker to start a job", || {
        farm.log().iter().any(|e| e.get("started").is_some())
    });
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let left: Vec<_> = fs::read_dir(&run_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("native.o") && !n.ends_with(".thinlto.bc"))
        .collect();
    assert!(left.is_empty(), "outputs left: {left:?}");
    assert!(space.leftovers().is_empty(), "{:?}", space.leftovers());
    // The server cancelled the operation: its worker saw the lease go and killed the command.
    wait_for("the worker to see the cancellation", || {
        farm.log().iter().any(|e| e.get("cancelled").is_some())
    });
    farm.kill_server();
}

/// Saves a link of examples/hello and returns (the saved directory, the job file's name).
fn saved_link(space: &Space) -> (PathBuf, String) {
    let inputs = space.hello();
    let saved = space.tmp.with_file_name("saved");
    let save = format!("--save={}", saved.display());
    let out = space.link(Path::new(BRIDGE), &[&save], &inputs, "prog");
    assert_linked(&out);
    let run_dir = fs::read_dir(&saved)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let job_file = fs::read_dir(&run_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".json"))
        .unwrap();
    (run_dir, job_file)
}

fn outputs_of(run_dir: &Path, job_file: &str) -> Vec<PathBuf> {
    let jobs: Value =
        serde_json::from_str(&fs::read_to_string(run_dir.join(job_file)).unwrap()).unwrap();
    jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| run_dir.join(j["outputs"][0].as_str().unwrap()))
        .collect()
}

#[test]
fn emitted_build_files_run_remotely_through_rexec_and_doctor_checks_the_server() {
    let farm = Farm::start(1, &[]);
    let space = Space::new();
    let (run_dir, job_file) = saved_link(&space);
    let wrapper = format!(
        "{BRIDGE} rexec --remote={} --remote-instance=main --inputs={{inputs}} --outputs={{outputs}} --",
        farm.url()
    );
    for (format, tool, file) in [
        ("ninja", "ninja", "jobs.ninja"),
        ("make", "make", "jobs.mk"),
    ] {
        let mut emit = space.bridge(&["emit", &job_file, "--format", format, "-o", file]);
        emit.arg(format!("--wrapper={wrapper}"))
            .current_dir(&run_dir);
        space.ok(&mut emit);
        let mut run = space.command(tool, &["-f", file]);
        run.current_dir(&run_dir);
        let out = space.ok(&mut run);
        let err = stderr(&out);
        assert!(
            !err.contains("not remotely"),
            "every job ran remotely: {err}"
        );
        for o in outputs_of(&run_dir, &job_file) {
            let len = fs::metadata(&o).map(|m| m.len()).unwrap_or(0);
            assert!(len > 0, "{} was written", o.display());
            fs::remove_file(&o).unwrap();
        }
    }
    // ninja's run executed every job; make's found them all in the action cache.
    assert_eq!(farm.executed().len(), 5, "{:?}", farm.log());

    let out =
        space.ok(&mut space.bridge(&["doctor", "--remote", &farm.url(), "--remote-instance=main"]));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("execution enabled") && text.contains("round trip"),
        "{text}"
    );
    let nowhere = format!("unix:{}", space.tmp.with_file_name("none.sock").display());
    let out = space
        .bridge(&["doctor", "--remote", &nowhere])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("MISSING: connect to"));
}

#[test]
fn a_wrapper_can_name_each_job_inputs_and_outputs() {
    let space = Space::new();
    let inputs = space.hello();
    let log = space.tmp.with_file_name("lists.log");
    let script = space.script(
        "lists.sh",
        &format!(
            "printf '%s|%s\\n' \"$1\" \"$2\" >> '{}'\nshift 2\nexec \"$@\"\n",
            log.display()
        ),
    );
    let wrapper = format!("--wrapper='{}' {{inputs}} {{outputs}}", script.display());
    let report = space.tmp.with_file_name("report.json");
    let out = space.link(
        Path::new(BRIDGE),
        &[&wrapper, &format!("--report={}", report.display())],
        &inputs,
        "prog",
    );
    assert_linked(&out);
    assert_eq!(space.run_program("prog"), HELLO);
    let lines = fs::read_to_string(&log).unwrap();
    let report: Value = serde_json::from_str(&fs::read_to_string(&report).unwrap()).unwrap();
    for job in report["jobs"].as_array().unwrap() {
        assert_eq!(job["ran"], "wrapper");
        let outputs = job["outputs"][0].as_str().unwrap();
        let line = lines
            .lines()
            .find(|l| l.ends_with(&format!("|{outputs}")))
            .unwrap_or_else(|| panic!("no line for {outputs} in {lines}"));
        let listed = line.split('|').next().unwrap();
        assert!(
            listed.contains(".thinlto.bc"),
            "the shard is listed: {line}"
        );
        assert!(listed.split(',').count() >= 2, "{line}");
    }
}

#[test]
fn blobs_larger_than_a_batch_go_through_bytestream_both_ways() {
    let farm = Farm::start(1, &[]);
    let space = Space::new();
    // 6 MB of random data in a module: more than BuildGrid's 4 MB batch limit, as bitcode and as
    // the object that comes back.
    let mut data = vec![0u8; 6_000_000];
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for b in data.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    fs::write(space.path("blob.bin"), &data).unwrap();
    space.write(
        "big.c",
        "static const unsigned char big[] = {\n#embed \"blob.bin\"\n};\n\
         int bigsum(void) { unsigned s = 0; for (unsigned i = 0; i < sizeof big; i += 4096) \
         s += big[i]; return (int)s; }\n",
    );
    space.write(
        "m.c",
        "#include <stdio.h>\nint bigsum(void);\nint main(void) { printf(\"%d\\n\", bigsum()); }\n",
    );
    for (src, obj) in [("big.c", "big.o"), ("m.c", "m.o")] {
        space.ok(&mut space.command(
            "clang-22",
            &["-std=c23", "-O2", "-flto=thin", "-c", src, "-o", obj],
        ));
    }
    let want: u32 = data.iter().step_by(4096).map(|b| u32::from(*b)).sum();
    let inputs = vec!["m.o".to_string(), "big.o".to_string()];
    let (out, report) = link(&space, &farm.args(), &[], &inputs);
    assert_linked(&out);
    assert!(
        ran(&report).iter().all(|r| r == "remote"),
        "{:?}\n{}",
        ran(&report),
        stderr(&out)
    );
    assert!(report["remote"]["uploaded_bytes"].as_u64().unwrap() > 6_000_000);
    assert!(report["remote"]["downloaded_bytes"].as_u64().unwrap() > 6_000_000);
    assert_eq!(space.run_program("prog").trim(), want.to_string());
}

#[test]
fn dtlto_bridge_link_on_clang_14_and_19_runs_its_jobs_on_the_workers() {
    for version in [14, 19] {
        let farm = Farm::start(2, &[]);
        let space = Space::new();
        // The program linked here, without the farm: the farm's must be the same bytes.
        let out = classic_link(&space, version, None).output().unwrap();
        assert_linked(&out);
        let here = fs::read(space.path("prog")).unwrap();
        fs::remove_file(space.path("prog")).unwrap();
        let mut cmd = classic_link(&space, version, Some(&farm));
        let report_path = space.tmp.with_file_name("report.json");
        let out = cmd.output().unwrap();
        assert_linked(&out);
        assert_eq!(space.run_program("prog"), HELLO);
        assert!(
            fs::read(space.path("prog")).unwrap() == here,
            "{version}: the programs differ"
        );
        let report: Value =
            serde_json::from_str(&fs::read_to_string(&report_path).unwrap()).unwrap();
        assert_eq!(ran(&report), ["remote"; 5], "{version}: {}", stderr(&out));
        assert_eq!(farm.executed().len(), 5, "the workers ran every job");
        assert!(space.leftovers().is_empty(), "{:?}", space.leftovers());
        // A relink writes the same paths into its shards (extracted members included): every
        // job comes from the action cache.
        fs::remove_file(space.path("prog")).unwrap();
        let out = cmd.output().unwrap();
        assert_linked(&out);
        assert_eq!(space.run_program("prog"), HELLO);
        let report: Value =
            serde_json::from_str(&fs::read_to_string(&report_path).unwrap()).unwrap();
        assert_eq!(ran(&report), ["remote cache"; 5], "{}", stderr(&out));
        assert_eq!(farm.executed().len(), 5, "nothing ran again");
        // A second checkout: its private directory has another name, which the shards record;
        // keyed by content, every job comes from the cache all the same.
        let second = Space::new();
        let out = classic_link(&second, version, Some(&farm))
            .output()
            .unwrap();
        assert_linked(&out);
        assert_eq!(second.run_program("prog"), HELLO);
        let report_path = second.tmp.with_file_name("report.json");
        let report: Value =
            serde_json::from_str(&fs::read_to_string(&report_path).unwrap()).unwrap();
        assert_eq!(
            ran(&report),
            ["remote cache"; 5],
            "{version}: {:?}\n{}",
            keys(&report),
            stderr(&out)
        );
        assert_eq!(
            farm.executed().len(),
            5,
            "nothing ran in the second checkout"
        );
    }
}
/// examples/hello built by clang-VERSION in `space` (a regular and a thin archive), and the
/// `dtlto-bridge link` command that links it with lld-VERSION (on `farm` if given), writing
/// `report.json` beside the space's TMPDIR.
fn classic_link(space: &Space, version: u32, farm: Option<&Farm>) -> Command {
    let inputs = space.hello_with(&format!("clang-{version}"));
    let report_path = space.tmp.with_file_name("report.json");
    let mut cmd = space.bridge(&["link", &format!("--report={}", report_path.display())]);
    if let Some(farm) = farm {
        cmd.args(farm.args());
    }
    cmd.arg("--");
    cmd.args([
        &format!("clang-{version}"),
        "-O2",
        "-flto=thin",
        &format!("-fuse-ld=lld-{version}"),
        "-o",
        "prog",
    ]);
    cmd.args(inputs);
    cmd
}

/// A farm killed (`kill -9`) or stopped (`kill -STOP`: its socket still takes connections, and
/// nothing answers, not even HTTP/2 pings) while its worker runs the jobs: the link ends within
/// the bound with the local program, and the user is told once.
#[test]
fn a_server_killed_or_stopped_mid_link_ends_the_link_within_seconds_with_the_local_program() {
    for signal in [libc::SIGKILL, libc::SIGSTOP] {
        let space = Space::new();
        let inputs = space.hello();
        let mut farm = Farm::start(1, &["--delay", "3"]);
        // Default settings: the bound is the one users get.
        let (out, report, after) =
            link_while(&space, &inputs, &mut farm, |f| f.signal_server(signal));
        let err = stderr(&out);
        assert_linked(&out);
        assert_eq!(space.run_program("prog"), HELLO);
        assert!(
            ran(&report)
                .iter()
                .all(|r| r == "fallback" || r == "remote"),
            "{signal}: {:?}",
            ran(&report)
        );
        assert_eq!(
            err.matches("the jobs still to go run here").count(),
            1,
            "{signal}: told once: {err}"
        );
        assert!(
            after < Duration::from_secs(60),
            "{signal}: the link ended {after:?} after the fault: {err}"
        );
        farm.kill_server();
    }
}
