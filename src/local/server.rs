//! Server: carries out the scheduler's decisions for one link — listens on the private
//! directory's socket for the launchers the build tool starts, takes slots from the `Supply`,
//! writes each launcher its orders (or, with `direct`, has `Direct` start the commands on the
//! deciding thread once it released the run's lock), hands remote jobs to the `RemoteLane` it is given and writes
//! their stderr where a local run's goes, and collects every job's record.
//!
//! It knows sockets, threads and the order of a run's events; it does not decide which job runs
//! next or where (`sched::Core` does), and it starts no process itself (`Direct` does).

use crate::job::files;
use crate::job::outcome::{RemoteEnd as End, RemoteTotals};
use crate::job::parse::JobFile;
use crate::job::util::sync::lock;
use crate::local::direct::Direct;
use crate::local::guard::Guard;
use crate::local::proto::{self, ToLauncher, ToRun};
use crate::local::rundir;
use crate::local::sched::{Core, JobRecord, Policy, Step};
use crate::local::slots::{Arrival, Slot, Supply};
use camino::Utf8PathBuf;
use std::collections::VecDeque;
use std::io::BufReader;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The first grant waits for the launchers the build tool starts at once, so that the costliest
/// of them goes first even when they connect out of order: until all have connected, or none
/// has for `GATHER_QUIET`, and never longer than `GATHER_MAX`. A busy host starts them slowly:
/// 60 ms between two connections was seen with two test threads on two cores, so the quiet
/// wait is longer (it costs nothing when all connect, the usual case).
const GATHER_QUIET: Duration = Duration::from_millis(200);
const GATHER_MAX: Duration = Duration::from_millis(600);

/// What a server needs to run a link's jobs.
pub struct Setup {
    pub file: Arc<JobFile<'static>>,
    pub wrapper: Vec<String>,
    pub cost: Vec<f64>,
    pub policy: Policy,
    /// The private directory: the socket and the jobs' stderr files live there.
    pub state_dir: Utf8PathBuf,
    /// The linker's directory, where outputs are checked.
    pub cwd: PathBuf,
    /// Own slots to use should the supply fail.
    pub parallelism: usize,
    /// The link's connection to a remote server, if jobs go there.
    pub remote: Option<Box<dyn RemoteLane>>,
    /// With `--backend direct`, the run starts the jobs itself and no launcher connects.
    pub direct: Option<DirectSetup>,
    /// Jobs through the wrapper go as bundles: this program, run as `__send SPEC` with the
    /// spec the engine wrote for the job (`rundir::send_spec`).
    pub send: Option<PathBuf>,
}

/// Where the scheduler sends the jobs it decides to run remotely: the engine fills it from
/// `remote`, which this layer does not know.
pub trait RemoteLane: Send + Sync {
    /// Runs job `index` remotely; `reply` gets its end, on another thread.
    fn submit(&self, index: usize, reply: Box<dyn FnOnce(End) + Send>);
    /// Stops every remote job: each still replies.
    fn cancel(&self);
    /// Waits for the remote side to finish: what it sent and fetched, and its warnings.
    fn finish(self: Box<Self>) -> (RemoteTotals, Vec<String>);
}

/// What a run that starts its jobs itself needs.
pub struct DirectSetup {
    /// The jobs to run.
    pub jobs: Vec<usize>,
    pub watch: crate::local::process::Watch,
    pub guard: Arc<Guard>,
}

struct Inner {
    core: Core,
    /// Each job's launcher, once it said hello.
    conns: Vec<Option<Arc<UnixStream>>>,
    /// Connections still open.
    open: usize,
    first_hello: Option<Instant>,
    last_hello: Option<Instant>,
    warnings: Vec<String>,
}

