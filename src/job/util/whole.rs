//! Whole: files written whole or not at all — on `tempfile` under a temporary name renamed
//! into place, or made without a name and linked once whole where Linux can — and a file's
//! modification time set to now.
//!
//! It knows files, renames and links; it does not know what the files hold or who reads them.

use camino::Utf8Path;
use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A file being written under a temporary name beside its final one, renamed into place only
/// when whole, so that readers (and concurrent links writing one report) never see half of it.
/// Dropped without `commit`, the temporary file is removed.
pub struct Partial {
    path: std::path::PathBuf,
    file: tempfile::NamedTempFile,
}

impl Partial {
    /// Whether `path` can be written so: anything but a regular file (`/dev/null`, a pipe, a
    /// terminal) is written in place, since renaming over it would replace it.
    pub fn possible(path: &Utf8Path) -> bool {
        fs::metadata(path).map_or(true, |m| m.is_file())
    }

    /// A new file that becomes `path`, created with `mode` (less the umask).
    pub fn create_mode(path: &Path, mode: u32) -> std::io::Result<Partial> {
        let (dir, prefix) = beside(path);
        let file = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".partial")
            .permissions(fs::Permissions::from_mode(mode))
            .tempfile_in(dir)
            // As the OS said it (tempfile adds the random name, which the user never chose).
            .map_err(as_the_os_said)?;
        Ok(Partial {
            path: path.to_owned(),
            file,
        })
    }

    /// `file`, a file without a name written whole, as the temporary file that becomes `path`.
    fn linked(path: &Path, file: &File) -> std::io::Result<Partial> {
        let (dir, prefix) = beside(path);
        let file = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".partial")
            .make_in(dir, |temp| {
                unnamed::link(file, temp)?;
                file.try_clone()
            })
            .map_err(as_the_os_said)?;
        Ok(Partial {
            path: path.to_owned(),
            file,
        })
    }

    /// A new file that becomes `path`, created as `File::create` would (mode 0666 less the umask).
    pub fn create(path: &Utf8Path) -> std::io::Result<Partial> {
        Partial::create_mode(path.as_std_path(), 0o666)
    }

    pub fn file(&self) -> &File {
        self.file.as_file()
    }

    /// Renames the file into place; on failure it is removed.
    pub fn commit(self) -> std::io::Result<()> {
        self.file.persist(&self.path).map(drop).map_err(|e| e.error)
    }

    pub fn discard(self) {}
}

/// The directory of `path` (`.` for a bare name), and the prefix of its temporary files there.
fn beside(path: &Path) -> (&Path, String) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    (dir, format!(".{name}."))
}

/// `e` without the path tempfile adds to it (` at path "DIR/.NAME.RANDOM.partial"`, a name the
/// user never chose): the OS's error as `File::create` gives it.
fn as_the_os_said(e: std::io::Error) -> std::io::Error {
    let text = e.to_string();
    match text.rfind(" at path \"") {
        Some(at) if e.get_ref().is_some() => std::io::Error::new(e.kind(), &text[..at]),
        _ => e,
    }
}

/// Writes `path` whole or not at all (see `Partial`).
pub fn write_atomically(
    path: &Utf8Path,
    write: impl FnOnce(&mut &File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    if !Partial::possible(path) {
        let f = fs::OpenOptions::new().write(true).open(path)?;
        return write(&mut &f);
    }
    let partial = Partial::create(path)?;
    write(&mut partial.file())?;
    partial.commit()
}

/// Writes `bytes` to the regular file `path` whole or not at all, created with `mode` (less the
/// umask); `before` is asked last and may still refuse (the file is then not written).
///
/// Where it can (Linux), the file is written without a name and then linked as `path`: many
/// files written at once into one directory do not wait for each other on the directory, as a
/// temporary name and a rename do (two changes of it, the file's creation inside one). When
/// `path` is already there, the file is linked under a temporary name and renamed over it.
/// Where no file without a name can be made or linked (another system or file system, no
/// /proc), it is written under a temporary name (`Partial`).
pub fn write_whole(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    before: impl FnOnce() -> std::io::Result<()>,
) -> std::io::Result<()> {
    let Some(file) = unnamed::create(path, mode) else {
        return write_named(path, bytes, mode, before);
    };
    std::io::Write::write_all(&mut &file, bytes)?;
    before()?;
    let linked = match unnamed::link(&file, path) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Partial::linked(path, &file),
        Err(e) => Err(e),
    };
    match linked {
        Ok(partial) => partial.commit(),
        // Not linked at all (no /proc, or a file system that refuses): written again under a
        // temporary name, which says why it cannot be when it cannot; and no file without a
        // name is made again.
        Err(_) => {
            unnamed::refused();
            write_named(path, bytes, mode, || Ok(()))
        }
    }
}

