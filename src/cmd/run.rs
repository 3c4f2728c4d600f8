//! Run: carries out one link's jobs in five steps: prepare (load and check the job file, decide
//! where slots come from), look up (with `--remote`, the action cache answers what it can before
//! anything starts, and the hits' outputs are written), execute (the build file of the jobs left
//! is written into a private directory, and the scheduler serves the launchers the build tool
//! starts, or with `direct` starts the jobs itself; nothing starts when no job is left), settle
//! (every launcher gone, outputs checked, the traces of unfinished jobs removed), conclude
//! (failures first, then the records, the history and the summary).
//!
//! It knows the order of those steps; the backend is `tool`'s, and the details of each step
//! live in `job`, `render`, `remote`, `exec` (the scheduler and its server) and `report`.

use super::tool::{tool_command, write_build_file, Tool};
use crate::cli::RunArgs;
use crate::exec::dir;
use crate::exec::guard::Guard;
use crate::exec::process::{self, Watch};
use crate::exec::sched::{Policy, Record};
use crate::exec::server::{self, DirectSetup, Server, Setup};
use crate::exec::slots::{self, Source, Supply};
use crate::fsutil::write_atomically;
use crate::job::check;
use crate::job::outcome::{self, Outcome, Ran};
use crate::job::output;
use crate::job::parse::{self, JobFile};
use crate::report::history::History;
use crate::report::record;
use crate::report::{self, Fail};
use camino::{Utf8Path, Utf8PathBuf};
use std::fs;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

/// Launchers started beyond the slots a link can use, so that the scheduler has a choice of
/// ready jobs when a slot frees.
const WAITING: usize = 64;
/// How long settling waits for launchers to go after the build tool is gone.
const LAUNCHERS_GONE: Duration = Duration::from_secs(5);
/// How long the build tool has to stop by itself after a cancelling signal.
const TOOL_STOPS: Duration = Duration::from_secs(5);

/// Reads a job file; its text stays for the life of the process (the jobs borrow from it, and
/// a run's threads use them to the end).
fn read(path: &Utf8Path) -> Result<&'static str, Fail> {
    let text = fs::read_to_string(path)
        .map_err(|e| Fail::bad_input(format!("read job file {path}: {e}")))?;
    Ok(Box::leak(text.into_boxed_str()))
}

/// Reads and parses a job file.
pub(super) fn parse_file(path: &Utf8Path) -> Result<JobFile<'static>, Fail> {
    let text = read(path)?;
    parse::parse(text).map_err(|e| Fail::bad_input(format!("parse job file {path}: {e}")))
}

pub(super) fn cwd() -> Result<(PathBuf, String), Fail> {
    let dir = std::env::current_dir()
        .map_err(|e| Fail::environment(format!("find the current directory: {e}")))?;
    let text = dir.to_string_lossy().into_owned();
    Ok((dir, text))
}

pub(super) fn wrapper(arg: &crate::cli::WrapperArg) -> Result<Vec<String>, Fail> {
    arg.words().map_err(Fail::bad_input)
}

/// The missing inputs of a job file, `count` of them, the `shown` ones one line each, or None
/// when all exist.
pub(super) fn missing_list(
    file: &JobFile<'_>,
    count: usize,
    shown: &[(usize, String)],
) -> Option<String> {
    if count == 0 {
        return None;
    }
    let mut list: Vec<String> = shown
        .iter()
        .map(|(i, p)| format!("  jobs[{i}] ({}): {p:?}", file.jobs[*i].outputs[0]))
        .collect();
    if count > shown.len() {
        list.push(format!("  ... and {} more", count - shown.len()));
    }
    Some(format!(
        "{count} input file(s) do not exist:\n{}",
        list.join("\n")
    ))
}