struct Shared {
    inner: Mutex<Inner>,
    closed: Condvar,
    /// Taken out and stopped by `finish`.
    supply: Mutex<Option<Supply>>,
    /// Taken out and finished by `finish`.
    remote: Mutex<Option<Box<dyn RemoteLane>>>,
    setup: Setup,
    /// What starts the commands of a run without launchers.
    direct: OnceLock<Direct>,
    stopping: AtomicBool,
    me: std::sync::Weak<Shared>,
}

/// The run's lock: the core decides and its decisions are carried out under it. The `direct`
/// commands decided under it start once it is released, on the same thread, in decision order:
/// a start lasts until the command has executed its program, and another thread's decision
/// need not wait for it.
struct Locked<'a> {
    shared: &'a Shared,
    /// Some until dropped.
    inner: Option<MutexGuard<'a, Inner>>,
    starts: Vec<(usize, proto::Run)>,
}

impl std::ops::Deref for Locked<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        self.inner.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        self.inner.as_mut().expect("held until dropped")
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.inner.take();
        let Some(direct) = self.shared.direct.get() else {
            return;
        };
        for (index, run) in std::mem::take(&mut self.starts) {
            if let Err(status) = direct.start(index, &run) {
                // As when a command ends: the core hears of it under the lock again.
                self.shared.exited(index, status);
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> Locked<'_> {
        Locked {
            shared: self,
            inner: Some(lock(&self.inner)),
            starts: Vec::new(),
        }
    }

    /// Carries out what the core decided; the lock is held, so orders go out (and `direct`
    /// commands are reserved) in decision order. Nothing here takes `inner` again: a remote job
    /// that cannot be submitted, or a `direct` command that cannot be reserved, is answered by
    /// the core at once, its actions queued behind the others.
    fn apply(&self, inner: &mut Locked<'_>, actions: Vec<Step>) {
        let supply = lock(&self.supply);
        let tokens = supply.as_ref().is_some_and(Supply::tokens);
        let mut queue = VecDeque::from(actions);
        while let Some(action) = queue.pop_front() {
            match action {
                Step::Run {
                    index,
                    wrapped,
                    slot,
                    attempt,
                } => {
                    let run = proto::Run {
                        argv: self.argv(index, wrapped),
                        stderr: rundir::stderr_file(&self.setup.state_dir, index, attempt)
                            .into_string(),
                        outputs: self.setup.file.jobs[index]
                            .outputs
                            .iter()
                            .map(|o| o.to_string())
                            .collect(),
                        token: slot == Slot::Taken && tokens,
                    };
                    match self.direct.get().map(|d| d.reserve(index)) {
                        Some(Ok(())) => inner.starts.push((index, run)),
                        Some(Err(status)) => {
                            // As when a command ends: the core hears at once, its
                            // actions queued behind the others.
                            let problem = self.checked(index, &status);
                            queue.extend(inner.core.exited(index, status, problem));
                        }
                        None => self.send(inner, index, &ToLauncher::Run(run)),
                    }
                }
                Step::Finish { .. } if self.direct.get().is_some() => {
                    // The job is over, as when its launcher exits; the waits are for the last.
                    inner.open -= 1;
                    if inner.open == 0 {
                        self.closed.notify_all();
                    }
                }
                Step::Finish { index, code } => {
                    self.send(inner, index, &ToLauncher::Finish { code })
                }
                Step::Cancel { index, signal } => match self.direct.get() {
                    Some(direct) => direct.cancel(index, signal),
                    None => self.send(inner, index, &ToLauncher::Cancel { signal }),
                },
                Step::Remote { index, attempt } => match &*lock(&self.remote) {
                    Some(r) => r.submit(index, self.remote_reply(index, attempt)),
                    None => queue.extend(inner.core.remote_done(
                        index,
                        End::failed_here("remote: the link's connection is closed".into()),
                    )),
                },
                Step::CancelRemote => {
                    if let Some(r) = &*lock(&self.remote) {
                        r.cancel();
                    }
                }
                Step::Request(n) => {
                    if let Some(s) = &*supply {
                        s.request(n);
                    }
                }
                Step::Release(n) => {
                    for _ in 0..n {
                        if let Some(s) = &*supply {
                            s.release();
                        }
                    }
                }
            }
        }
    }

    /// Job `index`'s command line, through the wrapper or not.
    fn argv(&self, index: usize, wrapped: bool) -> Vec<String> {
        let job = &self.setup.file.jobs[index];
        if !wrapped {
            return job.command.to_vec();
        }
        if let Some(exe) = &self.setup.send {
            let spec = rundir::send_spec(&self.setup.state_dir, index);
            return vec![
                exe.display().to_string(),
                "__send".into(),
                spec.into_string(),
            ];
        }
        crate::job::wrapper::expand(&self.setup.wrapper, &job.inputs, &job.outputs)
            .into_iter()
            .chain(job.command.words().map(|w| w.to_string()))
            .collect()
    }

    /// What a remote job's end does, on the remote client's thread: its stderr, if any, goes
    /// where a local attempt's would (a missing file reads as empty), then the core hears of it.
    fn remote_reply(&self, index: usize, attempt: usize) -> Box<dyn FnOnce(End) + Send> {
        let me = self.me.clone();
        let stderr = rundir::stderr_file(&self.setup.state_dir, index, attempt);
        Box::new(move |end: End| {
            if !end.stderr.is_empty() {
                let _ = std::fs::write(&stderr, &end.stderr);
            }
            if let Some(shared) = me.upgrade() {
                let mut inner = shared.lock();
                let actions = inner.core.remote_done(index, end);
                shared.apply(&mut inner, actions);
            }
        })
    }

    /// Job `index`'s command ended (on a `direct` waiting thread, or a launcher's reader): its
    /// outputs are checked before the run's lock is taken, and the core decides what next.
    fn exited(&self, index: usize, status: crate::job::outcome::Status) {
        let problem = self.checked(index, &status);
        let mut inner = self.lock();
        let actions = inner.core.exited(index, status, problem);
        self.apply(&mut inner, actions);
    }

    /// What went wrong with a command that ended (or could not start), its outputs checked;
    /// a `direct` run's guard is told.
    fn checked(&self, index: usize, status: &crate::job::outcome::Status) -> Option<String> {
        let problem = if status.success() {
            files::first_problem(&self.setup.cwd, &self.setup.file.jobs[index].outputs)
        } else {
            Some(status.describe())
        };
        if let Some(d) = &self.setup.direct {
            d.guard.ended(index, problem.is_none());
        }
        problem
    }

    fn send(&self, inner: &Inner, index: usize, message: &ToLauncher) {
        if let Some(Some(conn)) = inner.conns.get(index) {
            // A launcher that cannot be reached is gone; its reader says so to the core.
            let _ = proto::send(conn, message);
        }
    }
}

