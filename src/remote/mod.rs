//! Remote: runs jobs on a Remote Execution API (v2) server. The gRPC client (`reapi`); each job
//! as an action keyed by content where it can be (`action`, its input root `tree`, its index
//! shard rewritten `shard/`), the link's actions built on every core (`plan`); what is
//! remembered between links (`memo`: input digests, jobs' actions, the compiler's identity);
//! the user's options (`options`); one link's session and each job's state (`session`); the
//! connection made while the inputs are read (`connect`) and the costliest jobs started on it
//! first (`lead`); the lookup before the scheduler starts anything (`lookup`) and the link's
//! own cache entry (`entry`), a relink's objects read while it is planned (`prefetch`); the upload (`upload`) and each job from Execute to checked
//! outputs (`execute`); outputs kept on this machine (`disk`); the link's handle that joins
//! them (`runner`); doctor's probe (`probe`).
//! Beside the REAPI client, the other way to run jobs on other machines: each job as one
//! bundle for distcc and icecream hosts, and the host's entry (`bundle/`, the same plan of a
//! job as `action`).
//!
//! It knows the protocol and the actions; it does not know `local` or decide which job goes
//! remote or what follows a failure (the scheduler does, through the engine). The REAPI client
//! starts no local process, writes nothing in a run's private directory and prints nothing:
//! warnings and stderr are handed back; `bundle/` runs the wrapper for one job, in the job's
//! own `__send` process.

pub(crate) mod action;
mod blob;
pub(crate) mod bundle;
mod connect;
mod disk;
mod entry;
mod execute;
mod gate;
mod health;
mod lead;
mod lookup;
mod memo;
mod options;
mod plan;
mod prefetch;
mod probe;
pub(crate) mod reapi;
mod runner;
mod session;
mod shard;
mod tree;
mod upload;

pub(crate) use memo::compilers::AskedCompiler;
pub(crate) use options::Options;
pub(crate) use probe::probe;
pub(crate) use runner::*;
