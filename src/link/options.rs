//! Options: what `dtlto-bridge link` is asked to do — the run's options for its backend jobs
//! and the flow's own — as a plain struct the command line (`cli`) fills.
//!
//! It knows what each option means to the flow; it does not know flags or variables.

use camino::Utf8PathBuf;

#[derive(Debug)]
pub struct Options {
    /// The backend jobs' run, as a DTLTO link's.
    pub run: crate::link::engine::Options,
    /// Compiler of the backend jobs (None: the link command's program).
    pub compiler: Option<String>,
    /// Options added to every backend job.
    pub backend_arg: Vec<String>,
    /// Patterns of the backend jobs' options to remove (`%` for any text).
    pub backend_remove: Vec<String>,
    /// Write the whole flow to this build file instead of running it.
    pub emit: Option<Utf8PathBuf>,
    /// With `emit`: write it again only if an archive changed.
    pub emit_check: bool,
    /// Where the final native objects are kept.
    pub keep_objects: Option<Utf8PathBuf>,
    /// The link command.
    pub command: Vec<String>,
}
