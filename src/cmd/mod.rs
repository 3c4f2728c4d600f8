//! Cmd: the command line and its commands — the definition, parsing and options of the
//! command line (`cli`, which fills the options of the run and of `link`), and the subcommands
//! other than the default run and `link`: `emit`, `doctor`, `check`, `rexec`, `host`,
//! `completions` and `man` (manual), each the glue from parsed options to the layers below
//! (`lib.rs` dispatches the command line to them).
//!
//! It knows which layer does what for each subcommand; the work itself is done below.

pub(crate) mod check;
pub(crate) mod cli;
pub(crate) mod doctor;
pub(crate) mod emit;
pub(crate) mod host;
pub(crate) mod manual;
pub(crate) mod rexec;
