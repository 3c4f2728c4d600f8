//! Files: a job's files — the name of its index shard, what its outputs must look like, how its
//! traces are removed, and when two paths name the same file.
//!
//! It knows the file system and how clang names its temporaries, and asks `object` whether an
//! output is a whole object (clang-22 exits 0 and writes an empty object when an import is
//! missing); it does not know jobs, statuses or how anything ran.

use std::borrow::Cow;
use std::path::Path;

/// The index shard lld writes for the job whose object is `object` (the one place this name
/// is made): the object's path with `.thinlto.bc` added.
pub fn shard_name(object: &str) -> String {
    format!("{object}.thinlto.bc")
}

/// What is wrong with an output file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    Missing,
    Empty,
    /// Cut short, or of no object format known: "a truncated or damaged COFF object (...)".
    Bad(String),
}

impl Problem {
    /// "exit status 0, but it did not write a.o", for a job that exited 0.
    pub fn describe(&self, path: &str) -> String {
        match self {
            Problem::Missing => format!("exit status 0, but it did not write {path}"),
            Problem::Empty => format!("exit status 0, but it wrote an empty {path}"),
            Problem::Bad(what) => format!("exit status 0, but it wrote {path}, {what}"),
        }
    }
}

/// Checks one output: it must exist, be non-empty and be a whole object of a known format.
pub fn problem(path: &Path) -> Option<Problem> {
    let Ok(data) = std::fs::read(path) else {
        return Some(Problem::Missing);
    };
    bytes_problem(&data)
}

/// Checks an output's bytes (before they are written): non-empty and a whole object.
pub fn bytes_problem(data: &[u8]) -> Option<Problem> {
    if data.is_empty() {
        return Some(Problem::Empty);
    }
    crate::job::object::problem(data).map(Problem::Bad)
}

/// The first problem among `outputs` (relative to `dir`), described, if any.
pub fn first_problem<S: AsRef<str>>(dir: &Path, outputs: &[S]) -> Option<String> {
    outputs.iter().find_map(|out| {
        let out = out.as_ref();
        problem(&dir.join(out)).map(|p| p.describe(out))
    })
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

    #[test]
    fn outputs_are_checked_for_presence_emptiness_and_format() {
        let dir = tempfile::tempdir().unwrap();
        let obj = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/objects/x86_64.obj"
        ))
        .unwrap();
        // What `describe` says of each, or None for a fine output.
        type Case<'a> = (&'a str, Option<Vec<u8>>, Option<&'a str>);
        let cases: Vec<Case> = vec![
            ("missing.o", None, Some("but it did not write missing.o")),
            (
                "empty.o",
                Some(vec![]),
                Some("but it wrote an empty empty.o"),
            ),
            ("whole.obj", Some(obj.clone()), None),
            (
                "cut.obj",
                Some(obj[..obj.len() / 2].to_vec()),
                Some("cut.obj, a truncated or damaged COFF object ("),
            ),
            (
                "notes.yaml",
                Some(b"--- text, no object".to_vec()),
                Some("notes.yaml, a file that is no object of a format dtlto-bridge knows"),
            ),
        ];
        for (name, contents, want) in cases {
            let p = dir.path().join(name);
            if let Some(c) = contents {
                std::fs::write(&p, c).unwrap();
            }
            let got = problem(&p).map(|p| p.describe(name));
            match (want, &got) {
                (None, None) => {}
                (Some(w), Some(g)) if g.contains(w) => {}
                _ => panic!("{name}: {got:?}, not {want:?}"),
            }
        }
        assert_eq!(
            Problem::Bad("a truncated ELF object (x)".into()).describe("a.o"),
            "exit status 0, but it wrote a.o, a truncated ELF object (x)"
        );
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
