//! Exec: runs a link's jobs on this machine — the private directory (its whole layout), the
//! scheduler and the socket server the launchers talk to, where job slots come from (jobserver,
//! host pool, `-j`), the launchers themselves, or the direct backend and its guard, processes
//! and signals, and the progress line.
//!
//! It knows processes, sockets, slots and the files of a run; it does not read or check job
//! files, render build files or word what the user reads (`report` does), and it reaches a
//! remote server only through `remote`.

pub(crate) mod dir;
pub(crate) mod direct;
pub(crate) mod guard;
pub(crate) mod launcher;
pub(crate) mod pool;
pub(crate) mod process;
pub(crate) mod progress;
pub(crate) mod proto;
pub(crate) mod sched;
pub(crate) mod server;
pub(crate) mod slots;
