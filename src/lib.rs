//! dtlto-bridge as a library: the pipeline parse → plan → render → run → report, one module
//! each, for the binary and for tests that check the renderers against the real tools.
//!
//! It holds no logic of its own; `main.rs` is the command-line entry point.

pub mod action;
pub mod advice;
pub mod archive;
pub mod atomic;
pub mod capture;
pub mod check;
pub mod cli;
pub mod doctor;
pub mod escape;
pub mod fingerprint;
pub mod history;
pub mod launcher;
pub mod ldargs;
pub mod link;
pub mod linkfile;
pub mod output;
pub mod parse;
pub mod plan;
pub mod pool;
pub mod process;
pub mod progress;
pub mod proto;
pub mod reapi;
pub mod record;
pub mod remote;
pub mod render;
pub mod report;
pub mod rexec;
pub mod run;
pub mod sched;
pub mod slots;
pub mod state;
pub mod wrapper;
