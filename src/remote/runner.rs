//! Runner: the link's handle (`Remote`) that runs its jobs on a Remote Execution API server — one
//! connection per link, every distinct input uploaded once, the action cache asked first, transient
//! failures retried, outputs written atomically and verified like local ones.
//!
//! It knows how one remote job goes, from upload to verified output, and reports each job's end
//! to a callback. It does not decide which job goes remote or what happens after a failure (the
//! scheduler does), and it starts no local processes.

use super::action::Common;
use super::memo::inputs::InputDigests;
use super::memo::jobs::RememberedJobs;
use super::options::Options;
use super::plan::ActionPlan;
use super::reapi::Client;
use super::session::Session;
use crate::job::outcome::{RemoteEnd as End, RemoteTotals as Totals};
use crate::job::parse::JobFile;
use crate::job::util::sync::lock;
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest lld waits at the end of a link for its entry to be written.
const ENTRY_WRITE: Duration = Duration::from_secs(3);

/// A link's connection to the server, and the jobs it can run there.
pub struct Remote {
    rt: tokio::runtime::Runtime,
    session: Arc<Session>,
    cancel: Arc<tokio::sync::watch::Sender<bool>>,
    /// The CancelOperation calls under way, waited for by `finish`.
    cancelling: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    server: String,
    /// What went wrong on the side (a cancel the server refused), for the caller to print.
    warnings: Arc<Mutex<Vec<String>>>,
}

impl Remote {
    /// Connects, checks the server, and turns each job into an action. Returns, for each job,
    /// why it runs here instead (None: it can run remotely).
    pub fn start(
        options: &Options,
        file: &Arc<JobFile<'static>>,
        cwd: &Path,
        identity: super::memo::compilers::AskedCompiler,
        seen: &crate::job::validate::Seen,
    ) -> Result<(Remote, Vec<Option<String>>), String> {
        let (connected, memo, known, read) = connect_while_reading(options, file, cwd, seen);
        let (rt, client, cache_updates) = match connected {
            Ok(connected) => connected,
            Err(e) => {
                // No server: the digests read so far are remembered all the same, and the
                // compiler's answer is waited for, not left.
                let _ = memo.save();
                let _ = identity.answer();
                return Err(e);
            }
        };
        let identity = identity.answer();
        let common = Common {
            cwd: cwd.to_path_buf(),
            root_is_slash: options.root_is_slash,
            identity: identity?,
            platform: options.platform.clone(),
            cache: options.cache,
            by_content: options.by_content,
        };
        let (actions, why) = ActionPlan::build(&common, known, file, cwd, read);
        let mut warnings: Vec<String> = options.target.exposed_headers().into_iter().collect();
        if let Err(e) = memo.save() {
            warnings.push(format!("remember the inputs' digests: {e}"));
        }
        let (cancel, cancelled) = tokio::sync::watch::channel(false);
        let session = Arc::new(Session::new(
            options,
            client,
            cache_updates,
            actions,
            file,
            cwd,
            cancelled,
        ));
        Ok((
            Remote {
                rt,
                session,
                cancel: Arc::new(cancel),
                cancelling: Mutex::new(Vec::new()),
                server: options.target.url.clone(),
                warnings: Arc::new(Mutex::new(warnings)),
            },
            why,
        ))
    }
    /// Looks every job up in the action cache before any runs, and writes the hits' outputs:
    /// each hit's end, None for the jobs still to run. Nothing when the cache is off.
    pub fn look_up(&self) -> Vec<Option<End>> {
        if !self.session.cache {
            return vec![None; self.session.jobs.len()];
        }
        let session = self.session.clone();
        let mut cancelled = self.session.cancelled.clone();
        let n = self.session.jobs.len();
        // A cancel stops the lookup where it is: the hits written so far count for nothing (the
        // run removes the outputs of jobs that did not end well).
        let ends = self.rt.block_on(async move {
            tokio::select! {
                ends = super::lookup::look_up(session) => ends,
                _ = cancelled.wait_for(|c| *c) => vec![None; n],
            }
        });
        // The first, and how many: each job meets the same cause.
        let problems = std::mem::take(&mut *lock(&self.session.lookup_problems));
        if let Some(first) = problems.iter().min() {
            let more = match problems.len() {
                1 => String::new(),
                n => format!(" ({} more jobs alike)", n - 1),
            };
            lock(&self.warnings).push(format!("remote: {first}{more}"));
        }
        ends
    }

