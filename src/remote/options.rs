//! Options: what the user asked of the remote path — the server, jobs in flight, the cache,
//! the platform, the keys, and where digests and outputs are remembered.
//!
//! It is data, filled by `cli`; it knows which options need which others, nothing of servers.

use super::reapi::Target;
use std::path::PathBuf;

/// What the user asked of the remote path.
#[derive(Debug, Clone)]
pub struct Options {
    pub target: Target,
    /// Jobs in flight on the server at once.
    pub jobs: usize,
    /// Whether the action cache is read and written.
    pub cache: bool,
    /// Whether this client writes the action cache (the link's entry) when it is on.
    pub cache_write: bool,
    /// Whether the link's own entry is read and written when the cache is on.
    pub link_entry: bool,
    pub platform: Vec<(String, String)>,
    /// Whether the workers mount the input root at `/`.
    pub root_is_slash: bool,
    /// Whether jobs are keyed by content where they can be (`--remote-key`).
    pub by_content: bool,
    /// The link's files where input files' digests (`memo::inputs`) and jobs' actions
    /// (`memo::jobs`) are remembered between links, if anywhere.
    pub memo: Option<crate::job::store::LinkFiles>,
    /// Where outputs are kept on this machine by digest (`disk`), if anywhere; used only
    /// with the action cache and `memo` (the remembered actions say which outputs to take).
    pub disk: Option<PathBuf>,
}

impl Options {
    /// The disk cache's directory, when given and used.
    pub fn disk_used(&self) -> Option<&PathBuf> {
        self.disk.as_ref().filter(|_| self.disk_unused().is_none())
    }

    /// Why `disk`, given, is not used.
    pub fn disk_unused(&self) -> Option<&'static str> {
        match (self.disk.is_some(), self.cache, self.memo.is_some()) {
            (false, _, _) | (true, true, true) => None,
            (true, false, _) => Some("the action cache is off (--remote-no-cache)"),
            (true, true, false) => {
                Some("it needs the cache directory (--history), which is off or was refused")
            }
        }
    }
}
