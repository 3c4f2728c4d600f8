//! Scratch: the host entry's private directory for one bundle, in TMPDIR, mode 0700, held by a
//! lock for as long as the entry runs and removed when it ends; a later run removes those whose
//! lock nobody holds (an entry killed by `kill -9`).
//!
//! It knows directories and locks; it does not know what is unpacked into them.

use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The start of every scratch directory's name.
pub const PREFIX: &str = "dtlto-clang.";
/// The lock file inside, held while the entry runs.
const LOCK: &str = ".lock";

/// A scratch directory, removed on drop.
pub struct Scratch {
    dir: tempfile::TempDir,
    _lock: File,
}

impl Scratch {
    /// A new scratch directory in `tmp`, after removing dead ones there.
    pub fn create(tmp: &Path) -> Result<Scratch, String> {
        remove_dead(tmp);
        let dir = tempfile::Builder::new()
            .prefix(PREFIX)
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(tmp)
            .map_err(|e| format!("make a scratch directory in {}: {e}", tmp.display()))?;
        let lock = File::create(dir.path().join(LOCK))
            .and_then(|f| f.try_lock().map_err(std::io::Error::other).map(|()| f))
            .map_err(|e| format!("lock the scratch directory {}: {e}", dir.path().display()))?;
        Ok(Scratch { dir, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes this user's scratch directories in `tmp` whose lock nobody holds. Best effort.
pub fn remove_dead(tmp: &Path) {
    let Ok(entries) = fs::read_dir(tmp) else {
        return;
    };
    let uid = rustix::process::getuid().as_raw();
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let path: PathBuf = entry.path();
        let mine = fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if !mine {
            continue;
        }
        // A directory without its lock yet is being made (or was, a moment ago): left alone.
        let Ok(lock) = File::open(path.join(LOCK)) else {
            continue;
        };
        if lock.try_lock().is_ok() {
            let _ = fs::remove_dir_all(&path);
        }
    }
}
