//! Util: what every layer may use and nothing of the crate — files written whole or not at
//! all (`whole`), SHA-256 and BLAKE3 digests and stable names (`digest`), locks that survive a
//! panicking holder (`sync`).
//!
//! It knows files, renames, SHA-256, BLAKE3 and mutexes; it does not know jobs, links, servers
//! or what the files it writes mean.

pub(crate) mod digest;
pub(crate) mod sync;
pub(crate) mod whole;
