//! Store: the one layout of the small files dtlto-bridge remembers between links (input digests,
//! remembered jobs, compiler identities) — a first line naming the file's kind and layout
//! version, `dtlto-bridge KIND VERSION`, then one entry per line; a file of another kind or
//! version reads as empty, and a file is written whole or not at all.
//!
//! It knows the layout and how the file is read and written; it does not know what an entry's
//! line holds (each kind parses its own) or where the files live.

use std::io;
use std::path::Path;

/// A kind of remembered file, at one layout version.
pub struct Store {
    kind: &'static str,
    version: u32,
}

impl Store {
    pub const fn new(kind: &'static str, version: u32) -> Store {
        Store { kind, version }
    }

    /// The first line of a file of this kind and version.
    pub fn header(&self) -> String {
        format!("dtlto-bridge {} {}", self.kind, self.version)
    }

    /// The entries' lines of `text`, or None when it is not of this kind and version.
    pub fn body<'t>(&self, text: &'t str) -> Option<&'t str> {
        let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
        (first == self.header()).then_some(rest)
    }

    /// The text of the file at `path` (None: missing, unreadable, or not of this kind and
    /// version).
    pub fn read(&self, path: &Path) -> Option<String> {
        let text = std::fs::read_to_string(path).ok()?;
        self.body(&text)?;
        Some(text)
    }

    /// The file's text for `lines`, in their order.
    pub fn text(&self, lines: impl IntoIterator<Item = String>) -> String {
        let mut text = self.header();
        text.push('\n');
        for line in lines {
            text.push_str(&line);
            text.push('\n');
        }
        text
    }

    /// Keeps the file at `path` for the next link: only marked as used when `unchanged` and it
    /// is there, else written whole with the lines `lines()` gives, in their order.
    pub fn keep(
        &self,
        path: &Path,
        unchanged: bool,
        lines: impl FnOnce() -> io::Result<Vec<String>>,
    ) -> io::Result<bool> {
        super::fsutil::keep(path, unchanged, || Ok(self.text(lines()?).into_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_another_kind_or_version_reads_as_empty() {
        let digests = Store::new("digests", 1);
        let text = digests.text(["a 1".to_string(), "b 2".to_string()]);
        assert_eq!(text, "dtlto-bridge digests 1\na 1\nb 2\n");
        assert_eq!(digests.body(&text), Some("a 1\nb 2\n"));
        assert_eq!(Store::new("digests", 2).body(&text), None);
        assert_eq!(Store::new("actions", 1).body(&text), None);
        assert_eq!(digests.body("dtlto-bridge digests 1"), Some(""));
        assert_eq!(digests.body(""), None);
    }

    #[test]
    fn kept_files_read_back_and_an_unchanged_one_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/file");
        let store = Store::new("test", 1);
        assert!(store.keep(&path, true, || Ok(vec!["x".into()])).unwrap());
        assert_eq!(
            store.read(&path).as_deref(),
            Some("dtlto-bridge test 1\nx\n")
        );
        let unchanged = store.keep(&path, true, || panic!("not asked")).unwrap();
        assert!(!unchanged);
        std::fs::write(&path, "dtlto-bridge test 0\nx\n").unwrap();
        assert_eq!(store.read(&path), None);
    }
}