/// Everything a link needs before anything runs.
struct Prepared<'a> {
    args: &'a RunArgs,
    file: Arc<JobFile<'static>>,
    wrapper: Vec<String>,
    input_bytes: Vec<u64>,
    /// What the look at the inputs found (remote links only).
    seen: check::Seen,
    cost: Vec<f64>,
    history: Option<History>,
    /// The build tool and its file, once written (never, when no job is left to run).
    tool: Option<Tool>,
    cwd: PathBuf,
    decision: slots::Decision,
    pool_base: Utf8PathBuf,
    parallelism: usize,
    remote: Option<crate::remote::Options>,
    /// The compiler's identity, asked early (remote links only).
    identity: Option<crate::remote::Asked>,
}

/// The default run: everything from the job file to verified outputs.
pub fn run(args: &RunArgs, jobserver: jobserver::FromEnv, watch: &Watch) -> Result<(), Fail> {
    let path = args
        .job_file
        .as_deref()
        .expect("clap requires the job file");
    // The directory first: failing to find it is the environment's fault, not the file's.
    let (dir, _) = cwd()?;
    run_file(args, dir, parse_file(path)?, jobserver, watch)
}

/// Runs the jobs of `file`, which `args.job_file` holds (read from it, or built in memory and
/// written there for `--keep` and `--save`), in the linker's directory `cwd`.
pub fn run_file(
    args: &RunArgs,
    cwd: PathBuf,
    file: JobFile<'static>,
    jobserver: jobserver::FromEnv,
    watch: &Watch,
) -> Result<(), Fail> {
    let Some(mut prepared) = prepare(args, cwd, file, jobserver)? else {
        return Ok(());
    };
    let start = outcome::now();
    let remote = start_remote(&mut prepared);
    let hits = look_up(&remote, watch);
    let executed = match execute(&mut prepared, remote, &hits, start, watch) {
        Ok(executed) => executed,
        Err(fail) => {
            // No build tool for the misses: the hits' outputs go too, as a failed link's.
            for (index, _) in hits.iter().enumerate().filter(|(_, h)| h.is_some()) {
                output::remove(&prepared.cwd, &prepared.file.jobs[index].outputs);
            }
            return Err(fail);
        }
    };
    let settled = settle(&prepared, executed, hits, watch);
    conclude(prepared, settled, watch)
}

fn prepare<'a>(
    args: &'a RunArgs,
    cwd: PathBuf,
    mut file: JobFile<'static>,
    jobserver: jobserver::FromEnv,
) -> Result<Option<Prepared<'a>>, Fail> {
    let path = args
        .job_file
        .as_deref()
        .expect("clap requires the job file");
    check::check(&file, &cwd.to_string_lossy())
        .map_err(|e| Fail::bad_input(format!("check job file {path}: {e}")))?;
    let wrapper = wrapper(&args.wrapper)?;
    let mut remote = args.remote.options().map_err(Fail::bad_input)?;
    if let (Some(options), Some(dir)) = (&mut remote, history_dir(args)) {
        let name = crate::report::history::stem(&cwd, &file.linker_output);
        let digests = crate::report::history::DIGESTS;
        options.memo = Some(dir.join(format!("{name}.{digests}")).into());
    }
    let identity = (remote.is_some() && !file.jobs.is_empty())
        .then(|| crate::remote::Asked::start(&file, history_dir(args).map(Into::into)));
    if let Some(why) = remote.as_ref().and_then(|o| o.disk_unused()) {
        report::warning(&format!("--remote-disk-cache is not used: {why}"));
    }
    let inputs = check::stat_inputs(&file, &cwd, remote.is_some());
    if let Some(list) = missing_list(&file, inputs.missing.len(), &inputs.missing) {
        return Err(Fail::bad_input(format!("check inputs of {path}: {list}")));
    }
    if let Some(line) = crate::job::relocation::follow_modules(&mut file, &cwd) {
        report::note(&line);
    }
    if let Some(dir) = &args.save {
        save(dir, path, &file, &cwd)?;
    }
    if file.jobs.is_empty() {
        // Every job came from lld's ThinLTO cache: a link through dtlto-bridge all the same.
        log_empty(args, &file, &wrapper);
        return Ok(None);
    }
    dir::remove_dead(&std::env::temp_dir());
    let (history, cost) = costs(args, &file, &cwd, &inputs.bytes);
    let parallelism = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1);
    let pool_base = crate::exec::pool::base_dir(args.host_pool.as_deref());
    let decision = slots::decide(
        jobserver,
        &slots::Request {
            explicit_jobs: args.jobs.map(|j| {
                (
                    j as usize,
                    args.origins.describe("jobs", "-j", &j.to_string()),
                )
            }),
            parallelism,
            host_slots: args.host_slots.unwrap_or(parallelism),
            pool_base: &pool_base,
        },
    );
    Ok(Some(Prepared {
        args,
        file: Arc::new(file),
        wrapper,
        input_bytes: inputs.bytes,
        seen: inputs.seen,
        cost,
        history,
        tool: None,
        cwd,
        decision,
        pool_base,
        parallelism,
        remote,
        identity,
    }))
}

