//! The end-to-end tests, one binary: the real dtlto-bridge binary run as a user or a linker runs
//! it. `fast` needs only sh, make and ninja; `full` the whole toolchain (`cargo test --test e2e
//! fast::` runs the first alone).

mod fast;
mod full;
mod space;
