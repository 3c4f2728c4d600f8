//! Atomic: a file written under a temporary name beside its final one and renamed into place
//! only when whole, so readers never see half of it.
//!
//! It knows files and renames; it does not know what the files hold or who reads them.

use camino::{Utf8Path, Utf8PathBuf};
use std::fs::{self, File};

/// A file being written under a temporary name beside its final one, renamed into place only
/// when whole, so that readers (and concurrent links writing one report) never see half of it.
pub struct Partial {
    path: Utf8PathBuf,
    partial: Utf8PathBuf,
    file: File,
}

impl Partial {
    /// Whether `path` can be written so: anything but a regular file (`/dev/null`, a pipe, a
    /// terminal) is written in place, since renaming over it would replace it.
    pub fn possible(path: &Utf8Path) -> bool {
        fs::metadata(path).map_or(true, |m| m.is_file())
    }

    pub fn create(path: &Utf8Path) -> std::io::Result<Partial> {
        let partial = Utf8PathBuf::from(format!("{path}.{}.partial", std::process::id()));
        let file = File::create(&partial)?;
        Ok(Partial {
            path: path.to_owned(),
            partial,
            file,
        })
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn commit(self) -> std::io::Result<()> {
        let renamed = fs::rename(&self.partial, &self.path);
        if renamed.is_err() {
            let _ = fs::remove_file(&self.partial);
        }
        renamed
    }

    pub fn discard(self) {
        let _ = fs::remove_file(&self.partial);
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
    match write(&mut partial.file()) {
        Ok(()) => partial.commit(),
        Err(e) => {
            partial.discard();
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