/// `--save DIR`: the job file and every input its jobs read, to run them again later.
fn save(
    dir: &Utf8Path,
    path: &Utf8Path,
    file: &JobFile<'_>,
    cwd: &std::path::Path,
) -> Result<(), Fail> {
    let saved = crate::cmd::capture::save(dir, path, file, cwd)
        .map_err(|e| Fail::environment(format!("save the link in {dir}: {e}")))?;
    let how = if saved.copied > 0 {
        format!("{} copied", saved.copied)
    } else {
        "hard links".to_string()
    };
    report::note(&format!(
        "saved {} and its jobs' {} input file(s) ({:.1} MB, {how}) in {}; run the jobs again \
         from there: dtlto-bridge emit --format ninja {} -o jobs.ninja && ninja -f jobs.ninja",
        path,
        saved.files - 1,
        saved.bytes as f64 / 1e6,
        saved.run_dir,
        crate::render::escape::shell_word(saved.job_file.file_name().unwrap_or("")),
    ));
    Ok(())
}

/// The record of a link whose every job came from lld's cache.
fn log_empty(args: &RunArgs, file: &JobFile<'_>, wrapper: &[String]) {
    let empty = record::build(&record::RunInfo {
        file,
        wrapper,
        outcomes: &[],
        input_bytes: &[],
        backend: "none",
        start: outcome::now(),
        end: outcome::now(),
    });
    log(args, &empty, true);
}

/// Where links are remembered (`--history`), unless that is turned off.
fn history_dir(args: &RunArgs) -> Option<Utf8PathBuf> {
    (!args.no_history)
        .then(|| {
            args.history
                .clone()
                .or_else(crate::report::history::default_dir)
        })
        .flatten()
}

/// The remembered history (unless turned off) and each job's expected cost, by `--order`.
fn costs(
    args: &RunArgs,
    file: &JobFile<'_>,
    cwd: &std::path::Path,
    bytes: &[u64],
) -> (Option<History>, Vec<f64>) {
    let history = history_dir(args).map(|dir| History::load(&dir, cwd, &file.linker_output));
    let cost = match args.order {
        crate::cli::Order::Longest => match &history {
            Some(h) => h.estimate(file, bytes),
            None => bytes.iter().map(|&b| b as f64).collect(),
        },
        // Earlier jobs cost more, so they go first.
        crate::cli::Order::File => (0..file.jobs.len()).map(|i| -(i as f64)).collect(),
    };
    (history, cost)
}

/// The link's remote side: the connection, which jobs may go there, and how many at once.
struct Remoting {
    remote: Option<crate::remote::Remote>,
    ok: Vec<bool>,
    jobs: usize,
}

