//! Remote: runs jobs on a Remote Execution API (v2) server — the gRPC client, each job as an
//! action, and the runner that uploads, executes or finds in the action cache, fetches and
//! verifies.
//!
//! It knows the protocol and the actions; it does not decide which job goes remote or what
//! follows a failure (the scheduler does), starts no local process, writes nothing in a run's
//! private directory and prints nothing: warnings and stderr are handed back.

pub(crate) mod action;
mod actions;
mod digests;
mod disk;
mod entry;
mod execute;
mod identity;
mod known;
mod lookup;
mod options;
mod probe;
pub(crate) mod reapi;
mod runner;
mod session;
mod shard;
mod tree;
mod upload;

pub(crate) use identity::Asked;
pub(crate) use options::Options;
pub(crate) use probe::probe;
pub(crate) use runner::*;
