//! Bitcode: the LLVM bitstream container, and what a bitcode module says of its own target
//! and relocation model.
//!
//! It imports nothing else of the crate and runs nothing: it reads (and, for `remote`'s
//! shards, writes) bytes.

pub mod bitstream;
pub mod module;
