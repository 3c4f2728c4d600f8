//! Disk: remote jobs' outputs kept on this machine by digest (`--remote-disk-cache DIR`, as
//! Bazel's `--disk_cache`), so that a relink whose job is remembered with the same action
//! (`memo::jobs`) takes its outputs from here without asking the server.
//!
//! It knows one directory of read-only files named by their SHA-256 (`cas/ab/abcdef…`), and
//! removes those no output used for `MAX_AGE`. It trusts nothing it did not check: the directory
//! must be the user's own and writable by no one else (it is made 0700); no symbolic link under
//! it is followed (each file is opened from its directory with `O_NOFOLLOW`, and trim walks it
//! by directory descriptors); a kept file is a copy of the output, never the output's own inode
//! (one with another name is not taken), so that a tool that rewrites an output in place cannot
//! change it; nothing is kept under a digest its bytes do not have, and a kept file is hashed
//! and checked as an object again each time it is taken. It does not know actions or servers.

use rustix::fs::{
    fchmod, fstat, mkdirat, openat, renameat, statat, unlinkat, AtFlags, FileType, Mode, OFlags,
};
use std::fs;
use std::io::{Error, ErrorKind, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A kept file no output used (placed or kept) for this long is removed.
const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// How often at most the directory is walked to remove them.
const TRIM_EVERY: Duration = Duration::from_secs(24 * 3600);

/// The directory of kept outputs.
#[derive(Debug)]
pub struct Disk {
    dir: PathBuf,
    /// The directory itself, opened once (its `trimmed` stamp is made from it).
    top: OwnedFd,
    /// Its `cas` directory, opened once (not through a symbolic link).
    cas: OwnedFd,
    /// This user: every kept file must be theirs.
    uid: u32,
}

/// An error that makes a kept file a miss: it is not there as it must be.
fn bad(why: String) -> Error {
    Error::new(ErrorKind::InvalidData, why)
}

/// `e`, with a symbolic link met where none may be said so (a miss, not an error).
fn no_link(e: rustix::io::Errno, what: &Path) -> Error {
    match e {
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => {
            bad(format!("{} is a symbolic link", what.display()))
        }
        e => Error::from(e),
    }
}

impl Disk {
    /// The cache in `dir`, made (0700) when missing: refused when `dir` is not this user's own
    /// directory, or others may write in it.
    pub fn open(dir: PathBuf) -> Result<Disk, String> {
        let shown = dir.display().to_string();
        let refused = |why: String| {
            format!(
                "{why}: files another user put there would be taken as outputs; name a \
                 directory of your own in --remote-disk-cache (DTLTO_BRIDGE_REMOTE_DISK_CACHE)"
            )
        };
        let top =
            crate::job::store::own_dir(&dir, crate::job::store::Others::Refuse).map_err(refused)?;
        let cas = crate::job::store::own_subdir(&top, "cas", &shown).map_err(refused)?;
        let uid = rustix::process::geteuid().as_raw();
        Ok(Disk { dir, top, cas, uid })
    }

    /// The shelf and name of the file of digest `hash`; an error for anything but a SHA-256 in
    /// lower-case hex (the name comes from a server's answer or a file of the history).
    fn name(hash: &str) -> std::io::Result<(&str, &str)> {
        if !crate::job::util::digest::is_hex_digest(hash) {
            return Err(Error::other(format!("{hash:?} is not a SHA-256 digest")));
        }
        Ok((&hash[..2], hash))
    }

    /// The kept file of `hash`, for messages.
    fn path(&self, hash: &str) -> PathBuf {
        self.dir.join("cas").join(&hash[..2]).join(hash)
    }

    /// Opens the shelf `shelf` (made when `make`), not through a symbolic link.
    fn shelf(&self, shelf: &str, make: bool) -> std::io::Result<OwnedFd> {
        if make {
            match mkdirat(&self.cas, shelf, Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        openat(&self.cas, shelf, dir_flags(), Mode::empty())
            .map_err(|e| no_link(e, &self.dir.join("cas").join(shelf)))
    }

    /// The kept file of `hash`, opened (not through a symbolic link), when it is a regular file
    /// of this user's with no other name: the file and its size. One with another name (an
    /// older version kept outputs as hard links of them) is removed from here, so that marking
    /// it used never changes the mode of an output that shares its inode.
    fn kept(&self, hash: &str) -> std::io::Result<(fs::File, u64)> {
        let (shelf, name) = Disk::name(hash)?;
        let shelf = self.shelf(shelf, false)?;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd =
            openat(&shelf, name, flags, Mode::empty()).map_err(|e| no_link(e, &self.path(hash)))?;
        let st = fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_uid != self.uid {
            return Err(bad(format!(
                "{} is not a file of this user's",
                self.path(hash).display()
            )));
        }
        if st.st_nlink != 1 {
            let _ = unlinkat(&shelf, name, AtFlags::empty());
            return Err(bad(format!(
                "{} shares its inode with another file",
                self.path(hash).display()
            )));
        }
        Ok((fs::File::from(fd), st.st_size as u64))
    }

    /// Makes `here` a copy of the kept file of `hash` and `size`, replacing whatever `here`
    /// was, once the copy's bytes hash to `hash` and are a whole object. An error when it is
    /// not kept (NotFound), or kept wrong (InvalidData: the bad file is removed).
    pub fn place(&self, hash: &str, size: i64, here: &Path) -> std::io::Result<()> {
        let (mut file, len) = self.kept(hash)?;
        if i64::try_from(len).ok() != Some(size) {
            return Err(bad(format!(
                "{} has {len} bytes, its digest says {size}",
                self.path(hash).display()
            )));
        }
        let mut bytes = Vec::with_capacity(len as usize);
        file.read_to_end(&mut bytes)?;
        let problem = if crate::job::util::digest::sha256_hex(&bytes) != hash {
            Some("does not hash to its name".to_string())
        } else {
            crate::job::files::bytes_problem(&bytes).map(|p| match p {
                crate::job::files::Problem::Bad(what) => what,
                _ => "is empty".to_string(),
            })
        };
        if let Some(problem) = problem {
            let (shelf, name) = Disk::name(hash)?;
            if let Ok(shelf) = self.shelf(shelf, false) {
                let _ = unlinkat(&shelf, name, AtFlags::empty());
            }
            return Err(bad(format!("{} {problem}", self.path(hash).display())));
        }
        crate::job::util::whole::write_whole(here, &bytes, 0o666, || Ok(()))?;
        used(&file);
        Ok(())
    }

    /// Keeps a copy of the output `here`, whose digest is `hash`, unless this user keeps a
    /// file of these very bytes already: written read-only under a temporary name, then renamed
    /// into place (over a kept file of other bytes), so a kept file is always whole. Nothing is
    /// kept when `here`'s bytes do not hash to `hash`.
    pub fn keep(&self, here: &Path, hash: &str) -> std::io::Result<()> {
        let (shelf_name, name) = Disk::name(hash)?;
        let bytes = fs::read(here)?;
        if crate::job::util::digest::sha256_hex(&bytes) != hash {
            return Err(bad(format!(
                "{} does not hash to {hash} (changed since it was fetched)",
                here.display()
            )));
        }
        if let Ok((mut file, len)) = self.kept(hash) {
            let mut kept = Vec::with_capacity(len as usize);
            if len == bytes.len() as u64 && file.read_to_end(&mut kept).is_ok() && kept == bytes {
                used(&file);
                return Ok(());
            }
        }
        let shelf = self.shelf(shelf_name, true)?;
        // Unique to this call: two jobs of one link may give the same output.
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let temporary = format!(".{hash}.{}.{call}.partial", std::process::id());
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = openat(
            &shelf,
            temporary.as_str(),
            flags,
            Mode::from_raw_mode(0o444),
        )?;
        let written = fs::File::from(fd)
            .write_all(&bytes)
            .and_then(|()| renameat(&shelf, temporary.as_str(), &shelf, name).map_err(Error::from));
        if written.is_err() {
            let _ = unlinkat(&shelf, temporary.as_str(), AtFlags::empty());
        }
        written
    }

    /// Removes the kept files no output used for `MAX_AGE`, when the directory was not walked
    /// for `TRIM_EVERY` (its `trimmed` file says when it was). Symbolic links are removed, never
    /// followed.
    pub fn trim(&self) {
        if !self.stamp() {
            return;
        }
        let oldest = SystemTime::now()
            .checked_sub(MAX_AGE)
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs() as i64);
        // Every entry read from a directory opened here, looked at and removed relative to it:
        // a link is removed, never followed, and no name is looked up through one.
        for shelf in names(&self.cas) {
            let fd = match openat(&self.cas, shelf.as_c_str(), dir_flags(), Mode::empty()) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                    let _ = unlinkat(&self.cas, shelf.as_c_str(), AtFlags::empty());
                    continue;
                }
                Err(_) => continue,
            };
            for file in names(&fd) {
                let Ok(st) = statat(&fd, file.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) else {
                    continue;
                };
                // ctime: set when the file was kept, or marked as used.
                let link = FileType::from_raw_mode(st.st_mode) == FileType::Symlink;
                if link || st.st_ctime < oldest {
                    let _ = unlinkat(&fd, file.as_c_str(), AtFlags::empty());
                }
            }
        }
    }

    /// Whether the directory is due to be walked (its `trimmed` stamp is missing or older than
    /// `TRIM_EVERY`); when it is, the stamp is set now. A stamp that is not a regular file (a
    /// symbolic link) is removed, not followed, and made again.
    fn stamp(&self) -> bool {
        let now = SystemTime::now();
        if let Ok(st) = statat(&self.top, "trimmed", AtFlags::SYMLINK_NOFOLLOW) {
            if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
                let _ = unlinkat(&self.top, "trimmed", AtFlags::empty());
            } else {
                let then = SystemTime::UNIX_EPOCH + Duration::from_secs(st.st_mtime.max(0) as u64);
                if now.duration_since(then).unwrap_or_default() < TRIM_EVERY {
                    return false;
                }
            }
        }
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let Ok(fd) = openat(&self.top, "trimmed", flags, Mode::from_raw_mode(0o600)) else {
            return false;
        };
        fs::File::from(fd).set_modified(now).is_ok()
    }
}

