//! Build: the third step — the build file of the jobs the cache left, the build tool (or the
//! direct backend's guard), the slot supply, the scheduler's server, the signal handling that
//! cancels through the launchers, and the progress line.
//!
//! It knows how those parts are started and joined for one link; what each does is `local`'s.

use super::connect::Remoting;
use super::prepare::Prepared;
use super::tool::{tool_command, write_build_file};
use crate::job::outcome::{self, RemoteEnd};
use crate::job::validate;
use crate::local::guard::Guard;
use crate::local::process::{self, Watch};
use crate::local::sched::Policy;
use crate::local::server::{DirectSetup, RemoteLane, Server, Setup};
use crate::local::slots::{Source, Supply};
use crate::report::{self, Fail};
use std::io::IsTerminal;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

/// Launchers started beyond the slots a link can use, so that the scheduler has a choice of
/// ready jobs when a slot frees.
const WAITING: usize = 64;
/// How long settling waits for launchers to go after the build tool is gone.
pub(super) const LAUNCHERS_GONE: Duration = Duration::from_secs(5);
/// How long the build tool has to stop by itself after a cancelling signal.
const TOOL_STOPS: Duration = Duration::from_secs(5);

/// What `build` leaves for `settle`: the server and the build tool's end, when jobs were left
/// to run; else the remote side, still to finish.
pub(super) struct Built {
    pub server: Option<Server>,
    /// The guard of a run that started its jobs itself.
    pub guard: Option<Arc<Guard>>,
    pub remote: Option<crate::remote::Remote>,
    pub tool: Option<Result<ExitStatus, String>>,
    pub start: f64,
    pub end: f64,
}

/// Runs the jobs the lookup left (`hits` are done) through the build tool, if any are left and
/// no signal came.
pub(super) fn build(
    p: &mut Prepared<'_>,
    remoting: Remoting,
    hits: &[Option<RemoteEnd>],
    start: f64,
    watch: &Watch,
) -> Result<Built, Fail> {
    let hit = |i: usize| hits.get(i).is_some_and(Option::is_some);
    let order: Vec<usize> = validate::longest_first(&p.cost)
        .into_iter()
        .filter(|&i| !hit(i))
        .collect();
    if order.is_empty() || watch.received().is_some() {
        return Ok(Built {
            server: None,
            guard: None,
            remote: remoting.remote,
            tool: None,
            start,
            end: outcome::now(),
        });
    }
    let tool = write_build_file(p.options, p.path, &p.file, &p.wrapper, order.clone())?;
    let build = tool.build.clone();
    let (state_dir, log_path) = (tool.state.path().to_owned(), tool.state.tool_log());
    p.tool = Some(tool);
    let away = Away {
        hosts: super::hosts::start(p, &state_dir, &order),
        remoting,
    };
    tell_once(p);
    let n = order.len();
    let tool_jobs = n
        .min(local_bound(&p.decision.source) + away.slots() + WAITING)
        .max(1);
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
    let guard = match build {
        Some(_) => None,
        None => Some(start_guard(&p.decision.source, &state_dir)?),
    };
    let expected = if build.is_some() { tool_jobs } else { n };
    let server = start_server(p, away, state_dir, guard.clone(), order, expected, watch)?;
    cancel_on_signal(watch, &server, build.is_none());
    let progress = crate::local::progress::Progress::start(
        n,
        !p.options.quiet && std::io::stderr().is_terminal(),
        server.counter(),
    );
    let tool = match (command, &build) {
        (Some(cmd), Some((_, program))) => Some(run_tool(cmd, program, watch)),
        _ => {
            server.wait_for_jobs();
            None
        }
    };
    progress.finish();
    Ok(Built {
        server: Some(server),
        guard,
        remote: None,
        tool,
        start,
        end: outcome::now(),
    })
}

/// Where jobs run without a local slot: the remote server, the wrapper's hosts.
struct Away {
    remoting: Remoting,
    hosts: Option<super::hosts::Hosts>,
}

impl Away {
    /// How many jobs may be away at once.
    fn slots(&self) -> usize {
        self.remoting.jobs + self.hosts.as_ref().map_or(0, |h| h.slots)
    }
}

/// The most jobs this machine may run at once from `source`, as far as the run knows: a
/// jobserver's are not known, and WAITING stands for them.
fn local_bound(source: &Source) -> usize {
    match source {
        Source::Fixed(k) => *k,
        Source::Pool(pool) => pool.size(),
        Source::Jobserver(_) => WAITING,
    }
}

