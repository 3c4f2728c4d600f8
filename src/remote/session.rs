//! Session: one link's remote state — the connection, every job's action and inputs, and each
//! job's remote state as one record (`JobState`: its cached result no good, its outputs from
//! the disk cache, the operation in flight, its outputs as the server holds them), the blobs
//! sent — with the counters of what was sent and
//! fetched, and the server's health (`health`). What a link's sessions share (`Shared`: the
//! blobs sent, the counters, the health, the upload gate, the cancel) is made once: the jobs
//! started ahead of the rest (`lead`) run on a session of their own.
//!
//! It is shared, read-mostly, by the lookup, the upload and each job's execution; it does not
//! make calls of its own.

use super::action::JobAction;
use super::entry::Entry;
use super::health::Health;
use super::reapi::Client;
use crate::job::outcome::RemoteInfo as Info;
use crate::job::parse::JobFile;
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub(super) struct Counters {
    pub(super) distinct_blobs: AtomicU64,
    pub(super) uploaded_bytes: AtomicU64,
    pub(super) uploaded_blobs: AtomicU64,
    pub(super) downloaded_bytes: AtomicU64,
}

/// How a blob's upload ended, for the jobs that wait for it (None: under way).
pub(super) type Sent = tokio::sync::watch::Receiver<Option<Result<(), String>>>;

/// What a job's lookup found: its cached result's outputs and worker, None for a miss.
pub(super) type Hit = Option<(Vec<re::OutputFile>, String)>;

/// What every session of one link shares: a blob is sent once whichever session's job needs
/// it, the uploads pass one gate in one order, and one cancel stops them all.
#[derive(Clone)]
pub(super) struct Shared {
    pub sent: Arc<Mutex<HashMap<String, Sent>>>,
    pub counters: Arc<Counters>,
    pub health: Arc<Health>,
    pub gate: Arc<super::gate::Gate>,
    pub sent_jobs: Arc<AtomicU64>,
    pub cancelled: tokio::sync::watch::Receiver<bool>,
}

impl Shared {
    /// What the sessions of a link on `client` share; `cancelled` is its cancel.
    pub(super) fn new(
        url: &str,
        client: &Client,
        cancelled: tokio::sync::watch::Receiver<bool>,
    ) -> Shared {
        Shared {
            sent: Arc::default(),
            counters: Arc::default(),
            health: Arc::new(Health::new(url)),
            // Room for a few full batches side by side, whatever the server's limit.
            gate: super::gate::Gate::new(super::gate::MAX_BYTES.max(4 * client.max_batch)),
            sent_jobs: Arc::default(),
            cancelled,
        }
    }
}

/// One job's remote state, beyond its action.
#[derive(Clone, Debug, Default)]
pub(super) struct JobState {
    /// Its cached result was no good: it executes, never from the cache.
    pub bad_result: bool,
    /// Its outputs came from the disk cache: they are kept there already.
    pub from_disk: bool,
    /// The name of its operation on the server, while it executes.
    pub operation: Option<String>,
    /// Its outputs as the server holds them, once it has them (for the link's entry).
    pub result: Option<Vec<re::OutputFile>>,
}

