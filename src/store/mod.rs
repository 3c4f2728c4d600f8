//! Store: everything dtlto-bridge remembers between links has its home here — the cache
//! directory (where it is, the files of one link, their trim, who may write there: `cache`),
//! one layout for every kind of file kept (`kept`: a first line naming the kind and its
//! version, then the kind's lines), and the check that a directory is this user's own (`own`),
//! through which the disk cache opens too.
//!
//! It knows where the files are and how each is read and written whole; it does not know what
//! a kind's lines hold (the history, input digests, remembered actions, compilers and archive
//! fingerprints each read their own), nor the disk cache's layout below its directory.

mod cache;
mod kept;
mod own;

pub use cache::{CacheDir, LinkFiles};
pub use kept::{Kept, Kind};
pub use own::{own_dir, own_subdir};

/// How long each job took, and what went into its remote action (`report::history`).
pub const HISTORY: Kind = Kind::new("history", 1);
/// Input files' digests by their identity (`remote::memo::inputs`).
pub const DIGESTS: Kind = Kind::new("digests", 1);
/// Each job's action by what it is built from (`remote::memo::jobs`).
pub const ACTIONS: Kind = Kind::new("actions", 2);
/// Compilers' identities (`remote::memo::compilers`).
pub const COMPILERS: Kind = Kind::new("compilers", 1);
/// An emitted link's archives as they were read (`link::fingerprint`), kept in the emitted
/// link's own directory.
pub const ARCHIVES: Kind = Kind::new("archives", 1);
