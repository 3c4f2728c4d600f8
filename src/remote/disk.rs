//! Disk: remote jobs' outputs kept on this machine by digest (`--remote-disk-cache DIR`, as
//! Bazel's `--disk_cache`), so that a relink whose job is remembered with the same action
//! (`memo::jobs`) takes its outputs from here, hard-linked, without asking the server.
//!
//! It knows one directory of read-only files named by their SHA-256 (`cas/ab/abcdef…`), each
//! hard-linked to or from an output (copied across file systems), and removes those no output
//! used for `MAX_AGE`. It does not know actions or servers, and it trusts a kept file by its
//! name and size: the files are read-only, and nothing here writes into one.

use std::fs;
use std::io::{Error, ErrorKind};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A kept file no output used (linked, copied or kept) for this long is removed.
const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// How often at most the directory is walked to remove them.
const TRIM_EVERY: Duration = Duration::from_secs(24 * 3600);

/// The directory of kept outputs.
#[derive(Debug)]
pub struct Disk {
    dir: PathBuf,
    /// Its `cas` directory, opened once there for the outputs placed.
    cas: std::sync::OnceLock<fs::File>,
}

impl Disk {
    pub fn new(dir: PathBuf) -> Disk {
        Disk {
            dir,
            cas: std::sync::OnceLock::new(),
        }
    }

    /// Where the file of digest `hash` is kept; an error for anything but a SHA-256 in
    /// lower-case hex (the name comes from a server's answer or a file of the history).
    fn blob(&self, hash: &str) -> std::io::Result<PathBuf> {
        let hex = |c: u8| c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
        if hash.len() != 64 || !hash.bytes().all(hex) {
            return Err(Error::other(format!("{hash:?} is not a SHA-256 digest")));
        }
        Ok(self.dir.join("cas").join(&hash[..2]).join(hash))
    }

    /// Makes `here` the file of `hash` and `size`: hard-linked to the kept one (copied whole
    /// across file systems), replacing whatever `here` was. An error when it is not kept.
    /// Looked up in the `cas` directory opened once, so that each output costs two short
    /// lookups: pass `here` relative to the current directory where it can be.
    pub fn place(&self, hash: &str, size: i64, here: &Path) -> std::io::Result<()> {
        use rustix::fs::{linkat, statat, AtFlags, CWD};
        let blob = self.blob(hash)?;
        let name = Path::new(&hash[..2]).join(hash);
        let cas = match self.cas.get() {
            Some(cas) => cas,
            None => {
                let opened = fs::File::open(self.dir.join("cas"))?;
                self.cas.get_or_init(|| opened)
            }
        };
        let m = statat(cas, &name, AtFlags::empty())?;
        if m.st_size != size {
            return Err(Error::new(
                ErrorKind::InvalidData,
                format!(
                    "{} has {} bytes, its digest says {size}",
                    blob.display(),
                    m.st_size
                ),
            ));
        }
        let link = || linkat(cas, &name, CWD, here, AtFlags::empty()).map_err(Error::from);
        let linked = match link() {
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                fs::remove_file(here)?;
                link()
            }
            linked => linked,
        };
        match linked {
            Ok(()) => Ok(()),
            // Another file system, or one without hard links: a copy, and the kept file is
            // marked as used (a link marks it by itself: it changes the file's ctime).
            Err(_) => {
                let bytes = fs::read(&blob)?;
                crate::util::fsutil::write_whole(here, &bytes, 0o666, || Ok(()))?;
                used(&blob);
                Ok(())
            }
        }
    }

    /// Keeps the output `here`, whose digest is `hash`, unless a file of that digest and size
    /// is kept: hard-linked (copied across file systems) under a temporary name, made
    /// read-only, then renamed into place (over a kept file of another size), so a kept file
    /// is always whole.
    pub fn keep(&self, here: &Path, hash: &str) -> std::io::Result<()> {
        let blob = self.blob(hash)?;
        let size = fs::metadata(here)?.len();
        if fs::metadata(&blob).is_ok_and(|m| m.len() == size) {
            used(&blob);
            return Ok(());
        }
        let shelf = blob.parent().expect("a shelf");
        fs::create_dir_all(shelf)?;
        // Unique to this call: two jobs of one link may give the same output.
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let temporary = shelf.join(format!(".{hash}.{}.{call}.partial", std::process::id()));
        let _ = fs::remove_file(&temporary);
        let kept = match fs::hard_link(here, &temporary) {
            Ok(()) => Ok(()),
            Err(_) => fs::copy(here, &temporary).map(drop),
        };
        let kept = kept
            .and_then(|()| fs::set_permissions(&temporary, fs::Permissions::from_mode(0o444)))
            .and_then(|()| fs::rename(&temporary, &blob));
        if kept.is_err() {
            let _ = fs::remove_file(&temporary);
        }
        kept
    }

    /// Removes the kept files no output used for `MAX_AGE`, when the directory was not walked
    /// for `TRIM_EVERY` (its `trimmed` file says when it was).
    pub fn trim(&self) {
        let stamp = self.dir.join("trimmed");
        let now = SystemTime::now();
        let recent = fs::metadata(&stamp)
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).unwrap_or_default() < TRIM_EVERY);
        if recent || fs::write(&stamp, b"").is_err() {
            return;
        }
        let oldest = now
            .checked_sub(MAX_AGE)
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs() as i64);
        let Ok(shelves) = fs::read_dir(self.dir.join("cas")) else {
            return;
        };
        for file in shelves
            .flatten()
            .flat_map(|s| fs::read_dir(s.path()))
            .flatten()
        {
            let Ok(file) = file else { continue };
            // ctime: set when the file was kept, linked to an output, or touched by a copy.
            if file.metadata().is_ok_and(|m| m.ctime() < oldest) {
                let _ = fs::remove_file(file.path());
            }
        }
    }
}

