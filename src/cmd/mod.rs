//! Cmd: the subcommands — the default run of a job file, `emit`, `doctor`, `check`,
//! `rexec`, `completions` and `man` (manual), and `--save` (capture) — each the glue from
//! parsed options to the layers below (`lib.rs` dispatches the command line to them).
//!
//! It knows which layer does what for each subcommand; the work itself is done below.

pub(crate) mod capture;
pub(crate) mod check;
pub(crate) mod doctor;
pub(crate) mod emit;
pub(crate) mod manual;
pub(crate) mod rexec;
pub(crate) mod run;
pub(crate) mod tool;
