//! Connect: a link's connection to the server, made on a thread of its own while the link's
//! inputs are read: first the costliest jobs' (`lead`), whose actions, once built, the
//! connection starts as soon as it is made; then every other input. When no job leads (none is
//! new), the last link's objects are read ahead from then on (`prefetch`). A server that cannot
//! be used stops the reading where it is.
//!
//! It knows the order of those first steps; the calls are `reapi`'s, the reading `plan`'s, and
//! how a lead runs `lead`'s.

use super::action::Common;
use super::lead::{self, Leads, Planned};
use super::memo::compilers::AskedCompiler;
use super::memo::inputs::InputDigests;
use super::memo::jobs::RememberedJobs;
use super::options::Options;
use super::plan::{self, Read};
use super::prefetch::Prefetch;
use super::reapi::Client;
use super::session::Shared;
use crate::job::parse::JobFile;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the link gives its remote side to start with.
pub(super) struct Given<'a> {
    pub options: &'a Options,
    pub file: &'a Arc<JobFile<'static>>,
    pub cwd: &'a Path,
    /// What an earlier look found of the inputs.
    pub seen: &'a crate::job::validate::Seen,
    /// Each job's expected cost: the costliest lead.
    pub cost: &'a [f64],
}

/// The connection made: its runtime and client, whether the server takes action-cache
/// updates, what the link's sessions share, the leads started on it, and the last link's
/// objects being read.
pub(super) struct Connection {
    pub rt: tokio::runtime::Runtime,
    pub client: Client,
    pub cache_updates: bool,
    pub shared: Shared,
    pub leads: Option<Leads>,
    pub prefetch: Option<Prefetch>,
}

/// What the first steps found: the connection (or why there is none), what every action is
/// built with (or why it cannot be), the remembered digests and actions, and the inputs read.
type Found = (
    Result<Connection, String>,
    Result<Common, String>,
    InputDigests,
    Arc<RememberedJobs>,
    Read,
);

/// Connects while the remembered digests and actions load and the inputs are read (a round
/// trip or two on a far server): the leads' inputs first, their actions built and handed to
/// the connection (with the remembered actions, for the prefetch), then the rest's.
/// `cancelled` is the link's cancel.
pub(super) fn connect_while_reading(
    given: &Given<'_>,
    identity: AskedCompiler,
    cancelled: tokio::sync::watch::Receiver<bool>,
) -> Found {
    let Given {
        options,
        file,
        cwd,
        seen,
        cost,
    } = *given;
    let failed = &AtomicBool::new(false);
    let picked = lead::pick(cost, lead::count(cost.len()).min(options.jobs));
    let (hand, handed) = std::sync::mpsc::channel::<Planned>();
    // The remembered actions, given to the connection before the leads are (or none are).
    let remembered = &std::sync::OnceLock::new();
    std::thread::scope(|scope| {
        // Its own thread: connecting waits, and the reading takes every core.
        let connecting =
            scope.spawn(move || connection(options, cwd, cancelled, failed, handed, remembered));
        let files = options.memo.as_ref();
        let memo = InputDigests::load(files.map(|f| f.digests.clone()));
        // Only with the action cache: a job remembered is built again to execute.
        let known = Arc::new(match options.cache {
            true => RememberedJobs::load(files.map(|f| f.actions.clone())),
            false => RememberedJobs::default(),
        });
        let _ = remembered.set(known.clone());
        // The compiler's answer is waited for, whatever happens next: first when jobs lead
        // (their actions need it), else once the inputs are read.
        let common = |identity: AskedCompiler| common(options, cwd, identity);
        let mut before = None;
        let answered = match picked.is_empty() {
            true => Err(identity),
            false => {
                let lead_file = lead::file_of(file, &picked);
                let lead_read = plan::read(&lead_file, cwd, &memo, seen, failed, None);
                before = Some(lead_read.files_only());
                let made = common(identity);
                if let Ok(made) = &made {
                    let planned = Planned::build(made, &known, picked, lead_file, cwd, lead_read);
                    let _ = hand.send(planned);
                }
                Ok(made)
            }
        };
        drop(hand);
        let read = plan::read(file, cwd, &memo, seen, failed, before.as_ref());
        let common = answered.unwrap_or_else(common);
        let connected = connecting
            .join()
            .unwrap_or_else(|_| Err("connect to the server: the thread panicked".into()));
        (connected, common, memo, known, read)
    })
}

/// The connecting thread: the connection, the leads started on it once they are handed over
/// (none when the reading hands none), then the prefetch of what `remembered` holds (set before
/// the leads are handed over); `failed` is set when there is no connection.
fn connection(
    options: &Options,
    cwd: &Path,
    cancelled: tokio::sync::watch::Receiver<bool>,
    failed: &AtomicBool,
    handed: std::sync::mpsc::Receiver<Planned>,
    remembered: &std::sync::OnceLock<Arc<RememberedJobs>>,
) -> Result<Connection, String> {
    let (rt, client, cache_updates) = match connect(options) {
        Ok(connected) => connected,
        Err(e) => {
            failed.store(true, Ordering::Relaxed);
            return Err(e);
        }
    };
    let shared = Shared::new(&options.target.url, &client, cancelled);
    let leads = handed.recv().ok().map(|planned| {
        let start = lead::Start {
            rt: &rt,
            options,
            client: &client,
            cache_updates,
            shared: &shared,
            cwd,
        };
        Leads::start(start, planned)
    });
    let prefetch = (remembered.get())
        .and_then(|known| prefetch(options, &rt, &client, &shared, leads.as_ref(), known));
    Ok(Connection {
        rt,
        client,
        cache_updates,
        shared,
        leads,
        prefetch,
    })
}

/// The last link's objects read (`known` remembers them) as soon as the connection is made and
/// no job leads: a relink most likely takes them back. Not without the action cache, nor with a
/// disk cache (it has them).
fn prefetch(
    options: &Options,
    rt: &tokio::runtime::Runtime,
    client: &Client,
    shared: &Shared,
    leads: Option<&Leads>,
    known: &RememberedJobs,
) -> Option<Prefetch> {
    let disk = options.disk_used().is_some();
    // A job that leads is not remembered: the link changed, and its entry will not answer.
    let changed = leads.is_some_and(Leads::any);
    if !options.cache || disk || changed {
        return None;
    }
    let counters = shared.counters.clone();
    let count = move |n| {
        counters.downloaded_bytes.fetch_add(n, Ordering::Relaxed);
    };
    let (cancelled, health) = (shared.cancelled.clone(), shared.health.clone());
    Prefetch::start(
        rt,
        client,
        known.last_outputs(),
        super::lookup::HELD as u64,
        cancelled,
        health,
        count,
    )
}

/// What every action of the link is built with, once the compiler has answered.
fn common(options: &Options, cwd: &Path, identity: AskedCompiler) -> Result<Common, String> {
    identity.answer().map(|identity| Common {
        cwd: cwd.to_path_buf(),
        root_is_slash: options.root_is_slash,
        identity,
        platform: options.platform.clone(),
        cache: options.cache,
        by_content: options.by_content,
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