/// Connects to the remote server, if one is named: the connection, and which jobs may go there.
/// A server that cannot be used is one warning, and every job runs here.
fn start_remote(p: &mut Prepared<'_>) -> Remoting {
    let none = || Remoting {
        remote: None,
        ok: Vec::new(),
        jobs: 0,
    };
    let (Some(options), Some(identity)) = (&p.remote, p.identity.take()) else {
        return none();
    };
    let seen = std::mem::take(&mut p.seen);
    match crate::remote::Remote::start(options, &p.file, &p.cwd, identity, &seen) {
        Ok((remote, why)) => {
            let here: Vec<(usize, &String)> = why
                .iter()
                .enumerate()
                .filter_map(|(i, w)| w.as_ref().map(|w| (i, w)))
                .collect();
            if let Some((i, reason)) = here.first() {
                report::note(&format!(
                    "{} job(s) run here, not remotely; job {i} ({}): {reason}",
                    here.len(),
                    p.file.jobs[*i].outputs[0]
                ));
            }
            Remoting {
                remote: Some(remote),
                ok: why.iter().map(Option::is_none).collect(),
                jobs: options.jobs,
            }
        }
        Err(e) => {
            report::warning(&format!("remote: {e}; every job runs here"));
            none()
        }
    }
}

/// Each job's end when the action cache had it (its outputs written and verified), looked up
/// before anything starts; empty without a server. A signal stops the lookup.
fn look_up(remoting: &Remoting, watch: &Watch) -> Vec<Option<crate::remote::End>> {
    let Some(remote) = &remoting.remote else {
        return Vec::new();
    };
    let stop = remote.stopper();
    watch.on_signal(move |_| stop());
    if watch.received().is_some() {
        return Vec::new();
    }
    remote.look_up()
}

/// What `execute` leaves for `settle`: the server and the build tool's end, when jobs were left
/// to run; else the remote side, still to finish.
struct Executed {
    server: Option<Server>,
    /// The guard of a run that started its jobs itself.
    guard: Option<Arc<Guard>>,
    remote: Option<crate::remote::Remote>,
    tool: Option<Result<ExitStatus, String>>,
    start: f64,
    end: f64,
}

