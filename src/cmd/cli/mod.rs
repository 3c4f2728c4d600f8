//! CLI: the command line and its `DTLTO_BRIDGE_*` environment variables, on top of the
//! layers it fills: the definition (`args`, `remote` for the remote options), how it is parsed
//! and how a bad value is explained (`parse`), how the user gave a value (`given`: `~`
//! expanded, `--option value` or `VARIABLE=value`), and the helpers' own command lines that no
//! user types (`hidden`).
//!
//! It knows option names, defaults and precedence (flag, then environment, then default), that
//! an empty variable means an unset one, where each value came from (to name it in messages),
//! and turns what was given into the options of the engine (`engine::Options`) and the classic
//! flow (`link::Options`); it reads the files of remote options it names (headers, TLS), and no
//! job file, and starts nothing.

mod args;
mod given;
mod hidden;
mod parse;
mod remote;

pub use args::{
    Backend, CheckArgs, Cli, Command, DoctorArgs, EmitArgs, HostCommand, ManArgs, RexecArgs,
};
pub use hidden::{hidden_args, Hidden};
pub use parse::parse;
