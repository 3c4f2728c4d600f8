//! dtlto-bridge as a library: the pipeline parse → plan → render → run → verify → report, one
//! module each, for the binary and for tests that check the renderers against the real tools.
//!
//! It holds no logic of its own; `main.rs` is the command-line entry point.

pub mod cancel;
pub mod cli;
pub mod doctor;
pub mod escape;
pub mod history;
pub mod job;
pub mod parse;
pub mod plan;
pub mod progress;
pub mod record;
pub mod render;
pub mod report;
pub mod run;
pub mod slots;
pub mod verify;
pub mod wrapper;