/// The names in the directory `fd` (but `.` and `..`), read from it.
fn names(fd: &OwnedFd) -> Vec<std::ffi::CString> {
    let Ok(dir) = rustix::fs::Dir::read_from(fd) else {
        return Vec::new();
    };
    dir.flatten()
        .map(|e| e.file_name().to_owned())
        .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
        .collect()
}

/// Directories are opened without following a symbolic link.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Marks a kept file as used: setting its mode sets its change time.
fn used(file: &fs::File) {
    let _ = fchmod(file, Mode::from_raw_mode(0o444));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn object(tag: u8) -> Vec<u8> {
        // A minimal relocatable ELF object: its 64-byte header, no sections.
        let mut o = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x01\0>\0\x01\0\0\0".to_vec();
        o.resize(64, 0);
        o[63] = tag;
        o
    }

    #[test]
    fn a_kept_output_is_a_copy_placed_again_only_when_its_bytes_are_its_digest() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::open(dir.path().join("cache")).unwrap();
        let mode = fs::metadata(dir.path().join("cache")).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let out = dir.path().join("a.o");
        fs::write(&out, object(1)).unwrap();
        fs::set_permissions(&out, fs::Permissions::from_mode(0o600)).unwrap();
        let hash = crate::job::util::digest::sha256_hex(&object(1));
        let not_kept = disk.place(&hash, 64, &dir.path().join("x.o")).unwrap_err();
        assert_eq!(not_kept.kind(), ErrorKind::NotFound);
        disk.keep(&out, &hash).unwrap();
        disk.keep(&out, &hash).unwrap();
        let kept = disk.path(&hash);
        let inode = |p: &Path| fs::metadata(p).unwrap().ino();
        assert_ne!(inode(&kept), inode(&out), "a copy, not the output's inode");
        assert_eq!(
            fs::metadata(&out).unwrap().mode() & 0o777,
            0o600,
            "the output's own mode"
        );
        assert_eq!(
            fs::metadata(&kept).unwrap().mode() & 0o222,
            0,
            "kept read-only"
        );
        let again = dir.path().join("b.o");
        fs::write(&again, b"stale").unwrap();
        disk.place(&hash, 64, &again).unwrap();
        assert_eq!(fs::read(&again).unwrap(), object(1));
        assert_ne!(inode(&again), inode(&kept), "placed as a copy");
        // An output that does not hash to the digest it is kept under is not kept.
        let liar = dir.path().join("liar.o");
        fs::write(&liar, object(2)).unwrap();
        let other = crate::job::util::digest::sha256_hex(b"other");
        assert_eq!(
            disk.keep(&liar, &other).unwrap_err().kind(),
            ErrorKind::InvalidData
        );
        assert!(!disk.path(&other).exists());
        for bad in [
            "../../../etc/passwd",
            "/abs",
            &hash.to_uppercase(),
            &hash[1..],
        ] {
            let e = disk.place(bad, 64, &dir.path().join("e.o")).unwrap_err();
            assert!(e.to_string().contains("is not a SHA-256 digest"), "{e}");
            assert!(disk.keep(&again, bad).is_err());
        }
        let shelf = fs::read_dir(kept.parent().unwrap()).unwrap().count();
        assert_eq!(shelf, 1, "no temporary file is left");
    }

    #[test]
    fn a_kept_file_changed_in_place_or_of_another_size_is_a_miss_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::open(dir.path().to_path_buf()).unwrap();
        let out = dir.path().join("a.o");
        fs::write(&out, object(1)).unwrap();
        let hash = crate::job::util::digest::sha256_hex(&object(1));
        disk.keep(&out, &hash).unwrap();
        let kept = disk.path(&hash);
        // Rewritten in place, the same size (as strip or objcopy running as root would).
        fs::set_permissions(&kept, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(&kept, object(9)).unwrap();
        let e = disk.place(&hash, 64, &dir.path().join("b.o")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidData);
        assert!(e.to_string().contains("does not hash to its name"), "{e}");
        assert!(!kept.exists(), "removed");
        assert!(!dir.path().join("b.o").exists());
        disk.keep(&out, &hash).unwrap();
        let e = disk.place(&hash, 63, &dir.path().join("c.o")).unwrap_err();
        assert!(
            e.to_string().contains("has 64 bytes, its digest says 63"),
            "{e}"
        );
        // Not an object: a miss too.
        let text = b"not an object at all";
        let text_hash = crate::job::util::digest::sha256_hex(text);
        fs::write(dir.path().join("t"), text).unwrap();
        disk.keep(&dir.path().join("t"), &text_hash).unwrap();
        let e = disk
            .place(&text_hash, text.len() as i64, &dir.path().join("d.o"))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
    }

    #[test]
    fn symbolic_links_planted_in_the_cache_are_neither_followed_nor_taken() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::open(dir.path().join("cache")).unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, object(1)).unwrap();
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o644)).unwrap();
        let hash = crate::job::util::digest::sha256_hex(&object(1));
        // The kept file is a link to the user's file: not taken, not chmod-ed.
        let kept = disk.path(&hash);
        fs::create_dir_all(kept.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&victim, &kept).unwrap();
        let e = disk.place(&hash, 64, &dir.path().join("b.o")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
        assert_eq!(
            fs::metadata(&victim).unwrap().mode() & 0o777,
            0o644,
            "left alone"
        );
        // Keeping replaces the link with a file, and the user's file stays as it was.
        disk.keep(&victim, &hash).unwrap();
        assert!(!fs::symlink_metadata(&kept).unwrap().is_symlink());
        assert_eq!(fs::read(&victim).unwrap(), object(1));
        // A shelf that is a link to another directory is not entered; trim removes the link
        // and leaves what it names.
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        fs::write(elsewhere.join("precious"), b"keep me").unwrap();
        let other = crate::job::util::digest::sha256_hex(b"other");
        let other_shelf = disk.path(&other).parent().unwrap().to_path_buf();
        std::os::unix::fs::symlink(&elsewhere, &other_shelf).unwrap();
        let e = disk.place(&other, 7, &dir.path().join("c.o")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
        disk.trim();
        assert!(elsewhere.join("precious").exists());
        assert!(fs::symlink_metadata(&other_shelf).is_err());
    }

    #[test]
    fn trim_removes_planted_links_and_never_writes_or_removes_through_one() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let disk = Disk::open(cache.clone()).unwrap();
        // The user's file, last written two days ago: a stamp that names it is due.
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let two_days = SystemTime::now() - Duration::from_secs(2 * 24 * 3600);
        fs::File::options()
            .write(true)
            .open(&victim)
            .unwrap()
            .set_modified(two_days)
            .unwrap();
        std::os::unix::fs::symlink(&victim, cache.join("trimmed")).unwrap();
        let shelf = cache.join("cas/ab");
        fs::create_dir(&shelf).unwrap();
        std::os::unix::fs::symlink(&victim, shelf.join("a-link")).unwrap();
        disk.trim();
        assert_eq!(
            fs::read(&victim).unwrap(),
            b"precious",
            "not written through"
        );
        assert!(
            fs::symlink_metadata(shelf.join("a-link")).is_err(),
            "removed"
        );
        let stamp = fs::symlink_metadata(cache.join("trimmed")).unwrap();
        assert!(stamp.is_file(), "the stamp made again as a file");
        // A stamp set just now: the next trim does not walk (a link planted now stays).
        std::os::unix::fs::symlink(&victim, shelf.join("later")).unwrap();
        disk.trim();
        assert!(fs::symlink_metadata(shelf.join("later")).is_ok());
    }

    #[test]
    fn a_kept_file_that_is_another_name_of_an_output_is_neither_taken_nor_marked() {
        // An older version kept an output as a hard link of it, and made it read-only.
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::open(dir.path().join("cache")).unwrap();
        let out = dir.path().join("a.o");
        fs::write(&out, object(4)).unwrap();
        fs::set_permissions(&out, fs::Permissions::from_mode(0o644)).unwrap();
        let hash = crate::job::util::digest::sha256_hex(&object(4));
        let kept = disk.path(&hash);
        fs::create_dir_all(kept.parent().unwrap()).unwrap();
        fs::hard_link(&out, &kept).unwrap();
        let e = disk.place(&hash, 64, &dir.path().join("b.o")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
        assert!(e.to_string().contains("shares its inode"), "{e}");
        assert!(!kept.exists(), "the cache's name removed");
        assert_eq!(fs::metadata(&out).unwrap().mode() & 0o777, 0o644);
        assert_eq!(fs::read(&out).unwrap(), object(4), "the output left whole");
        fs::hard_link(&out, &kept).unwrap();
        disk.keep(&out, &hash).unwrap();
        let inode = |p: &Path| fs::metadata(p).unwrap().ino();
        assert_ne!(inode(&kept), inode(&out), "kept again as a copy");
        assert_eq!(fs::metadata(&out).unwrap().mode() & 0o777, 0o644);
        // Planted bytes of the right size under the name: keep replaces them.
        fs::remove_file(&kept).unwrap();
        fs::write(&kept, object(5)).unwrap();
        disk.keep(&out, &hash).unwrap();
        assert_eq!(fs::read(&kept).unwrap(), object(4));
        disk.place(&hash, 64, &dir.path().join("c.o")).unwrap();
    }

    #[test]
    fn a_directory_of_another_user_or_writable_by_others_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let e = Disk::open(open.clone()).unwrap_err();
        assert!(e.contains("others may write"), "{e}");
        assert!(e.contains("--remote-disk-cache"), "{e}");
        assert!(e.contains("DTLTO_BRIDGE_REMOTE_DISK_CACHE"), "{e}");
        assert!(!open.join("cas").exists(), "nothing made in it");
        // Its cas directory writable by others, though it is not.
        let mine = dir.path().join("mine");
        Disk::open(mine.clone()).unwrap();
        fs::set_permissions(mine.join("cas"), fs::Permissions::from_mode(0o777)).unwrap();
        let e = Disk::open(mine).unwrap_err();
        assert!(e.contains("cas (mode 777)"), "{e}");
        let theirs = dir.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&theirs, Some(4242), None).unwrap();
            let e = Disk::open(theirs).unwrap_err();
            assert!(e.contains("belongs to uid 4242"), "{e}");
        }
    }

    #[test]
    fn trim_walks_at_most_once_a_day_and_keeps_recent_files() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::open(dir.path().to_path_buf()).unwrap();
        let out = dir.path().join("a.o");
        fs::write(&out, object(3)).unwrap();
        let hash = crate::job::util::digest::sha256_hex(&object(3));
        disk.keep(&out, &hash).unwrap();
        disk.trim();
        assert!(dir.path().join("trimmed").exists());
        disk.place(&hash, 64, &dir.path().join("b.o")).unwrap();
    }
}
