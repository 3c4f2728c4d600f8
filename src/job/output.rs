//! Output: what a job's output files must look like, how to remove a job's traces, and when two
//! paths name the same file.
//!
//! It knows the file system and enough of ELF to see a truncated object (clang-22 exits 0 and
//! writes an empty object when an import is missing), and how clang names its temporaries; it
//! does not know jobs, statuses or how anything ran.

use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

/// What is wrong with an output file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    Missing,
    /// Empty, or an ELF object whose section headers lie past its end.
    Bad(&'static str),
}

impl Problem {
    /// "exit status 0, but it did not write a.o", for a job that exited 0.
    pub fn describe(&self, path: &str) -> String {
        match self {
            Problem::Missing => format!("exit status 0, but it did not write {path}"),
            Problem::Bad(what) => format!("exit status 0, but it wrote {what} {path}"),
        }
    }
}

/// Checks one output: it must exist, be non-empty and, if it is an ELF object, be whole.
pub fn problem(path: &Path) -> Option<Problem> {
    let Ok(mut file) = std::fs::File::open(path) else {
        return Some(Problem::Missing);
    };
    let len = file.metadata().map_or(0, |m| m.len());
    if len == 0 {
        return Some(Problem::Bad("an empty"));
    }
    // The ELF header is all that is needed: 64 bytes at most.
    let mut header = Vec::with_capacity(64);
    if file.by_ref().take(64).read_to_end(&mut header).is_err() || elf_truncated(&header, len) {
        return Some(Problem::Bad("a truncated"));
    }
    None
}

/// The first problem among `outputs` (relative to `dir`), described, if any.
pub fn first_problem<S: AsRef<str>>(dir: &Path, outputs: &[S]) -> Option<String> {
    outputs.iter().find_map(|out| {
        let out = out.as_ref();
        problem(&dir.join(out)).map(|p| p.describe(out))
    })
}

/// An ELF file of `len` bytes is cut short when its header or its section header table lies
/// past its end; `b` is its start (the header).
fn elf_truncated(b: &[u8], len: u64) -> bool {
    if !b.starts_with(b"\x7fELF") {
        return false;
    }
    let (is64, little) = match (b.get(4), b.get(5)) {
        (Some(1), Some(1)) => (false, true),
        (Some(1), Some(2)) => (false, false),
        (Some(2), Some(1)) => (true, true),
        (Some(2), Some(2)) => (true, false),
        _ => return true,
    };
    let read = |at: usize, len: usize| -> Option<u64> {
        let s = b.get(at..at + len)?;
        let mut v = 0u64;
        for i in 0..len {
            let byte = if little { s[len - 1 - i] } else { s[i] };
            v = (v << 8) | u64::from(byte);
        }
        Some(v)
    };
    let fields = if is64 {
        (read(0x28, 8), read(0x3A, 2), read(0x3C, 2))
    } else {
        (read(0x20, 4), read(0x2E, 2), read(0x30, 2))
    };
    match fields {
        (Some(shoff), Some(shentsize), Some(shnum)) => {
            shoff.saturating_add(shentsize.saturating_mul(shnum)) > len
        }
        _ => true,
    }
}

/// Removes a job's outputs and the temporaries clang leaves beside them when it is killed
/// (`out.native-1a2b3c4d.o.tmp` for `out.native.o`), so no later link picks up a partial object.
pub fn remove<S: AsRef<str>>(dir: &Path, outputs: &[S]) {
    for out in outputs {
        let path = dir.join(out.as_ref());
        let _ = std::fs::remove_file(&path);
        remove_temporaries(&path);
    }
}

