//! Faults: the switches that make the in-process server misbehave, set per test while it runs,
//! and the gate every call passes first (counted, delayed, held or failed there).
//!
//! It knows the methods by name and what each switch means; it does not know how a service
//! answers (the services read the switches that change their answers themselves).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;
use tonic::{Code, Status};

/// Every call the server answers, by the name of its RPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    GetCapabilities,
    FindMissingBlobs,
    BatchUpdateBlobs,
    BatchReadBlobs,
    GetTree,
    /// ByteStream.Read
    Read,
    /// ByteStream.Write
    Write,
    QueryWriteStatus,
    GetActionResult,
    UpdateActionResult,
    Execute,
    WaitExecution,
    GetOperation,
    ListOperations,
    DeleteOperation,
    CancelOperation,
    WaitOperation,
}

/// What an executed action's outputs come back as.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Outputs {
    /// What the command wrote.
    #[default]
    Real,
    /// Each output present but empty.
    Empty,
    /// Each output replaced by these bytes (text that is no object, say).
    Replaced(Vec<u8>),
    /// No output at all, whatever the command wrote.
    Missing,
}

/// The switches. All off by default; a test sets the ones it needs, at start or mid-run, with
/// `Server::set`. Only what is set changes: everything else answers as a correct server would.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Every answer waits this long first.
    pub delay: Duration,
    /// These methods wait this long more before answering.
    pub slow: HashMap<Method, Duration>,
    /// These methods never answer: the call stays open until the client gives up or the
    /// server stops.
    pub hang: HashSet<Method>,
    /// These methods fail with this code, for this many calls (then answer again); see
    /// `fail_always` and `fail_times`. UNAVAILABLE stands for a dropped connection, as the
    /// client sees one; `Server::kill` drops the connections for real.
    pub fail: HashMap<Method, (Code, usize)>,
    /// Blobs read back (BatchReadBlobs, ByteStream Read) have their last byte
    /// flipped: the same size, other bytes, under the same digest.
    pub corrupt_reads: bool,
    /// Each output file of an executed action declares this many bytes more (or fewer) than
    /// it has; the hash stays right, and reads still give the real bytes.
    pub output_size_delta: i64,
    /// What executed actions' outputs come back as.
    pub outputs: Outputs,
    /// UpdateActionResult answers PERMISSION_DENIED (the server's own executions are still
    /// cached).
    pub refuse_cache_writes: bool,
    /// Execution does not run the command: it ends with this exit code and this stderr.
    pub exit: Option<(i32, String)>,
    /// Execution does not run the command: the operation ends with an ExecuteResponse whose
    /// status is this error.
    pub exec_status: Option<(Code, String)>,
    /// This many Execute and WaitExecution streams end with UNAVAILABLE after their first
    /// message, while the operation lives on (a connection lost mid-way).
    pub break_streams: usize,
    /// This many Execute and WaitExecution streams end cleanly (no error) after their first
    /// message, while the operation lives on (a proxy's idle or age limit).
    pub end_streams: usize,
    /// Action-cache hits are not served by Execute (skip_cache_lookup or not): it always runs.
    pub execute_ignores_cache: bool,
}

impl Faults {
    /// `method` fails with `code` from now on.
    pub fn fail_always(&mut self, method: Method, code: Code) -> &mut Self {
        self.fail.insert(method, (code, usize::MAX));
        self
    }

    /// The next `times` calls of `method` fail with `code`.
    pub fn fail_times(&mut self, method: Method, code: Code, times: usize) -> &mut Self {
        self.fail.insert(method, (code, times));
        self
    }
}

/// What the gate decided for one call.
pub(super) enum Gate {
    Answer,
    Hang,
    Fail(Status),
}

/// Counts the call, and says how it goes; the caller sleeps `wait` first.
pub(super) fn decide(
    faults: &mut Faults,
    calls: &mut BTreeMap<Method, usize>,
    method: Method,
) -> (Duration, Gate) {
    *calls.entry(method).or_default() += 1;
    let wait = faults.delay + faults.slow.get(&method).copied().unwrap_or_default();
    if faults.hang.contains(&method) {
        return (wait, Gate::Hang);
    }
    if let Some((code, left)) = faults.fail.get_mut(&method) {
        if *left > 0 {
            if *left != usize::MAX {
                *left -= 1;
            }
            let status = Status::new(*code, format!("{method:?} fails on purpose (test fault)"));
            return (wait, Gate::Fail(status));
        }
    }
    (wait, Gate::Answer)
}