/// The scheduler at work: accepts launchers and answers them until `finish`.
pub struct Server {
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    pump: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens in the private directory and starts taking slots as launchers ask.
    pub fn start(
        setup: Setup,
        supply: Supply,
        arrivals: mpsc::Receiver<Arrival>,
    ) -> std::io::Result<Server> {
        let listener = proto::listen(&setup.state_dir)?;
        let n = setup.file.jobs.len();
        let core = Core::new(setup.cost.clone(), &setup.policy);
        let mut setup = setup;
        let remote = Mutex::new(setup.remote.take());
        let shared = Arc::new_cyclic(|me| Shared {
            inner: Mutex::new(Inner {
                core,
                conns: vec![None; n],
                open: 0,
                first_hello: None,
                last_hello: None,
                warnings: Vec::new(),
            }),
            closed: Condvar::new(),
            supply: Mutex::new(Some(supply)),
            remote,
            setup,
            direct: OnceLock::new(),
            stopping: AtomicBool::new(false),
            me: me.clone(),
        });
        if let Some(d) = &shared.setup.direct {
            let me = Arc::downgrade(&shared);
            let exited: crate::local::direct::Exited = Arc::new(move |index, status| {
                if let Some(shared) = me.upgrade() {
                    shared.exited(index, status);
                }
            });
            let direct = Direct::new(d.watch.clone(), d.guard.clone(), exited);
            let _ = shared.direct.set(direct);
        }
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("accept".into())
            .spawn(move || accept_loop(&s, &listener))?;
        let s = shared.clone();
        let pump = std::thread::Builder::new()
            .name("slots".into())
            .spawn(move || {
                for arrival in arrivals {
                    let mut inner = s.lock();
                    let actions = match arrival {
                        Arrival::Slot => inner.core.slot_arrived(),
                        Arrival::Failed(why) => {
                            inner.warnings.push(format!(
                                "{why}; running up to {} jobs at once",
                                s.setup.parallelism
                            ));
                            inner.core.supply_failed(s.setup.parallelism)
                        }
                    };
                    s.apply(&mut inner, actions);
                }
            })?;
        {
            // Remote jobs start now, before their launchers come.
            let mut inner = shared.lock();
            let actions = inner.core.start();
            shared.apply(&mut inner, actions);
        }
        if let Some(d) = &shared.setup.direct {
            // Every job is ready at once, as if its launcher had said hello.
            let mut inner = shared.lock();
            inner.open = d.jobs.len();
            let mut actions = Vec::new();
            for &index in &d.jobs {
                actions.extend(inner.core.hello(index).unwrap_or_default());
            }
            shared.apply(&mut inner, actions);
        }
        Ok(Server {
            shared,
            accept: Some(accept),
            pump: Some(pump),
        })
    }