/// `write_whole` under a temporary name, renamed into place.
fn write_named(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    before: impl FnOnce() -> std::io::Result<()>,
) -> std::io::Result<()> {
    let partial = Partial::create_mode(path, mode)?;
    std::io::Write::write_all(&mut partial.file(), bytes)?;
    before()?;
    partial.commit()
}

/// Files made without a name in a directory (`O_TMPFILE`), and linked there once whole.
#[cfg(target_os = "linux")]
mod unnamed {
    use rustix::fs::{linkat, openat, AtFlags, Mode, OFlags, CWD};
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Set once a file without a name could not be linked: none is made again.
    static REFUSED: AtomicBool = AtomicBool::new(false);

    /// A file without a name in `path`'s directory, or None where none can be made there.
    pub fn create(path: &Path, mode: u32) -> Option<std::fs::File> {
        if REFUSED.load(Ordering::Relaxed) {
            return None;
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let flags = OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC;
        let fd = openat(CWD, dir, flags, Mode::from_raw_mode(mode)).ok()?;
        Some(std::fs::File::from(fd))
    }

    /// Gives `file` the name `path`, which must not be taken.
    pub fn link(file: &std::fs::File, path: &Path) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let this = format!("/proc/self/fd/{}", file.as_raw_fd());
        linkat(CWD, this.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW)?;
        Ok(())
    }

    /// Files without a name are not made again in this process.
    pub fn refused() {
        REFUSED.store(true, Ordering::Relaxed);
    }
}

#[cfg(not(target_os = "linux"))]
mod unnamed {
    use std::path::Path;

    pub fn create(_: &Path, _: u32) -> Option<std::fs::File> {
        None
    }

    pub fn link(_: &std::fs::File, _: &Path) -> std::io::Result<()> {
        Err(std::io::ErrorKind::Unsupported.into())
    }

    pub fn refused() {}
}

/// Sets the file's modification time to now, without changing it otherwise.
pub fn touch(path: &Path) -> std::io::Result<()> {
    let f = std::fs::File::options().write(true).open(path)?;
    f.set_modified(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use camino::Utf8PathBuf;

    #[test]
    fn a_whole_write_leaves_nothing_when_refused_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o");
        let refused = write_whole(&path, b"x", 0o600, || {
            Err(std::io::Error::other("cancelled"))
        });
        assert!(refused.is_err());
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            0,
            "no partial file left"
        );
        write_whole(&path, b"x", 0o600, || Ok(())).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!((fs::read(&path).unwrap(), mode), (b"x".to_vec(), 0o600));
    }

    #[test]
    fn a_write_under_a_temporary_name_leaves_nothing_when_refused_at_the_end() {
        // The way taken where no file without a name can be made.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o");
        let refused = write_named(&path, b"x", 0o600, || {
            Err(std::io::Error::other("cancelled"))
        });
        assert_eq!(refused.unwrap_err().to_string(), "cancelled");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        write_named(&path, b"x", 0o600, || Ok(())).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"x");
    }

    #[test]
    fn a_whole_write_replaces_a_file_already_there_and_leaves_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o");
        fs::write(&path, b"old").unwrap();
        // Where a file without a name can be made, it cannot be linked as `o`: it is linked
        // under a temporary name and renamed over `o`.
        write_whole(&path, b"new", 0o640, || Ok(())).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!((fs::read(&path).unwrap(), mode), (b"new".to_vec(), 0o640));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        // Into a directory that is not there: the OS's error.
        let e = write_whole(&dir.path().join("no/o"), b"x", 0o600, || Ok(())).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn files_without_a_name_are_linked_once_whole() {
        // tmpfs makes files without a name (Linux 3.11 on); a file system that cannot makes
        // none, and write_whole then writes under a temporary name.
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let path = dir.path().join("o");
        let file = unnamed::create(&path, 0o600).expect("a file without a name on tmpfs");
        std::io::Write::write_all(&mut &file, b"whole").unwrap();
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            0,
            "not seen before linked"
        );
        unnamed::link(&file, &path).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"whole");
        let taken = unnamed::link(&file, &path).unwrap_err();
        assert_eq!(taken.kind(), std::io::ErrorKind::AlreadyExists);
    }

    #[test]
    fn a_file_that_cannot_be_created_is_the_os_error_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::from_path_buf(dir.path().join("no/such/f")).unwrap();
        let e = write_atomically(&path, |_| Ok(())).unwrap_err();
        assert_eq!(e.to_string(), "No such file or directory (os error 2)");
    }

    #[test]
    fn an_atomic_write_leaves_the_old_file_when_it_fails() {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::from_path_buf(dir.path().join("r.json")).unwrap();
        write_atomically(&path, |f| std::io::Write::write_all(f, b"one")).unwrap();
        let failed = write_atomically(&path, |_| Err(std::io::Error::other("no room")));
        assert!(failed.is_err());
        assert_eq!(fs::read_to_string(&path).unwrap(), "one");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no partial file left"
        );
    }
}
