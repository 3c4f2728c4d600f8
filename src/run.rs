//! Run: carries out one link's jobs: load, check, render into a private directory, run the
//! build tool from the linker's directory, verify, report.
//!
//! It knows the order of the pipeline and how ninja and make are invoked; the details of each
//! step live in parse, plan, render, verify and report.

use crate::cancel::{self, Watch};
use crate::cli::{EmitArgs, RunArgs};
use crate::parse::{self, JobFile};
use crate::plan;
use crate::record;
use crate::render::{self, Format, RunHooks};
use crate::report::{self, Fail};
use crate::slots;
use crate::verify;
use camino::{Utf8Path, Utf8PathBuf};
use std::fs::{self, File};
use std::io::IsTerminal;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// Reads and parses a job file; every problem is bad input.
fn load(path: &Utf8Path) -> Result<JobFile, Fail> {
    let text = fs::read_to_string(path)
        .map_err(|e| Fail::bad_input(format!("read job file {path}: {e}")))?;
    let file =
        parse::parse(&text).map_err(|e| Fail::bad_input(format!("parse job file {path}: {e}")))?;
    plan::check_independent(&file)
        .map_err(|e| Fail::bad_input(format!("check job file {path}: {e}")))?;
    Ok(file)
}

fn wrapper(arg: &crate::cli::WrapperArg) -> Result<Vec<String>, Fail> {
    arg.words().map_err(Fail::bad_input)
}

/// `dtlto-bridge emit`: the build file, written where asked, without running it.
pub fn emit(args: &EmitArgs) -> Result<(), Fail> {
    let file = load(&args.job_file)?;
    let wrapper = wrapper(&args.wrapper)?;
    let opts = render::Options {
        wrapper: &wrapper,
        source: args.job_file.as_str(),
        run: None,
        order: None,
    };
    let prepared = render::prepare(args.format, &file, &opts)
        .map_err(|e| Fail::bad_input(format!("render {}: {e}", args.format.file_name())))?;
    let written = match &args.output {
        Some(out) => File::create(out).and_then(|mut f| prepared.write_to(&mut f)),
        None => prepared.write_to(&mut std::io::stdout().lock()),
    };
    let target = args
        .output
        .as_ref()
        .map_or("standard output".into(), |o| o.to_string());
    written.map_err(|e| Fail::environment(format!("write {target}: {e}")))
}

/// The default run: everything from the job file to verified outputs.
pub fn run(args: &RunArgs) -> Result<(), Fail> {
    let jobserver = slots::probe();
    let watch = Watch::start().map_err(|e| Fail::environment(format!("watch signals: {e}")))?;
    let path = args
        .job_file
        .as_deref()
        .expect("clap requires the job file");
    let file = load(path)?;
    let wrapper = wrapper(&args.wrapper)?;
    let cwd = Path::new(".");

    let inputs = plan::stat_inputs(&file, cwd);
    let missing = &inputs.missing;
    if !missing.is_empty() {
        let list: Vec<String> = missing
            .iter()
            .map(|(i, p)| format!("  jobs[{i}] ({}): {p:?}", file.jobs[*i].outputs[0]))
            .collect();
        return Err(Fail::bad_input(format!(
            "check inputs of {path}: {} input file(s) do not exist:\n{}",
            missing.len(),
            list.join("\n")
        )));
    }
    if file.jobs.is_empty() {
        return Ok(());
    }

    let state = tempfile::Builder::new()
        .prefix("dtlto-bridge-")
        .tempdir()
        .map_err(|e| Fail::environment(format!("create temporary directory: {e}")))?;
    let state_dir = Utf8PathBuf::from_path_buf(state.path().to_path_buf()).map_err(|p| {
        Fail::environment(format!(
            "use temporary directory {}: not UTF-8",
            p.display()
        ))
    })?;
    let link = Link {
        args,
        file: &file,
        input_bytes: &inputs.bytes,
        path,
        wrapper: &wrapper,
    };
    let result = run_in(&link, &state_dir, jobserver, &watch);
    if args.keep {
        let kept = state.keep();
        eprintln!("dtlto-bridge: kept {}", kept.display());
    }
    result
}