/// Marks a kept file as used, as its owner can even though it is read-only: setting its mode
/// sets its change time. Another user's file is left as it is.
fn used(blob: &Path) {
    let _ = fs::set_permissions(blob, fs::Permissions::from_mode(0o444));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_output_is_placed_again_read_only_and_replaces_what_was_there() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::new(dir.path().join("cache"));
        let out = dir.path().join("a.o");
        fs::write(&out, b"object").unwrap();
        let hash = crate::util::fsutil::sha256_hex(b"object");
        let not_kept = disk.place(&hash, 6, &dir.path().join("x.o")).unwrap_err();
        assert_eq!(not_kept.kind(), ErrorKind::NotFound);
        disk.keep(&out, &hash).unwrap();
        // Kept again: the file kept first stays.
        disk.keep(&out, &hash).unwrap();
        let kept = dir.path().join("cache/cas").join(&hash[..2]).join(&hash);
        let inode = |p: &Path| fs::metadata(p).unwrap().ino();
        assert_eq!(inode(&kept), inode(&out), "hard-linked");
        // A kept file of another size (truncated by hand) is replaced.
        fs::set_permissions(&kept, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(&kept, b"obj").unwrap();
        let e = disk.place(&hash, 6, &dir.path().join("c.o")).unwrap_err();
        assert!(
            e.to_string().contains("has 3 bytes, its digest says 6"),
            "{e}"
        );
        let copy = dir.path().join("copy.o");
        fs::write(&copy, b"object").unwrap();
        disk.keep(&copy, &hash).unwrap();
        assert_eq!(fs::read(&kept).unwrap(), b"object");
        fs::remove_file(&out).unwrap();
        let again = dir.path().join("b.o");
        fs::write(&again, b"stale").unwrap();
        disk.place(&hash, 6, &again).unwrap();
        assert_eq!(fs::read(&again).unwrap(), b"object");
        let mode = fs::metadata(&again).unwrap().permissions().mode();
        assert_eq!(mode & 0o222, 0, "kept files are read-only");
        let e = disk.place(&hash, 5, &dir.path().join("c.o")).unwrap_err();
        assert!(
            e.to_string().contains("has 6 bytes, its digest says 5"),
            "{e}"
        );
        assert!(!dir.path().join("c.o").exists() && !dir.path().join("x.o").exists());
        for bad in [
            "../../../etc/passwd",
            "/abs",
            &hash.to_uppercase(),
            &hash[1..],
        ] {
            let e = disk.place(bad, 6, &dir.path().join("e.o")).unwrap_err();
            assert!(e.to_string().contains("is not a SHA-256 digest"), "{e}");
            assert!(disk.keep(&again, bad).is_err());
        }
        assert_eq!(
            fs::read_dir(dir.path().join("cache/cas").join(&hash[..2]))
                .unwrap()
                .count(),
            1,
            "no temporary file is left"
        );
    }

    #[test]
    fn trim_walks_at_most_once_a_day_and_keeps_recent_files() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::new(dir.path().to_path_buf());
        let out = dir.path().join("a.o");
        fs::write(&out, b"x").unwrap();
        let hash = crate::util::fsutil::sha256_hex(b"x");
        disk.keep(&out, &hash).unwrap();
        disk.trim();
        assert!(dir.path().join("trimmed").exists());
        disk.place(&hash, 1, &dir.path().join("b.o")).unwrap();
    }
}