/// What is said once before the jobs start: where slots come from, advice, a wrapper that runs
/// everything here.
fn tell_once(p: &Prepared<'_>) {
    for w in &p.decision.warnings {
        report::warning(w);
    }
    if !p.options.quiet && !p.decision.advice.is_empty() {
        let dir = crate::local::pool::user_dir(&p.pool_base).ok();
        for advice in &p.decision.advice {
            crate::report::advice::once(dir.as_deref(), advice);
        }
    }
    if let Some(w) = crate::job::wrapper::known_local(&p.wrapper) {
        report::warning(&w);
    }
}

/// Without a build tool, the run's guard does what launchers do should the run be killed.
fn start_guard(source: &Source, state_dir: &camino::Utf8Path) -> Result<Arc<Guard>, Fail> {
    let client = match source {
        Source::Jobserver(client) => Some(client),
        _ => None,
    };
    let exe = process::own_exe().map_err(Fail::environment)?;
    let guard = Guard::start(&exe, state_dir.as_str(), client).map_err(|e| {
        Fail::environment(format!(
            "start the guard of --backend direct: {e}; use --backend ninja or make"
        ))
    })?;
    Ok(Arc::new(guard))
}

/// Starts taking slots and the scheduler's server for the jobs of `order`, `expected` of
/// them launched at once (by the build tool, or by the run itself when there is a guard).
fn start_server(
    p: &mut Prepared<'_>,
    Away { remoting, hosts }: Away,
    state_dir: camino::Utf8PathBuf,
    guard: Option<Arc<Guard>>,
    order: Vec<usize>,
    expected: usize,
    watch: &Watch,
) -> Result<Server, Fail> {
    let (tx, rx) = std::sync::mpsc::channel();
    // The supply owns the source from now on: the pool is left when the supply stops.
    let source = std::mem::replace(&mut p.decision.source, Source::Fixed(0));
    let (supply, own) = Supply::start(source, tx)
        .map_err(|e| Fail::environment(format!("start taking job slots: {e}")))?;
    let direct = guard.is_some();
    let setup = Setup {
        file: p.file.clone(),
        wrapper: p.wrapper.clone(),
        cost: p.cost.clone(),
        policy: Policy {
            wrapped: !p.wrapper.is_empty(),
            fallback: !p.wrapper.is_empty() && p.options.fallback,
            expected,
            own,
            can_grow: supply.can_grow(),
            remote: remoting.ok,
            remote_jobs: remoting.jobs,
            remote_fallback: p.options.fallback,
            hosts: hosts.as_ref().map_or(0, |h| h.slots),
            stop_after_failure: direct,
        },
        state_dir,
        cwd: p.cwd.clone(),
        parallelism: p.parallelism,
        remote: remoting.remote.map(|r| Box::new(r) as Box<dyn RemoteLane>),
        send: hosts.map(|h| h.exe),
        direct: guard.map(|guard| DirectSetup {
            jobs: order,
            watch: watch.clone(),
            guard,
        }),
    };
    Server::start(setup, supply, rx)
        .map_err(|e| Fail::environment(format!("listen for job launchers: {e}")))
}

/// A signal cancels through the launchers: each stops its job and exits non-zero, and the
/// build tool stops as for a failed job. Signalled itself, ninja or make would remove the
/// outputs of jobs that finished but whose launchers had not exited yet. Only a tool that is
/// still there after a while gets SIGTERM. Without a tool (direct), the run stops the jobs
/// itself, and one still there after a while gets SIGKILL.
fn cancel_on_signal(watch: &Watch, server: &Server, direct: bool) {
    let cancel = server.canceller();
    let escalate = watch.clone();
    watch.on_signal(move |sig| {
        cancel(sig);
        let watch = escalate.clone();
        std::thread::spawn(move || {
            std::thread::sleep(TOOL_STOPS);
            // Without a build tool, what is still there is a job that ignored the signal.
            watch.signal_all(if direct { libc::SIGKILL } else { libc::SIGTERM });
        });
    });
}

/// Runs the build tool in a process group of its own, to its end.
fn run_tool(
    mut cmd: std::process::Command,
    program: &std::path::Path,
    watch: &Watch,
) -> Result<ExitStatus, String> {
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
    .map_err(|e| format!("run {}: {e}", program.display()))
}
