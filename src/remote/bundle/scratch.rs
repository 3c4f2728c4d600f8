//! Scratch: the host entry's private directory for one bundle, in TMPDIR, mode 0700, held by a
//! lock for as long as the entry runs and removed when it ends; a later run removes those whose
//! lock nobody holds (an entry killed by `kill -9`). A directory is made under another name
//! and takes its final one only once locked, so no run ever finds a live one unlocked.
//!
//! It knows directories and locks; it does not know what is unpacked into them.

use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The start of every scratch directory's name.
pub const PREFIX: &str = "dtlto-clang.";
/// The start of a scratch directory's name while it is made.
const NEW: &str = "dtlto-clang-new.";
/// How old a directory left while being made must be to be removed.
const SETUP_AGE: Duration = Duration::from_secs(60);
/// The lock file inside, held while the entry runs.
const LOCK: &str = ".lock";

/// A scratch directory, removed on drop.
pub struct Scratch {
    path: PathBuf,
    _lock: File,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

impl Scratch {
    /// A new scratch directory in `tmp`, after removing dead ones there.
    pub fn create(tmp: &Path) -> Result<Scratch, String> {
        remove_dead(tmp);
        let new = tempfile::Builder::new()
            .prefix(NEW)
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(tmp)
            .map_err(|e| format!("make a scratch directory in {}: {e}", tmp.display()))?;
        let lock = File::create(new.path().join(LOCK))
            .and_then(|f| f.try_lock().map_err(std::io::Error::other).map(|()| f))
            .map_err(|e| format!("lock the scratch directory {}: {e}", new.path().display()))?;
        let name = new.path().file_name().unwrap_or_default().to_string_lossy();
        let path = tmp.join(name.replacen(NEW, PREFIX, 1));
        let made = new.keep();
        if let Err(e) = fs::rename(&made, &path) {
            let _ = fs::remove_dir_all(&made);
            return Err(format!(
                "name the scratch directory {}: {e}",
                path.display()
            ));
        }
        Ok(Scratch { path, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Removes this user's scratch directories in `tmp` whose lock nobody holds, and those left
/// while being made a while ago. Best effort.
pub fn remove_dead(tmp: &Path) {
    let Ok(entries) = fs::read_dir(tmp) else {
        return;
    };
    let uid = rustix::process::getuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let (made, being_made) = (name.starts_with(PREFIX), name.starts_with(NEW));
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !(made || being_made) || !meta.is_dir() || meta.uid() != uid {
            continue;
        }
        let old = meta.modified().ok().and_then(|t| t.elapsed().ok()) > Some(SETUP_AGE);
        let free = File::open(path.join(LOCK)).is_ok_and(|lock| lock.try_lock().is_ok());
        if free && (made || old) || (being_made && old && !path.join(LOCK).exists()) {
            let _ = fs::remove_dir_all(&path);
        }
    }
}