/// A link's remote session, shared by every task of it.
pub(super) struct Session {
    pub(super) client: Client,
    pub(super) jobs: Vec<Option<JobAction>>,
    /// Each input file's digest, and where it is.
    pub(super) files: HashMap<String, (re::Digest, PathBuf)>,
    /// Each job's input files, by digest.
    pub(super) inputs: Vec<Vec<String>>,
    /// What building the jobs remembered (not whole) takes, should they execute.
    pub(super) later: super::plan::Later,
    /// Each blob a job has sent or is sending, by hash: the jobs that need it too wait for it.
    pub(super) sent: Arc<Mutex<HashMap<String, Sent>>>,
    pub(super) cache: bool,
    /// Whether the server takes action-cache updates (for the link's entry).
    pub(super) cache_updates: bool,
    pub(super) cwd: PathBuf,
    pub(super) outputs: Vec<Vec<String>>,
    pub(super) cancelled: tokio::sync::watch::Receiver<bool>,
    pub(super) counters: Arc<Counters>,
    /// The link's entry in the action cache (`lookup`): its key and its messages; set by the
    /// link's own session (`runner`), none in the leads'.
    pub(super) entry: Option<Entry>,
    /// Whether the link's entry answered this link.
    pub(super) entry_found: AtomicBool,
    /// Where outputs are kept on this machine (`--remote-disk-cache`), if anywhere.
    pub(super) disk: Option<super::disk::Disk>,
    /// Each job's key among the remembered actions, when it has one.
    pub(super) keys: Vec<Option<String>>,
    /// What the lookup found wrong, not a mere miss: a kept output that could not be taken from
    /// the disk cache, a cached output the server sent other than its digest.
    pub(super) lookup_problems: Mutex<Vec<String>>,
    /// Each job's remote state.
    pub(super) state: Mutex<Vec<JobState>>,
    /// Whether the server answers, for every call of the link.
    pub(super) health: Arc<Health>,
    /// The server's URL, for messages.
    pub(super) server: String,
    /// The link's upload calls, let through in the order the jobs were sent (`gate`).
    pub(super) gate: Arc<super::gate::Gate>,
    /// Jobs sent so far: the next one's rank at the gate.
    pub(super) sent_jobs: Arc<AtomicU64>,
    /// The jobs started ahead of the rest on a session of their own (`lead`): the lookup
    /// leaves them, and the link takes their ends from there.
    pub(super) lead: Vec<bool>,
    /// Each lead's own lookup, waited for by the link's.
    pub(super) lead_looked: Mutex<Vec<(usize, tokio::sync::oneshot::Receiver<Hit>)>>,
    /// The last link's objects being read (`prefetch`), taken by the lookup.
    pub(super) prefetch: Mutex<Option<super::prefetch::Prefetch>>,
}

impl Session {
    /// The session of a link whose jobs are `actions`, on `client`.
    pub(super) fn new(
        options: &super::options::Options,
        client: Client,
        cache_updates: bool,
        actions: super::plan::ActionPlan,
        file: &JobFile<'_>,
        cwd: &Path,
        shared: Shared,
    ) -> Session {
        let n = actions.jobs.len();
        let disk = match options.disk_used() {
            Some(dir) => super::disk::Disk::open(dir.clone()).map(Some),
            None => Ok(None),
        };
        let (disk, problems) = match disk {
            Ok(disk) => (disk, Vec::new()),
            Err(e) => (None, vec![format!("--remote-disk-cache is not used: {e}")]),
        };
        Session {
            client,
            entry: None,
            jobs: actions.jobs,
            files: actions.files,
            inputs: actions.inputs,
            later: actions.later,
            sent: shared.sent,
            cache: options.cache,
            cache_updates: cache_updates && options.cache_write,
            entry_found: AtomicBool::new(false),
            disk,
            keys: actions.keys,
            lookup_problems: Mutex::new(problems),
            cwd: cwd.to_path_buf(),
            outputs: file
                .jobs
                .iter()
                .map(|j| j.outputs.iter().map(|o| o.to_string()).collect())
                .collect(),
            cancelled: shared.cancelled,
            counters: shared.counters,
            state: Mutex::new(vec![JobState::default(); n]),
            health: shared.health,
            server: options.target.url.clone(),
            gate: shared.gate,
            sent_jobs: shared.sent_jobs,
            lead: vec![false; n],
            lead_looked: Mutex::default(),
            prefetch: Mutex::default(),
        }
    }

    /// An error once the link is cancelled: what a write checks before it puts a file in place.
    pub(super) fn not_cancelled(&self) -> std::io::Result<()> {
        match *self.cancelled.borrow() {
            true => Err(std::io::Error::other("cancelled")),
            false => Ok(()),
        }
    }
}

/// An output as the link remembers it: what the server holds, without the bytes it sent inline.
pub(super) fn without_contents(file: &re::OutputFile) -> re::OutputFile {
    re::OutputFile {
        contents: Vec::new(),
        ..file.clone()
    }
}

/// What a job's report says of its action, before it runs.
pub(super) fn info_of(job: &JobAction) -> Info {
    Info {
        key: match (&job.by_name, &job.summaries_kept) {
            (None, None) => "content".into(),
            (None, Some(why)) => {
                format!("content, the index shard's summaries as lld wrote them: {why}")
            }
            (Some(why), _) => format!("names: {why}"),
        },
        ingredients: job.ingredients.clone(),
        ..Info::default()
    }
}

pub(super) fn worker_name(result: &re::ActionResult) -> String {
    match result
        .execution_metadata
        .as_ref()
        .map(|m| m.worker.as_str())
    {
        Some(w) if !w.is_empty() => format!("worker {w}"),
        _ => "the worker".into(),
    }
}