/// One link's checked input: what `run_in` works from.
struct Link<'a> {
    args: &'a RunArgs,
    file: &'a JobFile,
    input_bytes: &'a [u64],
    /// The job file's path.
    path: &'a Utf8Path,
    wrapper: &'a [String],
}

fn run_in(
    link: &Link<'_>,
    state_dir: &Utf8Path,
    jobserver: jobserver::FromEnv,
    watch: &Watch,
) -> Result<(), Fail> {
    let Link {
        args,
        file,
        input_bytes,
        path,
        wrapper,
    } = *link;
    let exe = std::env::current_exe()
        .map_err(|e| Fail::environment(format!("find own executable: {e}")))?;
    let exe = exe
        .to_str()
        .ok_or_else(|| Fail::environment("find own executable: path is not UTF-8"))?;
    fs::create_dir(crate::job::jobs_dir(state_dir)).map_err(|e| {
        Fail::environment(format!("create {}: {e}", crate::job::jobs_dir(state_dir)))
    })?;
    let launchers = crate::job::launchers_lock(state_dir);
    let launchers = File::create(&launchers)
        .map_err(|e| Fail::environment(format!("create {launchers}: {e}")))?;

    let ninja = which::which(&args.tools.ninja).ok();
    let format = plan::choose_backend(args.backend, ninja.is_some());
    let mut history = (!args.no_history)
        .then(|| args.history.clone().or_else(crate::history::default_dir))
        .flatten()
        .and_then(|dir| {
            let cwd = std::env::current_dir().ok()?;
            Some(crate::history::History::load(
                &dir,
                &cwd,
                &file.linker_output,
            ))
        });
    let opts = render::Options {
        wrapper,
        source: path.as_str(),
        run: Some(RunHooks {
            state_dir: state_dir.to_string(),
            launcher: vec![exe.to_string(), "__job".to_string(), state_dir.to_string()],
        }),
        order: match args.order {
            crate::cli::Order::Longest => Some(plan::longest_first(&match &history {
                Some(h) => h.estimate(file, input_bytes),
                None => input_bytes.iter().map(|&b| b as f64).collect(),
            })),
            crate::cli::Order::File => None,
        },
    };
    let (format, prepared) = match render::prepare(format, file, &opts) {
        Ok(prepared) => (format, prepared),
        // ninja cannot write every path make can (e.g. '|'); without an explicit choice, use make.
        Err(e) if args.backend.is_none() && format == Format::Ninja => {
            let prepared = render::prepare(Format::Make, file, &opts)
                .map_err(|e2| Fail::bad_input(format!("render build file: {e}; and {e2}")))?;
            (Format::Make, prepared)
        }
        Err(e) => {
            return Err(Fail::bad_input(format!(
                "render {}: {e}",
                format.file_name()
            )))
        }
    };
    let build_file = state_dir.join(format.file_name());
    File::create(&build_file)
        .and_then(|mut f| prepared.write_to(&mut f))
        .map_err(|e| Fail::environment(format!("write {build_file}: {e}")))?;
    drop(prepared);

    let program = match (format, ninja) {
        (Format::Ninja, Some(found)) => found,
        (Format::Ninja, None) => {
            which::which(&args.tools.ninja).map_err(|e| missing(&args.tools.ninja, e))?
        }
        (Format::Make, _) => {
            which::which(&args.tools.make).map_err(|e| missing(&args.tools.make, e))?
        }
    };
    let parallelism = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1);
    let pool_dir = args
        .host_pool
        .clone()
        .unwrap_or_else(slots::default_pool_dir);
    let decision = slots::decide(
        jobserver,
        &slots::Request {
            explicit_jobs: args.jobs.map(|j| j as usize),
            parallelism,
            host_slots: args.host_slots.unwrap_or(parallelism),
            pool_dir: &pool_dir,
            state_dir,
            job_count: file.jobs.len(),
        },
    );
    for w in &decision.warnings {
        report::warning(w);
    }
    if let Some(w) = crate::wrapper::known_local(wrapper) {
        report::warning(&w);
    }
    let mut cmd = Command::new(&program);
    cmd.args([
        "-f",
        build_file.as_str(),
        "-j",
        &decision.build_jobs.to_string(),
    ]);
    if format == Format::Make {
        // -B: every job runs, even where an output of the same name is already there.
        cmd.args(["-B", "-r", "-R", "-s", "--no-print-directory"]);
    }
    decision.configure(&mut cmd);
    cmd.env(
        crate::job::NO_FALLBACK_ENV,
        if args.no_fallback { "1" } else { "0" },
    );
    // Its own process group, so a signal reaches the tool and every job through `watch`.
    cmd.process_group(0);
    let log_path = state_dir.join("tool.log");
    let log = File::create(&log_path)
        .map_err(|e| Fail::environment(format!("create {log_path}: {e}")))?;
    let log2 = log
        .try_clone()
        .map_err(|e| Fail::environment(format!("open {log_path}: {e}")))?;
    let started = crate::job::now();
    let progress = crate::progress::Progress::start(
        state_dir,
        file.jobs.len(),
        !args.quiet && std::io::stderr().is_terminal(),
    );
    let status = cmd
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .spawn()
        .and_then(|mut child| {
            watch.forward_to(-(child.id() as i32));
            child.wait()
        });
    progress.finish();
    let status =
        status.map_err(|e| Fail::environment(format!("run {}: {e}", program.display())))?;
    drop(decision);

    let cwd = Path::new(".");
    let signal = watch.received();
    if signal.is_some() {
        // ninja may exit before the jobs it signalled: wait (a while) for the last launcher.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while launchers.try_lock().is_err() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    let outcomes = verify::check(file, state_dir, cwd);
    if let Some(sig) = signal {
        verify::remove_failed_outputs(file, &outcomes, cwd);
        return Err(Fail::new(
            cancel::exit_code(sig),
            format!("run backend jobs: interrupted by signal {sig}"),
        ));
    }
    let record = record::build(&record::RunInfo {
        file,
        wrapper,
        outcomes: &outcomes,
        input_bytes,
        backend: format.tool(),
        start: started,
        end: crate::job::now(),
    });
    write_records(args, &record)?;
    if status.success() && outcomes.iter().all(verify::Outcome::ok) {
        report::job_warnings(file, &outcomes);
        report::fallbacks(file, &outcomes);
        if let Some(h) = &mut history {
            let seconds: Vec<Option<f64>> = record.jobs.iter().map(|j| j.seconds).collect();
            if let Err(e) = h.record(file, &seconds) {
                report::warning(&format!("remember job durations: {e}"));
            }
        }
        if !args.quiet {
            eprintln!("dtlto-bridge: {}", record::summary(&record));
        }
        return Ok(());
    }
    verify::remove_failed_outputs(file, &outcomes, cwd);
    let tool_log = fs::read_to_string(&log_path).unwrap_or_default();
    let tool_status = (!status.success()).then(|| status.to_string());
    let fail = report::failures(
        file,
        wrapper,
        &outcomes,
        format.tool(),
        tool_status,
        &tool_log,
    );
    Err(fail)
}

fn missing(program: &str, e: which::Error) -> Fail {
    Fail::environment(format!(
        "find {program}: {e} (install it, or choose the other backend with --backend)"
    ))
}

/// Writes the `--report` and `--trace` files, if asked for.
fn write_records(args: &RunArgs, record: &record::Record) -> Result<(), Fail> {
    let write = |path: &Utf8Path, value: serde_json::Value| {
        let text = serde_json::to_string_pretty(&value).expect("JSON values serialize");
        fs::write(path, text + "\n").map_err(|e| Fail::environment(format!("write {path}: {e}")))
    };
    if let Some(path) = &args.report {
        write(
            path,
            serde_json::to_value(record).expect("records serialize"),
        )?;
    }
    if let Some(path) = &args.trace {
        write(path, record::trace(record))?;
    }
    Ok(())
}