    /// Stops the remote side from another thread (a signal's hook): as `cancel`, but only the
    /// link's own work, no call to the server.
    pub fn stopper(&self) -> impl Fn() + Send + 'static {
        let cancel = self.cancel.clone();
        move || {
            let _ = cancel.send(true);
        }
    }

    /// Runs job `index` remotely; `reply` learns how it ended (not called once the link is
    /// cancelled).
    pub fn submit(&self, index: usize, reply: Box<dyn FnOnce(End) + Send>) {
        let session = self.session.clone();
        // Ranked as the scheduler sends them, costliest first: their uploads go in that order.
        let rank = (session.sent_jobs).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.rt.spawn(async move {
            let mut cancelled = session.cancelled.clone();
            let end = tokio::select! {
                end = super::execute::run_job(&session, index, rank) => end,
                _ = cancelled.wait_for(|c| *c) => return,
            };
            if !*session.cancelled.borrow() {
                reply(end);
            }
        });
    }

    /// Stops every remote job: nothing more is written, and the server is asked to cancel the
    /// operations in flight.
    pub fn cancel(&self) {
        let _ = self.cancel.send(true);
        let names: Vec<String> = lock(&self.session.state)
            .iter_mut()
            .filter_map(|s| s.operation.take())
            .collect();
        // Spawned, not waited for: this may run on one of the runtime's own threads.
        let mut cancelling = lock(&self.cancelling);
        for name in names {
            let mut client = self.session.client.clone();
            let warnings = self.warnings.clone();
            cancelling.push(self.rt.spawn(async move {
                if let Err(e) = client.cancel(&name).await {
                    lock(&warnings).push(format!("cancel the remote operation {name}: {e}"));
                }
            }));
        }
    }

    /// Waits for nothing more: the run is over. Returns what was sent and fetched, and the
    /// warnings to print.
    pub fn finish(self) -> (Totals, Vec<String>) {
        let c = &self.session.counters;
        let totals = Totals {
            server: self.server.clone(),
            distinct_blobs: c.distinct_blobs.load(Ordering::Relaxed),
            uploaded_bytes: c.uploaded_bytes.load(Ordering::Relaxed),
            uploaded_blobs: c.uploaded_blobs.load(Ordering::Relaxed),
            downloaded_bytes: c.downloaded_bytes.load(Ordering::Relaxed),
        };
        if !*self.session.cancelled.borrow() {
            if let Err(e) = super::lookup::keep(&self.session) {
                lock(&self.warnings).push(format!("remote: {e}"));
            }
        }
        if let Err(e) = self.session.later.known.save() {
            lock(&self.warnings).push(format!("remote: remember the jobs' actions: {e}"));
        }
        // Not to a server found down: lld would wait on it for nothing.
        if !*self.session.cancelled.borrow() && self.session.health.down().is_none() {
            let session = self.session.clone();
            let remembered = self.rt.block_on(async move {
                tokio::time::timeout(ENTRY_WRITE, remember_entry(&session))
                    .await
                    .unwrap_or_else(|_| Err("write the link's cache entry: timed out".into()))
            });
            if let Err(e) = remembered {
                lock(&self.warnings).push(format!("remote: {e}"));
            }
        }
        if let Some(w) = self.session.health.warning() {
            lock(&self.warnings).insert(0, w);
        }
        let _ = self.cancel.send(true);
        let cancelling = std::mem::take(&mut *lock(&self.cancelling));
        self.rt.block_on(async {
            for handle in cancelling {
                let _ = handle.await;
            }
        });
        self.rt.shutdown_timeout(Duration::from_secs(2));
        let warnings = std::mem::take(&mut *lock(&self.warnings));
        // Every job's action, input and remembered entry: freed on a thread of its own while
        // the link's records are written (here, when no thread can be started).
        let session = self.session;
        let _ = std::thread::Builder::new().spawn(move || drop(session));
        (totals, warnings)
    }
}

