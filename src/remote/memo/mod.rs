//! Memo: what the remote path remembers between links, each in a file the store gives it
//! (`store::LinkFiles`, `store::CacheDir::compilers`) — input files' digests by their identity (`inputs`), jobs'
//! actions by what they are built from (`jobs`), and the compiler's identity (`compilers`).
//!
//! It knows what may be trusted again and when it must be asked anew; it makes no call to a
//! server.

pub(super) mod compilers;
pub(in crate::remote) mod inputs;
pub(super) mod jobs;
