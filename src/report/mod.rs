//! Report: what the user reads and what stays after a link — failures and exit codes (the one
//! place that prints), the run's record and log line, the job history that orders later runs,
//! and advice given once per build.
//!
//! It knows messages, exit codes and the records' formats; it does not decide what failed or
//! run anything.

pub(crate) mod advice;
mod failure;
pub(crate) mod history;
pub(crate) mod record;

pub(crate) use failure::*;
