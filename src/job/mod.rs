//! Job: the job file and what can be known of a job without running it — the file's two schemas
//! (`parse`), the checks a file must pass (`validate`), a job's files (`files`: what its outputs
//! must look like, whole objects of a known format, and the name of its index shard), what known
//! wrappers do, how a job's run ended (`outcome`), and the relocation model a job follows when
//! its command names none.
//!
//! It imports nothing else of the crate, and holds `bitcode` (the LLVM bitstream container and
//! what a module says of itself, which `remote`'s shards use too), and below the job model the
//! helpers every layer uses (`util`) and what a link remembers between links (`store`): it does
//! not render, schedule or run anything.

pub(crate) mod bitcode;
pub(crate) mod files;
pub(crate) mod object;
pub(crate) mod outcome;
pub mod parse;
pub(crate) mod relocation;
pub(crate) mod store;
pub(crate) mod util;
pub(crate) mod validate;
pub(crate) mod wrapper;

pub use parse::{parse, Command, Job, JobFile, Schema};