/// What a link's connection is made beside: it connects while the remembered digests and
/// actions load and the inputs are read (a round trip or two on a far server); a server that
/// cannot be used stops the reading where it is, and what was read is thrown away.
type Connected = Result<(tokio::runtime::Runtime, Client, bool), String>;

fn connect_while_reading(
    options: &Options,
    file: &JobFile<'_>,
    cwd: &Path,
    seen: &crate::job::validate::Seen,
) -> (Connected, InputDigests, RememberedJobs, super::plan::Read) {
    let failed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        // Its own thread: connecting waits, and the reading takes every core.
        let connecting = scope.spawn(|| {
            let connected = connect(options);
            if connected.is_err() {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            connected
        });
        let files = options.memo.as_ref();
        let memo = InputDigests::load(files.map(|f| f.digests.clone()));
        // Only with the action cache: a job remembered is built again to execute.
        let known = match options.cache {
            true => RememberedJobs::load(files.map(|f| f.actions.clone())),
            false => RememberedJobs::default(),
        };
        let read = super::plan::read(file, cwd, &memo, seen, &failed);
        let connected = connecting
            .join()
            .unwrap_or_else(|_| Err("connect to the server: the thread panicked".into()));
        (connected, memo, known, read)
    })
}

/// Starts the client's runtime and connects to the server, which must take SHA-256 digests and
/// execute actions.
fn connect(options: &Options) -> Result<(tokio::runtime::Runtime, Client, bool), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("remote")
        .enable_all()
        .build()
        .map_err(|e| format!("start the remote client: {e}"))?;
    let target = options.target.clone();
    let (client, caps) = rt.block_on(async move {
        tokio::time::timeout(Duration::from_secs(15), Client::connect(&target))
            .await
            .unwrap_or_else(|_| Err(format!("connect to {}: timed out", target.url)))
    })?;
    if !caps.sha256 {
        return Err(format!(
            "{} does not take SHA-256 digests, the only ones dtlto-bridge makes",
            options.target.url
        ));
    }
    if !caps.exec_enabled {
        return Err(format!(
            "{} (instance {:?}) does not execute actions",
            options.target.url, options.target.instance
        ));
    }
    Ok((rt, client, caps.cache_updates))
}

/// Writes the link's entry when every job's outputs are held by the server (from its cache or
/// executed there, none from the disk cache), the server takes updates, and the entry did not
/// answer this link already.
async fn remember_entry(session: &Session) -> Result<(), String> {
    let Some(entry) = &session.entry else {
        return Ok(());
    };
    if !session.cache || !session.cache_updates || session.entry_found.load(Ordering::Relaxed) {
        return Ok(());
    }
    let results: Vec<Option<Vec<re::OutputFile>>> = {
        let state = lock(&session.state);
        // Outputs taken from the disk cache may be outputs the server never held.
        if state.iter().any(|s| s.from_disk) {
            return Ok(());
        }
        state.iter().map(|s| s.result.clone()).collect()
    };
    match super::entry::remember(&session.client, entry, &results).await {
        Ok(()) => Ok(()),
        Err(s) if s.code() == tonic::Code::PermissionDenied => Err(format!(
            "{} refuses this client's action-cache writes ({}): --remote-no-cache-write reads \
             the cache without writing it",
            session.server,
            super::reapi::describe(&s)
        )),
        Err(s) => Err(format!(
            "write the link's cache entry: {}",
            super::reapi::describe(&s)
        )),
    }
}
