//! Tests that need the whole toolchain (scripts/setup.sh --tests): clang and lld 14, 19 and 22,
//! llvm-ar-22 and llvm-nm-22, distcc, cmake, cargo building the examples, python3, `script`, and
//! from PyPI (in target/pytools) make 4.4.1, ninja 1.13 and BuildGrid.

mod classic;
mod cli;
mod failures;
mod golden;
mod hosts;
mod icecc;
mod jobserver;
mod kernel;
mod link;
mod recipes;
mod record;
mod remote;
mod remote_known;
mod scheduler;
mod tls;
mod windows;
