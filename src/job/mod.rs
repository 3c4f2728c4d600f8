//! Job: the job file and what can be known of a job without running it — the file's two
//! schemas, the checks a file must pass, what a job's outputs must look like, what known
//! wrappers do, and how a job's run ended (its outcome).
//!
//! It imports nothing else of the crate: it does not render, schedule or run anything.

pub(crate) mod check;
pub(crate) mod outcome;
pub(crate) mod output;
pub mod parse;
pub(crate) mod wrapper;

pub use parse::{parse, Command, Job, JobFile, Schema};