/// Removes clang's temporaries for `output`: `STEM-XXXXXXXX.EXT.tmp` in the same directory,
/// where the X are hexadecimal digits.
fn remove_temporaries(output: &Path) {
    let (Some(parent), Some(stem)) = (output.parent(), output.file_stem()) else {
        return;
    };
    let ext = output
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let prefix = format!("{}-", stem.to_string_lossy());
    let suffix = format!("{ext}.tmp");
    let dir = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if is_temporary(&name, &prefix, &suffix) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn is_temporary(name: &str, prefix: &str, suffix: &str) -> bool {
    name.len() == prefix.len() + 8 + suffix.len()
        && name.starts_with(prefix)
        && name.ends_with(suffix)
        && name[prefix.len()..prefix.len() + 8]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
}

/// A path as the file system resolves it without looking at links, for telling whether two
/// paths name one file: `.` components and repeated or trailing slashes go, `dir/..` folds
/// (as ninja does), and an absolute path inside `cwd` becomes relative to it.
pub fn identity<'a>(path: &'a str, cwd: &str) -> Cow<'a, str> {
    let relative = match path.strip_prefix(cwd) {
        Some(rest) if !cwd.is_empty() && rest.starts_with('/') => &rest[1..],
        _ => path,
    };
    // Most paths: relative, no `.` or empty component. A name that merely starts with a dot
    // (`d/.hidden`) takes the long way, to the same result.
    let b = relative.as_bytes();
    let plain = !b.is_empty()
        && relative.len() == path.len()
        && b[0] != b'/'
        && b[0] != b'.'
        && b[b.len() - 1] != b'/'
        && memchr::memchr_iter(b'/', b).all(|i| !matches!(b.get(i + 1), Some(b'/' | b'.')));
    if plain {
        return Cow::Borrowed(path);
    }
    let absolute = relative.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in relative.split('/') {
        match c {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            c => parts.push(c),
        }
    }
    let joined = parts.join("/");
    Cow::Owned(match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 little-endian header whose section headers end at `end`.
    fn elf64(len: usize, shoff: u64, shnum: u16) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        b[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        b[0x3C..0x3E].copy_from_slice(&shnum.to_le_bytes());
        b
    }

    #[test]
    fn outputs_are_checked_for_presence_emptiness_and_truncation() {
        let dir = tempfile::tempdir().unwrap();
        type Case = (&'static str, Option<Vec<u8>>, Option<Problem>);
        let cases: &[Case] = &[
            ("missing.o", None, Some(Problem::Missing)),
            ("empty.o", Some(vec![]), Some(Problem::Bad("an empty"))),
            ("whole.o", Some(elf64(64 + 2 * 64, 64, 2)), None),
            (
                "cut.o",
                Some(elf64(64 + 64, 64, 2)),
                Some(Problem::Bad("a truncated")),
            ),
            (
                "header-cut.o",
                Some(b"\x7fELF\x02\x01".to_vec()),
                Some(Problem::Bad("a truncated")),
            ),
            ("notes.yaml", Some(b"--- text".to_vec()), None),
        ];
        for (name, contents, want) in cases {
            let p = dir.path().join(name);
            if let Some(c) = contents {
                std::fs::write(&p, c).unwrap();
            }
            assert_eq!(&problem(&p), want, "{name}");
        }
    }

    #[test]
    fn removal_takes_clangs_temporaries_but_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let keep = [
            "main.1.native-1a2b3c4.o.tmp",
            "main.1.native-1a2b3c4g.o.tmp",
            "main.1.native.o.tmp",
            "other.native-1a2b3c4d.o.tmp",
            "main.1.native-1a2b3c4d.o",
        ];
        let gone = [
            "main.1.native.o",
            "main.1.native-1a2b3c4d.o.tmp",
            "x-0f0f0f0f.tmp",
        ];
        for name in keep.iter().chain(&gone) {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        remove(dir.path(), &["main.1.native.o", "x"]);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want: Vec<String> = keep.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(left, want);
    }

    #[test]
    fn identities_fold_what_names_one_file() {
        let table = [
            ("a.o", "a.o"),
            ("./a.o", "a.o"),
            ("d//a.o", "d/a.o"),
            ("d/./a.o", "d/a.o"),
            ("d/../a.o", "a.o"),
            ("../x/a.o", "../x/a.o"),
            ("../../a.o", "../../a.o"),
            ("/build/b/a.o", "a.o"),
            ("/build/bb/a.o", "/build/bb/a.o"),
            ("/other/./a.o", "/other/a.o"),
            ("/../a.o", "/a.o"),
            (".", "."),
            ("d/..", "."),
        ];
        for (path, want) in table {
            assert_eq!(identity(path, "/build/b"), want, "{path}");
        }
    }
}
