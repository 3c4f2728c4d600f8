//! State: what the in-process server holds — the CAS, the action cache, the operations, the
//! switches — and what it saw: calls per method, the actions it executed, the operations it
//! was asked to cancel.
//!
//! It knows storage and bookkeeping; it does not know gRPC messages beyond the REAPI types it
//! stores, and it runs nothing.

use super::faults::{decide, Faults, Gate, Method};
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use tonic::Status;

/// How the server presents itself, fixed for its life.
#[derive(Clone, Debug)]
pub struct Config {
    /// The only instance name it answers; calls naming another fail with INVALID_ARGUMENT.
    pub instance: String,
    /// max_batch_total_size_bytes in the capabilities, and the most a batch call may carry.
    pub max_batch: i64,
    pub exec_enabled: bool,
    /// Whether the capabilities say the action cache takes updates.
    pub cache_updates: bool,
    /// The worker's name in each result's execution metadata.
    pub worker: String,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            instance: "main".into(),
            max_batch: 4 << 20,
            exec_enabled: true,
            cache_updates: true,
            worker: "in-process".into(),
        }
    }
}

/// What the server saw, in order: each call as it came and as it was answered, what each
/// FindMissingBlobs call asked for, each blob stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Called(Method),
    Answered(Method),
    Asked(Vec<String>),
    Put(String),
}

/// One action the server ran (or pretended to, under `Faults::exit`).
#[derive(Clone, Debug)]
pub struct Executed {
    pub action: String,
    pub arguments: Vec<String>,
    pub working_directory: String,
    pub environment: Vec<(String, String)>,
    /// Every file of the input root, by its path there.
    pub inputs: Vec<String>,
    pub exit_code: i32,
    pub do_not_cache: bool,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A test that panicked holding a lock must not hide the server's state from the others.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn digest_of(data: &[u8]) -> re::Digest {
    re::Digest {
        hash: Sha256::digest(data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        size_bytes: data.len() as i64,
    }
}

pub struct State {
    pub config: Config,
    pub(super) faults: Mutex<Faults>,
    /// Blobs by hash alone: a digest with a wrong size still finds its blob (the client is
    /// the one to check sizes).
    cas: Mutex<HashMap<String, Vec<u8>>>,
    ac: Mutex<HashMap<String, re::ActionResult>>,
    calls: Mutex<BTreeMap<Method, usize>>,
    pub(super) seen: Mutex<Vec<Seen>>,
    pub(super) executed: Mutex<Vec<Executed>>,
    pub(super) cancelled: Mutex<Vec<String>>,
    /// The process groups of the commands running now.
    pub(super) running: Mutex<HashSet<i32>>,
    /// Set once the server stops: no command starts after it.
    pub(super) stopping: std::sync::atomic::AtomicBool,
    /// Where actions are materialized, one directory each.
    pub(super) scratch: tempfile::TempDir,
}

impl State {
    pub fn new(config: Config) -> Arc<State> {
        Arc::new(State {
            config,
            faults: Mutex::default(),
            cas: Mutex::default(),
            ac: Mutex::default(),
            calls: Mutex::default(),
            seen: Mutex::default(),
            executed: Mutex::default(),
            cancelled: Mutex::default(),
            running: Mutex::default(),
            stopping: Default::default(),
            scratch: tempfile::Builder::new()
                .prefix("reapi-server-")
                .tempdir()
                .expect("create the server's scratch directory"),
        })
    }

    /// Counts a call of `method` and applies the switches: waits, never returns, or fails.
    pub(super) async fn gate(&self, method: Method) -> Result<(), Status> {
        lock(&self.seen).push(Seen::Called(method));
        let (wait, gate) = decide(&mut lock(&self.faults), &mut lock(&self.calls), method);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        match gate {
            Gate::Answer => {
                lock(&self.seen).push(Seen::Answered(method));
                Ok(())
            }
            Gate::Fail(status) => Err(status),
            Gate::Hang => std::future::pending().await,
        }
    }

    /// The call's instance name, checked.
    pub(super) fn instance(&self, name: &str) -> Result<(), Status> {
        if name == self.config.instance {
            Ok(())
        } else {
            Err(Status::invalid_argument(format!(
                "unknown instance {name:?} (this server has {:?})",
                self.config.instance
            )))
        }
    }

    pub fn calls(&self, method: Method) -> usize {
        lock(&self.calls).get(&method).copied().unwrap_or(0)
    }

    pub fn all_calls(&self) -> BTreeMap<Method, usize> {
        lock(&self.calls).clone()
    }

    pub fn faults(&self) -> Faults {
        lock(&self.faults).clone()
    }

    pub fn put(&self, data: Vec<u8>) -> re::Digest {
        let digest = digest_of(&data);
        lock(&self.cas).insert(digest.hash.clone(), data);
        lock(&self.seen).push(Seen::Put(digest.hash.clone()));
        digest
    }

    pub fn has(&self, digest: &re::Digest) -> bool {
        digest.size_bytes == 0 || lock(&self.cas).contains_key(&digest.hash)
    }

    /// A blob as stored (never corrupted: for the server's own use).
    pub fn blob(&self, digest: &re::Digest) -> Option<Vec<u8>> {
        if digest.size_bytes == 0 {
            return Some(Vec::new());
        }
        lock(&self.cas).get(&digest.hash).cloned()
    }

    /// A blob as a client reads it: with its last byte flipped under `corrupt_reads`.
    pub(super) fn read_blob(&self, digest: &re::Digest) -> Option<Vec<u8>> {
        let mut data = self.blob(digest)?;
        if lock(&self.faults).corrupt_reads {
            corrupt(&mut data);
        }
        Some(data)
    }

    /// Removes a blob, as an eviction would.
    pub fn evict(&self, digest: &re::Digest) {
        lock(&self.cas).remove(&digest.hash);
    }

    pub fn blob_count(&self) -> usize {
        lock(&self.cas).len()
    }

    pub fn cached(&self, action: &str) -> Option<re::ActionResult> {
        lock(&self.ac).get(action).cloned()
    }

    pub fn cache_entries(&self) -> usize {
        lock(&self.ac).len()
    }

    pub(super) fn remember(&self, action: &str, result: re::ActionResult) {
        lock(&self.ac).insert(action.to_string(), result);
    }
}

/// Flips the last byte: the same size, so only a client that hashes what it reads notices.
pub(super) fn corrupt(data: &mut [u8]) {
    if let Some(last) = data.last_mut() {
        *last ^= 0xff;
    }
}
