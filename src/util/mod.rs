//! Util: what every layer may use and nothing of the crate — file-system helpers (`fsutil`:
//! files written whole or not at all, stable names, locks, digests).
//!
//! It knows files, renames, SHA-256 and mutexes; it does not know jobs, links, servers or what
//! the files it writes mean.

pub(crate) mod fsutil;
