//! Local: runs a link's jobs on this machine — the private directory (`rundir`: its whole layout),
//! the scheduler (`sched`) and the socket server the launchers talk to (`server`), where job slots
//! come from (jobserver, host pool, `-j`), the launchers themselves, or the direct backend and its
//! guard, processes and signals, and the progress line.
//!
//! It knows processes, sockets, slots and the files of a run; it does not read or check job files,
//! render build files or word what the user reads (`report` does), and it does not know `remote`:
//! the jobs the scheduler sends remotely go to the `server::RemoteLane` the engine gives it.

pub(crate) mod direct;
pub(crate) mod guard;
pub(crate) mod launcher;
pub(crate) mod pool;
pub(crate) mod process;
pub(crate) mod progress;
pub(crate) mod proto;
pub(crate) mod rundir;
pub(crate) mod sched;
pub(crate) mod server;
pub(crate) mod slots;
