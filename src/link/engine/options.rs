//! Options: what a run is asked to do, as the engine takes it — a plain struct that the command
//! line (`cli`) fills from flags and the environment, and that `link` passes on for its jobs.
//!
//! It knows what each option means to a run and how to name one in a message as the user gave
//! it (`Origins`); it does not know flags, variables, defaults or how they are parsed.

use camino::Utf8PathBuf;
use std::collections::BTreeMap;

/// Everything a run may be asked, but its job file.
#[derive(Debug, Clone)]
pub struct Options {
    /// How jobs are started (None: ninja if found, else make).
    pub backend: Option<Backend>,
    /// Jobs at once, given by the user (None: the jobserver's or the host pool's).
    pub jobs: Option<u32>,
    /// The wrapper's words, split (empty: none).
    pub wrapper: Vec<String>,
    pub order: Order,
    /// The cache directory where links are remembered (None: nothing is remembered).
    pub history: Option<Utf8PathBuf>,
    /// Slots of the host-wide pool (None: the available parallelism).
    pub host_slots: Option<usize>,
    /// Where the host-wide pool's directory goes (None: its default).
    pub host_pool: Option<Utf8PathBuf>,
    /// Whether a job that failed through the wrapper or remotely runs again here.
    pub fallback: bool,
    pub quiet: bool,
    /// Print the summary line even when stderr is not a terminal.
    pub summary: bool,
    pub report: Option<Utf8PathBuf>,
    pub trace: Option<Utf8PathBuf>,
    /// Keep the private directory.
    pub keep: bool,
    pub save: Option<Utf8PathBuf>,
    pub log: Option<Utf8PathBuf>,
    /// The ninja and make programs.
    pub ninja: String,
    pub make: String,
    /// The remote server's options (None: no `--remote`).
    pub remote: Option<crate::remote::Options>,
    /// Where each option given came from.
    pub origins: Origins,
}

/// How a link's jobs are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Ninja,
    Make,
    /// Started by dtlto-bridge itself: no build file, no build tool, no launcher.
    Direct,
}

impl Backend {
    /// The build file it writes; None for `Direct`.
    pub fn format(self) -> Option<crate::render::Format> {
        match self {
            Backend::Ninja => Some(crate::render::Format::Ninja),
            Backend::Make => Some(crate::render::Format::Make),
            Backend::Direct => None,
        }
    }
}

/// The order in which jobs start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Costliest first: by remembered durations, else by module size.
    Longest,
    /// As in the job file.
    File,
}

/// Where an option's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The command line; `linker` when the linker passed it (-Xthinlto-distributor=).
    Flag { linker: bool },
    /// This environment variable.
    Env(String),
}

/// Where each option given (not defaulted) came from, by option id.
#[derive(Debug, Clone, Default)]
pub struct Origins(pub BTreeMap<String, Origin>);

impl Origins {
    /// Whether the option was given, on the command line or in the environment.
    pub fn given(&self, id: &str) -> bool {
        self.0.contains_key(id)
    }

    /// The option with its value as the user wrote it: `--jobs 3` (with the linker option that
    /// carried it), or `DTLTO_BRIDGE_JOBS=3`.
    pub fn describe(&self, id: &str, flag: &str, value: &str) -> String {
        match self.0.get(id) {
            Some(Origin::Env(var)) => format!("{var}={value}"),
            Some(Origin::Flag { linker: true }) => format!("{flag} {value} (passed by the linker)"),
            _ => format!("{flag} {value}"),
        }
    }
}
