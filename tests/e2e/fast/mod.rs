//! Tests that need only sh, make and ninja (Debian's make 4.3 and ninja 1.11 are enough;
//! scripts/setup.sh --fast), no LLVM at all: the jobs are `sh -c` scripts, or the library
//! renders the build files.

pub(crate) mod bundle;
mod cli;
mod failures;
mod golden;
mod hostile;
mod layers;
pub(crate) mod reapi;
mod record;
mod remote;
mod remote_disk;
mod remote_faults;
mod scheduler;