    /// A function that cancels the run (see `cancel`), for a signal handler; it does nothing
    /// once the server is finished.
    pub fn canceller(&self) -> impl Fn(i32) + Send + 'static {
        let weak = Arc::downgrade(&self.shared);
        move |signal| {
            if let Some(shared) = weak.upgrade() {
                let mut inner = shared.lock();
                let actions = inner.core.cancel(signal);
                shared.apply(&mut inner, actions);
            }
        }
    }

    /// A function that tells (running, done) jobs, for the progress line.
    pub fn counter(&self) -> impl Fn() -> (usize, usize) + Send + 'static {
        let weak = Arc::downgrade(&self.shared);
        move || weak.upgrade().map_or((0, 0), |s| s.lock().core.counts())
    }

    /// Cancels the run: nothing more starts, and every running command gets `signal`.
    pub fn cancel(&self, signal: i32) {
        let mut inner = self.shared.lock();
        let actions = inner.core.cancel(signal);
        self.shared.apply(&mut inner, actions);
    }

    /// Waits until every launcher has gone, or `limit` has passed; true when all have.
    pub fn wait_for_launchers(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        // Waiting decides nothing: the lock alone.
        let mut inner = lock(&self.shared.inner);
        while inner.open > 0 {
            let now = Instant::now();
            if now >= until {
                return false;
            }
            inner = self
                .shared
                .closed
                .wait_timeout(inner, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// Waits until every job of a run without launchers is over (see `wait_for_launchers`).
    pub fn wait_for_jobs(&self) {
        let mut inner = lock(&self.shared.inner);
        while inner.open > 0 {
            inner = (self.shared.closed.wait(inner)).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Stops listening and taking slots; returns each job's record and the warnings to print.
    /// Jobserver tokens held by launchers still running are left to them to give back.
    pub fn finish(mut self) -> Finished {
        self.shared.stopping.store(true, AtomicOrdering::SeqCst);
        // Wake the accept loop with a connection of our own.
        let _ = proto::connect(&self.shared.setup.state_dir);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        if let Some(direct) = self.shared.direct.get() {
            direct.stop();
        }
        // Nothing remote writes an output or changes a record after this.
        let remote = lock(&self.shared.remote).take();
        let (remote, remote_warnings) = match remote.map(|r| r.finish()) {
            Some((totals, warnings)) => (Some(totals), warnings),
            None => (None, Vec::new()),
        };
        let (records, mut warnings, handed) = {
            let inner = self.shared.lock();
            (
                inner.core.records().to_vec(),
                inner.warnings.clone(),
                inner.core.running_on_taken(),
            )
        };
        let supply = lock(&self.shared.supply).take();
        if let Some(supply) = supply {
            for _ in 0..handed {
                supply.hand_over();
            }
            // Its helper holds the sender: the pump ends with it.
            supply.stop();
        }
        if let Some(t) = self.pump.take() {
            let _ = t.join();
        }
        warnings.extend(remote_warnings);
        Finished {
            records,
            warnings,
            remote,
        }
    }
}

/// What a finished server leaves.
pub struct Finished {
    pub records: Vec<JobRecord>,
    pub warnings: Vec<String>,
    /// What the remote path sent and fetched, if it was used.
    pub remote: Option<RemoteTotals>,
}

fn accept_loop(shared: &Arc<Shared>, listener: &UnixListener) {
    for stream in listener.incoming() {
        if shared.stopping.load(AtomicOrdering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        shared.lock().open += 1;
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("launcher".into())
            .spawn(move || {
                serve(&s, stream);
                let mut inner = s.lock();
                inner.open -= 1;
                if inner.open == 0 {
                    s.closed.notify_all();
                }
            });
        if spawned.is_err() {
            let mut inner = shared.lock();
            inner.open -= 1;
            if inner.open == 0 {
                shared.closed.notify_all();
            }
        }
    }
}

/// Ends the first grant's wait (see `GATHER_QUIET`) unless every launcher connected before.
fn gather(shared: &Arc<Shared>, first: Instant) {
    let mut wake = first + GATHER_QUIET;
    loop {
        std::thread::sleep(wake.saturating_duration_since(Instant::now()));
        let mut inner = shared.lock();
        let last = inner.last_hello.unwrap_or(first);
        let until = (last + GATHER_QUIET).min(first + GATHER_MAX);
        if Instant::now() >= until {
            let actions = inner.core.gathered();
            shared.apply(&mut inner, actions);
            return;
        }
        wake = until;
    }
}

/// Serves one launcher until it goes away.
fn serve(shared: &Arc<Shared>, stream: UnixStream) {
    let Ok(writer) = stream.try_clone() else {
        return;
    };
    let writer = Arc::new(writer);
    let mut reader = BufReader::new(stream);
    let Ok(Some(ToRun::Hello { index, .. })) = proto::receive::<ToRun>(&mut reader) else {
        return;
    };
    {
        let mut inner = shared.lock();
        if index >= inner.conns.len() || inner.conns[index].is_some() {
            let _ = proto::send(&writer, &ToLauncher::Finish { code: 1 });
            inner.warnings.push(format!(
                "a launcher asked for job {index}, which has no launcher to wait for"
            ));
            return;
        }
        inner.conns[index] = Some(writer.clone());
        let now = Instant::now();
        inner.last_hello = Some(now);
        if inner.first_hello.is_none() {
            inner.first_hello = Some(now);
            let s = shared.clone();
            let _ = std::thread::Builder::new()
                .name("gather".into())
                .spawn(move || gather(&s, now));
        }
        let actions = inner.core.hello(index).unwrap_or_default();
        shared.apply(&mut inner, actions);
    }
    while let Ok(Some(message)) = proto::receive::<ToRun>(&mut reader) {
        if let ToRun::Exited(status) = message {
            shared.exited(index, status);
        }
    }
    let mut inner = shared.lock();
    inner.conns[index] = None;
    let actions = inner.core.gone(index);
    shared.apply(&mut inner, actions);
}
