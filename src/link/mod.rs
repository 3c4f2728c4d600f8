//! Link: the classic distributed ThinLTO flow (`dtlto-bridge link`) for any LLVM with lld
//! (14+), ELF (ld.lld) and COFF (lld-link) — the link command and its target, lld's inputs read
//! as lld reads them, archives and their members, the thin link, the backend jobs through the same engine as a DTLTO link's,
//! the final link, and `--emit`.
//!
//! It knows lld's options and the flow's files; it does not know how jobs are scheduled or run
//! (`cmd::run` and `exec` do) or how build files are written (`render` does).

mod archive;
mod coffargs;
mod command;
mod emit;
mod fingerprint;
mod flow;
mod inputs;
mod ldargs;

pub(crate) use flow::link;
