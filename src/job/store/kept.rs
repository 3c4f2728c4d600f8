//! Kept: the one layout of every file remembered between links — a first line naming the
//! file's kind and layout version, `dtlto-bridge KIND VERSION`, then the kind's lines; a file
//! of another kind or version (or an older file without that line) reads as nothing, and a
//! file is written whole or not at all.
//!
//! It knows the layout and how a file is read and written; it does not know what a kind's
//! lines hold (each kind parses its own).

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

/// A kind of remembered file, at one layout version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    name: &'static str,
    version: u32,
}

impl Kind {
    pub const fn new(name: &'static str, version: u32) -> Kind {
        Kind { name, version }
    }

    /// The first line of a file of this kind and version.
    pub fn header(&self) -> String {
        format!("dtlto-bridge {} {}", self.name, self.version)
    }

    /// The lines after the header of `text`, or None when it is not of this kind and version.
    fn body<'t>(&self, text: &'t str) -> Option<&'t str> {
        let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
        (first == self.header()).then_some(rest)
    }

    /// A file's text for `lines`, in their order.
    fn text(&self, lines: impl IntoIterator<Item = String>) -> String {
        let mut text = self.header();
        text.push('\n');
        for line in lines {
            text.push_str(&line);
            text.push('\n');
        }
        text
    }
}

// Every kind kept, with its layout's version (raised when what its lines hold changes).

/// How long each job took, and what went into its remote action (`report::history`).
pub const HISTORY: Kind = Kind::new("history", 1);
/// Input files' digests by their identity and by their content (`remote::memo::inputs`).
pub const DIGESTS: Kind = Kind::new("digests", 2);
/// Each job's action by what it is built from (`remote::memo::jobs`).
pub const ACTIONS: Kind = Kind::new("actions", 2);
/// Compilers' identities (`remote::memo::compilers`).
pub const COMPILERS: Kind = Kind::new("compilers", 1);
/// An emitted link's archives as they were read (`link::fingerprint`), kept in the emitted
/// link's own directory.
pub const ARCHIVES: Kind = Kind::new("archives", 1);

/// One remembered file: where it is and its kind.
#[derive(Debug, Clone)]
pub struct Kept {
    path: PathBuf,
    kind: Kind,
}

impl Kept {
    /// The file of `kind` at `path`.
    pub fn new(path: impl Into<PathBuf>, kind: Kind) -> Kept {
        Kept {
            path: path.into(),
            kind,
        }
    }

    /// Where it is (tests look at the file).
    #[cfg(test)]
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Its lines after the header (None: missing, unreadable, or not of this kind and version).
    pub fn read(&self) -> Option<String> {
        let mut text = std::fs::read_to_string(&self.path).ok()?;
        let body = self.kind.body(&text)?.len();
        text.drain(..text.len() - body);
        Some(text)
    }

    /// Keeps the file for the next link: only marked as used (for the trims) when `unchanged`
    /// and it is there, else written whole with the lines `lines()` gives, in their order, its
    /// directory made (0700) when missing. Whether it was written.
    pub fn keep(
        &self,
        unchanged: bool,
        lines: impl FnOnce() -> io::Result<Vec<String>>,
    ) -> io::Result<bool> {
        if unchanged && crate::job::util::whole::touch(&self.path).is_ok() {
            return Ok(false);
        }
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let text = self.kind.text(lines()?);
        crate::job::util::whole::write_whole(&self.path, text.as_bytes(), 0o666, || Ok(()))?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_another_kind_or_version_reads_as_nothing() {
        let digests = Kind::new("digests", 1);
        let text = digests.text(["a 1".to_string(), "b 2".to_string()]);
        assert_eq!(text, "dtlto-bridge digests 1\na 1\nb 2\n");
        assert_eq!(digests.body(&text), Some("a 1\nb 2\n"));
        assert_eq!(Kind::new("digests", 2).body(&text), None);
        assert_eq!(Kind::new("actions", 1).body(&text), None);
        assert_eq!(digests.body("dtlto-bridge digests 1"), Some(""));
        assert_eq!(digests.body(""), None);
        // An older file with no header at all (the history was plain JSON).
        assert_eq!(digests.body("{\"seconds\":{}}"), None);
    }

    #[test]
    fn kept_files_read_back_and_an_unchanged_one_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let kept = Kept::new(dir.path().join("sub/file"), Kind::new("test", 1));
        assert!(kept.keep(true, || Ok(vec!["x".into()])).unwrap());
        assert_eq!(kept.read().as_deref(), Some("x\n"));
        let unchanged = kept.keep(true, || panic!("not asked")).unwrap();
        assert!(!unchanged);
        std::fs::write(kept.path(), "dtlto-bridge test 0\nx\n").unwrap();
        assert_eq!(kept.read(), None);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("sub"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
