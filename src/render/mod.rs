//! Render: everything that writes text for a shell or a build tool — the escaping rules of sh,
//! ninja and make, a job file as build.ninja or a Makefile, and the classic link's file.
//!
//! It knows the files' layouts and quoting; it does not know where the files go, whether the
//! inputs exist, or how the build tool is run.

mod build_file;
pub(crate) mod escape;
pub(crate) mod linkfile;

pub(crate) use build_file::*;
pub use build_file::{render, Format, Options, RunHooks};