/// Runs the jobs the lookup left (`hits` are done) through the build tool, if any are left and
/// no signal came.
fn execute(
    p: &mut Prepared<'_>,
    remoting: Remoting,
    hits: &[Option<crate::remote::End>],
    start: f64,
    watch: &Watch,
) -> Result<Executed, Fail> {
    let hit = |i: usize| hits.get(i).is_some_and(Option::is_some);
    let order: Vec<usize> = check::longest_first(&p.cost)
        .into_iter()
        .filter(|&i| !hit(i))
        .collect();
    if order.is_empty() || watch.received().is_some() {
        return Ok(Executed {
            server: None,
            guard: None,
            remote: remoting.remote,
            tool: None,
            start,
            end: outcome::now(),
        });
    }
    let tool = write_build_file(p.args, &p.file, &p.wrapper, order.clone())?;
    let build = tool.build.clone();
    let (state_dir, log_path) = (tool.state.path().to_owned(), tool.state.tool_log());
    p.tool = Some(tool);
    for w in &p.decision.warnings {
        report::warning(w);
    }
    if !p.args.quiet && !p.decision.advice.is_empty() {
        let dir = crate::exec::pool::user_dir(&p.pool_base).ok();
        for advice in &p.decision.advice {
            crate::report::advice::once(dir.as_deref(), advice);
        }
    }
    if let Some(w) = crate::job::wrapper::known_local(&p.wrapper) {
        report::warning(&w);
    }
    let n = order.len();
    let local_bound = match &p.decision.source {
        Source::Fixed(k) => *k,
        Source::Pool(pool) => pool.size(),
        Source::Jobserver(_) => WAITING,
    };
    let Remoting {
        remote,
        ok: remote_ok,
        jobs: remote_jobs,
    } = remoting;
    let tool_jobs = n.min(local_bound + remote_jobs + WAITING).max(1);
    let command = match &build {
        Some((format, program)) => Some(tool_command(
            *format,
            program,
            &state_dir,
            &log_path,
            tool_jobs,
            &p.decision.source,
        )?),
        None => None,
    };
    // Without a build tool, the run's guard does what launchers do should the run be killed.
    let guard = match (&build, &p.decision.source) {
        (Some(_), _) => None,
        (None, source) => {
            let client = match source {
                Source::Jobserver(client) => Some(client),
                _ => None,
            };
            let guard = Guard::start(&own_exe()?, state_dir.as_str(), client).map_err(|e| {
                Fail::environment(format!(
                    "start the guard of --backend direct: {e}; use --backend ninja or make"
                ))
            })?;
            Some(Arc::new(guard))
        }
    };

    let (tx, rx) = std::sync::mpsc::channel();
    // The supply owns the source from now on: the pool is left when the supply stops.
    let source = std::mem::replace(&mut p.decision.source, Source::Fixed(0));
    let (supply, own) = Supply::start(source, tx)
        .map_err(|e| Fail::environment(format!("start taking job slots: {e}")))?;
    let can_grow = supply.can_grow();
    let setup = Setup {
        file: p.file.clone(),
        wrapper: p.wrapper.clone(),
        cost: p.cost.clone(),
        policy: Policy {
            wrapped: !p.wrapper.is_empty(),
            fallback: !p.wrapper.is_empty() && !p.args.no_fallback,
            expected: if build.is_some() { tool_jobs } else { n },
            own,
            can_grow,
            remote: remote_ok,
            remote_jobs,
            remote_fallback: !p.args.no_fallback,
            stop_after_failure: build.is_none(),
        },
        state_dir,
        cwd: p.cwd.clone(),
        parallelism: p.parallelism,
        remote,
        direct: guard.clone().map(|guard| DirectSetup {
            jobs: order,
            watch: watch.clone(),
            guard,
        }),
    };
    let server = Server::start(setup, supply, rx)
        .map_err(|e| Fail::environment(format!("listen for job launchers: {e}")))?;
    // A signal cancels through the launchers: each stops its job and exits non-zero, and the
    // build tool stops as for a failed job. Signalled itself, ninja or make would remove the
    // outputs of jobs that finished but whose launchers had not exited yet. Only a tool that
    // is still there after a while gets SIGTERM. Without a tool (direct), the run stops the jobs
    // itself, and one still there after a while gets SIGKILL.
    let cancel = server.canceller();
    let escalate = watch.clone();
    let direct = build.is_none();
    watch.on_signal(move |sig| {
        cancel(sig);
        let watch = escalate.clone();
        std::thread::spawn(move || {
            std::thread::sleep(TOOL_STOPS);
            // Without a build tool, what is still there is a job that ignored the signal.
            watch.signal_all(if direct { libc::SIGKILL } else { libc::SIGTERM });
        });
    });

    let progress = crate::exec::progress::Progress::start(
        n,
        !p.args.quiet && std::io::stderr().is_terminal(),
        server.counter(),
    );
    let tool = match (command, &build) {
        (Some(mut cmd), Some((_, program))) => Some(
            process::spawn(
                &mut cmd,
                watch,
                &process::Options {
                    group: true,
                    parent_death: Some(libc::SIGTERM),
                    forward: false,
                },
            )
            .and_then(|child| child.wait(watch))
            .map_err(|e| format!("run {}: {e}", program.display())),
        ),
        _ => {
            server.wait_for_jobs();
            None
        }
    };
    progress.finish();
    Ok(Executed {
        server: Some(server),
        guard,
        remote: None,
        tool,
        start,
        end: outcome::now(),
    })
}

/// What `settle` leaves for `conclude`.
struct Settled {
    outcomes: Vec<Outcome>,
    warnings: Vec<String>,
    remote: Option<crate::job::outcome::RemoteTotals>,
    /// How the build tool ended; None when none ran.
    tool: Option<Result<ExitStatus, String>>,
    signal: Option<i32>,
    start: f64,
    end: f64,
}

