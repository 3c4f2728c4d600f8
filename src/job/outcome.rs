//! Outcome: how a job's run ended and what became of each job as a link concludes — its
//! status, where it ran (here, through the wrapper, on the remote server or from its action
//! cache), a fallback's reason, and the remote server's account of it.
//!
//! It is data only, shared by the scheduler, the remote runner and the report; it does not
//! decide anything or know processes, sockets or servers.

use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// How one run of a job's command ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// Exit code, when the command exited.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
    /// Why the command could not be started at all.
    pub spawn_error: Option<String>,
    /// Seconds since the Unix epoch.
    pub start: f64,
    pub end: f64,
}

impl Status {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// "exit status 1", "killed by signal 9", "could not start: ...".
    pub fn describe(&self) -> String {
        match (&self.spawn_error, self.code, self.signal) {
            (Some(e), _, _) => format!("could not start: {e}"),
            (None, Some(code), _) => format!("exit status {code}"),
            (None, None, Some(sig)) => format!("killed by signal {sig}"),
            (None, None, None) => "ended without a status".to_string(),
        }
    }

    /// The code a launcher exits with for this status, as a shell would report it.
    pub fn exit_code(&self) -> i32 {
        match (&self.spawn_error, self.code, self.signal) {
            (Some(_), _, _) => 127,
            (None, Some(code), _) => code,
            (None, None, Some(sig)) => 128 + sig,
            (None, None, None) => 1,
        }
    }
}

/// Where a job ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// It never finished (not started, cancelled, or its launcher died).
    NotRun,
    Local,
    Wrapper,
    /// Through the wrapper or remotely first, which failed; then locally.
    Fallback,
    /// On the remote server.
    Remote,
    /// From the remote action cache, without executing.
    RemoteCache,
}

impl Ran {
    pub fn name(self) -> &'static str {
        match self {
            Ran::NotRun => "not run",
            Ran::Local => "local",
            Ran::Wrapper => "wrapper",
            Ran::Fallback => "fallback",
            Ran::Remote => "remote",
            Ran::RemoteCache => "remote cache",
        }
    }
}

/// Why a job ran a second time, locally, and what the first run said.
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback {
    pub reason: String,
    pub stderr: String,
}

/// What became of one job, as the run concludes.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub index: usize,
    /// The last run of its command; None when it never finished.
    pub status: Option<Status>,
    /// When its first run started (the fallback's run ends the job).
    pub start: Option<f64>,
    pub ran: Ran,
    pub fallback: Option<Fallback>,
    /// What the last run wrote to stderr.
    pub stderr: String,
    /// What was wrong with the last run, checked as it ended: its status, or an output missing,
    /// empty or cut short.
    pub problem: Option<String>,
    /// How its first run went on the remote server, if it went there.
    pub remote: Option<RemoteInfo>,
    /// Where its bundle went, if it was sent to the wrapper's hosts.
    pub sent: Option<Sent>,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.status.is_some() && self.problem.is_none()
    }
}

/// How a remote job ended.
#[derive(Debug, Clone)]
pub struct RemoteEnd {
    pub status: Status,
    /// What was wrong, if anything: the job then falls back (or fails).
    pub problem: Option<String>,
    pub info: RemoteInfo,
    /// What the command wrote to stderr on the worker (the caller puts it where it belongs).
    pub stderr: Vec<u8>,
}

impl RemoteEnd {
    /// A job that never reached the server, for `problem`.
    pub fn failed_here(problem: String) -> RemoteEnd {
        RemoteEnd {
            status: Status::default(),
            problem: Some(problem),
            info: RemoteInfo::default(),
            stderr: Vec::new(),
        }
    }

    /// A job taken from a cache (`worker` held its outputs), with no time of its own: a lookup
    /// answers every job at once.
    pub fn cached(mut info: RemoteInfo, worker: String) -> RemoteEnd {
        info.cached = true;
        info.worker = worker;
        let now = now();
        RemoteEnd {
            status: Status {
                code: Some(0),
                start: now,
                end: now,
                ..Default::default()
            },
            problem: None,
            info,
            stderr: Vec::new(),
        }
    }
}

/// Where and how a remote job ran, for the report.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RemoteInfo {
    /// Taken from the action cache: nothing executed.
    pub cached: bool,
    /// The worker that executed it (ExecutedActionMetadata), if the server said.
    pub worker: String,
    /// Seconds waiting for the link's inputs to be uploaded.
    pub upload_seconds: f64,
    /// Seconds queued on the server before a worker took it, if the server said.
    pub queued_seconds: Option<f64>,
    /// Seconds from the Execute call to its result.
    pub execute_seconds: f64,
    /// Seconds fetching and writing the outputs.
    pub download_seconds: f64,
    /// How the action names the job's files: "content" (the same action in every link and
    /// checkout), or "names: " and why it could not be keyed by content.
    pub key: String,
    /// Why it was not taken from the action cache, when it was not: what changed since the
    /// last link of the same output here (see `report::history`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub miss: Option<String>,
    /// The kind of that reason (`an import changed`), for counting alike reasons of different
    /// modules together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub miss_kind: Option<String>,
    /// What went into its action, to compare with the next link's.
    #[serde(skip)]
    pub ingredients: std::sync::Arc<Ingredients>,
}

/// Labels (`the compiler`, `the command`, `the module M`, `an import M`, `the index shard`;
/// `report::history::Part` makes them) and digests of what went into a remote action.
pub type Ingredients = std::collections::BTreeMap<String, String>;

/// What the remote path did for the whole link.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RemoteTotals {
    pub server: String,
    /// Distinct blobs the link's actions need (inputs and messages), and those the server
    /// lacked and were sent: each at most once.
    pub distinct_blobs: u64,
    pub uploaded_blobs: u64,
    pub uploaded_bytes: u64,
    pub downloaded_bytes: u64,
}

/// Where a bundle sent through distcc or icecc went (`bundle::send`), for the report.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
#[serde(default)]
pub struct Sent {
    /// The host that compiled it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// What hosts said when they refused it: `HOST: reason`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// The wrapper ran it on this machine (no host took it, or one failed it).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub here: bool,
    /// The bundle's size.
    pub bytes: u64,
}

impl Sent {
    /// Whether the bundle reached a host.
    pub fn shipped(&self) -> bool {
        self.host.is_some() || !self.refused.is_empty()
    }
}
