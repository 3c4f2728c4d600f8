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
pub use kept::{Kept, ACTIONS, ARCHIVES};
pub use own::{own_dir, own_subdir, Others};