fn settle(
    p: &Prepared<'_>,
    executed: Executed,
    hits: Vec<Option<crate::remote::End>>,
    watch: &Watch,
) -> Settled {
    let Executed {
        server,
        guard,
        remote,
        tool,
        start,
        end,
    } = executed;
    let server::Finished {
        mut records,
        mut warnings,
        remote,
    } = match server {
        Some(server) => {
            // The build tool is gone; its launchers should be too. Those that linger are stopped.
            if !server.wait_for_launchers(LAUNCHERS_GONE) {
                server.cancel(watch.received().unwrap_or(libc::SIGTERM));
                server.wait_for_launchers(LAUNCHERS_GONE);
            }
            server.finish()
        }
        None => {
            let (totals, warnings) = remote.map(crate::remote::Remote::finish).unzip();
            server::Finished {
                records: vec![Record::default(); p.file.jobs.len()],
                warnings: warnings.unwrap_or_default(),
                remote: totals,
            }
        }
    };
    for (index, end) in hits.into_iter().enumerate() {
        if let Some(end) = end {
            records[index] = Record::from_cache(end);
        }
    }
    let dir = p.tool.as_ref().map(|t| t.state.path());
    let read = |index: usize, attempt: usize| {
        dir.and_then(|dir| fs::read(dir::stderr_file(dir, index, attempt)).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let outcomes: Vec<Outcome> = records
        .iter()
        .enumerate()
        .map(|(index, r)| {
            let last = r.attempts.last().filter(|_| r.finished);
            Outcome {
                index,
                start: r.attempts.first().map(|a| a.status.start),
                ran: r.ran(),
                fallback: r.fallback(|| read(index, 0)),
                stderr: if r.attempts.is_empty() {
                    String::new()
                } else {
                    read(index, r.attempts.len() - 1)
                },
                status: last.map(|a| a.status.clone()),
                problem: last.and_then(|a| a.problem.clone()),
                remote: r.attempts.first().and_then(|a| a.remote.clone()),
            }
        })
        .collect();
    // Only jobs that did not finish well lose their outputs: with --save-temps, lld keeps the
    // objects of the jobs that did, even in a cancelled link.
    for o in outcomes.iter().filter(|o| !o.ok()) {
        output::remove(&p.cwd, &p.file.jobs[o.index].outputs);
    }
    if let Some(lost) = guard.and_then(|g| g.finish()) {
        warnings.push(format!(
            "the run's guard went away ({lost}): had dtlto-bridge been killed, its jobs would \
             have been left running"
        ));
    }
    Settled {
        outcomes,
        warnings,
        remote,
        tool,
        signal: watch.received(),
        start,
        end,
    }
}

/// Says, for each job that the server executed (not from its action cache), why
/// (`RemoteInfo::miss`).
fn explain_misses(
    args: &RunArgs,
    history: Option<&History>,
    file: &JobFile<'_>,
    outcomes: &mut [Outcome],
) {
    for o in outcomes.iter_mut().filter(|o| o.ran == Ran::Remote) {
        let Some(r) = o.remote.as_mut() else { continue };
        let plain = |why: &str| (why.to_string(), why.to_string());
        let (why, kind) = match history {
            _ if args.remote.remote_no_cache => {
                plain("the action cache is off (--remote-no-cache)")
            }
            Some(h) => {
                let miss = h.why_missed(file, o.index, &r.ingredients);
                (miss.reason, miss.kind)
            }
            None => plain("no history to compare with"),
        };
        (r.miss, r.miss_kind) = match r.key.strip_prefix("names: ") {
            Some(names) => (
                Some(format!("keyed by names ({names}); {why}")),
                Some(format!("keyed by names; {kind}")),
            ),
            None => (Some(why), Some(kind)),
        };
    }
}

fn conclude(p: Prepared<'_>, mut s: Settled, watch: &Watch) -> Result<(), Fail> {
    let Prepared {
        args,
        file,
        wrapper,
        input_bytes,
        mut history,
        tool,
        ..
    } = p;
    for w in &s.warnings {
        report::warning(w);
    }
    explain_misses(args, history.as_ref(), &file, &mut s.outcomes);
    let record = record::build(&record::RunInfo {
        file: &file,
        wrapper: &wrapper,
        outcomes: &s.outcomes,
        input_bytes: &input_bytes,
        backend: tool.as_ref().map_or("none", Tool::name),
        start: s.start,
        end: s.end,
    });
    let record = record::Record {
        remote: s.remote.clone(),
        ..record
    };
    let tool_ok = match &s.tool {
        Some(Ok(status)) => status.success(),
        Some(Err(_)) => false,
        None => true,
    };
    let all_ok = s.outcomes.iter().all(Outcome::ok);
    let signal = s.signal.or_else(|| watch.received());
    let result = if let Some(sig) = signal {
        Err(Fail::new(
            process::exit_code(sig),
            format!("run backend jobs: interrupted by signal {sig}"),
        ))
    } else if tool_ok && all_ok {
        report::job_warnings(&file, &s.outcomes);
        report::fallbacks(&file, &s.outcomes);
        if let Some(h) = &mut history {
            // A job from the action cache took no time of its own to remember.
            let seconds: Vec<Option<f64>> = (record.jobs.iter().zip(&s.outcomes))
                .map(|(j, o)| j.seconds.filter(|_| o.ran != Ran::RemoteCache))
                .collect();
            // What went into each action the server now holds (ran there with the cache on,
            // or came from it).
            let cached = !args.remote.remote_no_cache;
            let actions: Vec<_> = s
                .outcomes
                .iter()
                .map(|o| match o.ran {
                    Ran::Remote if cached => o.remote.as_ref().map(|r| &*r.ingredients),
                    Ran::RemoteCache => o.remote.as_ref().map(|r| &*r.ingredients),
                    _ => None,
                })
                .collect();
            if let Err(e) = h.record(&file, &seconds, &actions) {
                report::warning(&format!("write the history: {e}"));
            }
        }
        let show = args.summary || (!args.quiet && std::io::stderr().is_terminal());
        if show && !args.quiet {
            report::note(&record::summary(&record));
        }
        Ok(())
    } else {
        let tool_log = tool
            .as_ref()
            .and_then(|t| fs::read_to_string(t.state.tool_log()).ok())
            .unwrap_or_default();
        let tool_status = match &s.tool {
            Some(Ok(status)) if !status.success() => Some(process::describe(status)),
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        };
        Err(report::failures(
            &file,
            &wrapper,
            &s.outcomes,
            tool.as_ref().map_or("none", Tool::name),
            tool_status,
            &tool_log,
        ))
    };
    // Records come after the failures are printed, and never fail the link.
    write_records(args, &record);
    log(args, &record, result.is_ok());
    match tool {
        Some(tool) if args.keep => report::note(&format!("kept {}", tool.state.keep())),
        None if args.keep && signal.is_none() => {
            report::note("kept nothing: every job came from the action cache, no build file")
        }
        _ => {}
    }
    result
}

/// Appends the link's line to `--log FILE`, if asked for; best effort.
fn log(args: &RunArgs, record: &record::Record, ok: bool) {
    let Some(path) = &args.log else { return };
    let dir = std::env::current_dir().unwrap_or_default();
    if let Err(e) = record::append_line(path, &record::log_line(record, &dir, ok)) {
        report::warning(&format!("append to the log {path}: {e}"));
    }
}

/// Writes the `--report` and `--trace` files, if asked for: whole (concurrent links may share
/// a path), and best effort (a warning when they cannot be written).
fn write_records(args: &RunArgs, record: &record::Record) {
    let write = |what: &str, path: &Utf8Path, value: serde_json::Value| {
        let text = serde_json::to_string_pretty(&value).unwrap_or_default() + "\n";
        if let Err(e) = write_atomically(path, |f| std::io::Write::write_all(f, text.as_bytes())) {
            report::warning(&format!("write the {what} {path}: {e}"));
        }
    };
    let output = &record.linker_output;
    if let Some(path) = &args.report {
        let value = serde_json::to_value(record).unwrap_or_default();
        write("report", &record::path_for(path, output), value);
    }
    if let Some(path) = &args.trace {
        write(
            "trace",
            &record::path_for(path, output),
            record::trace(record),
        );
    }
}

/// This program's own path, for the commands it writes that run it again.
pub fn own_exe() -> Result<String, Fail> {
    let exe = std::env::current_exe()
        .map_err(|e| Fail::environment(format!("find own executable: {e}")))?;
    exe.to_str()
        .map(str::to_string)
        .ok_or_else(|| Fail::environment("find own executable: its path is not UTF-8"))
}
