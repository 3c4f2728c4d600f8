//! Cache: the cache directory where links are remembered (`--history`, by default
//! `$XDG_CACHE_HOME/dtlto-bridge`), the only place that names a file in it: per link (a
//! directory and a linker output) its history, input digests and remembered actions, named by
//! one stable stem; the compilers' identities, shared; the trim that keeps `MAX_FILES` links.
//!
//! It knows names, the trim and who may write there; it does not know what the files hold.

use super::kept::{Kept, Kind, ACTIONS, COMPILERS, DIGESTS, HISTORY};
use super::own::{own_dir, Others};
use camino::{Utf8Path, Utf8PathBuf};
use std::path::Path;

/// The most links remembered; the least recently used go first (a file in use is rewritten,
/// or touched when unchanged).
pub const MAX_FILES: usize = 256;

/// The extensions of one link's files, each trimmed to `MAX_FILES`.
const PER_LINK: [(&str, Kind); 3] = [
    ("history", HISTORY),
    ("digests", DIGESTS),
    ("actions", ACTIONS),
];

/// The cache directory, checked.
#[derive(Debug, Clone)]
pub struct CacheDir {
    path: Utf8PathBuf,
}

/// The files of one link in the cache directory.
#[derive(Debug, Clone)]
pub struct LinkFiles {
    /// How long each job took, and its action's ingredients (`report::history`).
    pub history: Kept,
    /// Input digests (`remote::memo::inputs`).
    pub digests: Kept,
    /// Remembered actions (`remote::memo::jobs`).
    pub actions: Kept,
    dir: Utf8PathBuf,
}

impl CacheDir {
    /// `$XDG_CACHE_HOME/dtlto-bridge`, else `~/.cache/dtlto-bridge`.
    pub fn default_path() -> Option<Utf8PathBuf> {
        let nonempty = |v: &str| std::env::var(v).ok().filter(|s| !s.is_empty());
        nonempty("XDG_CACHE_HOME")
            .map(Utf8PathBuf::from)
            .or_else(|| nonempty("HOME").map(|h| Utf8PathBuf::from(h).join(".cache")))
            .map(|d| d.join("dtlto-bridge"))
    }

    /// The cache directory at `path`: refused when it is there but not this user's own (their
    /// files would be taken as remembered); one of this user's that others may write in (older
    /// versions made it under the umask) loses their permission; made (0700) at the first write
    /// when missing.
    pub fn open(path: Utf8PathBuf) -> Result<CacheDir, String> {
        if path.as_std_path().is_dir() {
            own_dir(path.as_std_path(), Others::Tighten)?;
        }
        Ok(CacheDir { path })
    }

    /// The files kept for `linker_output` linked in `cwd`.
    pub fn link(&self, cwd: &Path, linker_output: &str) -> LinkFiles {
        let stem = crate::job::util::digest::stable_name(&[
            cwd.as_os_str().as_encoded_bytes(),
            linker_output.as_bytes(),
        ]);
        let kept = |i: usize| {
            let (extension, kind) = PER_LINK[i];
            Kept::new(self.path.join(format!("{stem}.{extension}")), kind)
        };
        LinkFiles {
            history: kept(0),
            digests: kept(1),
            actions: kept(2),
            dir: self.path.clone(),
        }
    }

    /// The compilers' identities, shared by every link.
    pub fn compilers(&self) -> Kept {
        Kept::new(self.path.join("compilers"), COMPILERS)
    }
}

impl LinkFiles {
    /// Removes the least recently used links' files beyond `MAX_FILES` of each kind, and of
    /// the history files of earlier versions (`STEM.json`, which an older dtlto-bridge on this
    /// machine may still use).
    pub fn trim(&self) {
        for extension in PER_LINK.iter().map(|(e, _)| *e).chain(["json"]) {
            trim(&self.dir, extension, MAX_FILES);
        }
    }
}

/// Removes the least recently written files `STEM.extension` beyond `keep` (a stem is 16 hex
/// digits: no other file is touched).
fn trim(dir: &Utf8Path, extension: &str, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let ours = |name: &str| {
        name.strip_suffix(extension)
            .and_then(|n| n.strip_suffix('.'))
            .is_some_and(|stem| stem.len() == 16 && stem.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let mut files: Vec<(std::time::SystemTime, std::path::PathBuf)> = entries
        .flatten()
        .filter(|e| ours(&e.file_name().to_string_lossy()))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if files.len() <= keep {
        return;
    }
    files.sort();
    for (_, path) in &files[..files.len() - keep] {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_link_has_one_stem_and_the_trim_keeps_the_newest_of_each_kind() {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::from_path_buf(dir.path().join("cache")).unwrap();
        let cache = CacheDir::open(path.clone()).unwrap();
        let a = cache.link(Path::new("/w"), "prog");
        assert_eq!(
            a.history.path().with_extension(""),
            a.actions.path().with_extension("")
        );
        let b = cache.link(Path::new("/w"), "other");
        assert_ne!(a.history.path(), b.history.path());
        for link in [&a, &b] {
            link.history.keep(false, || Ok(vec![])).unwrap();
            link.digests.keep(false, || Ok(vec![])).unwrap();
        }
        let legacy = path.join("0123456789abcdef.json");
        let foreign = path.join("notes.json");
        std::fs::write(&legacy, "{}").unwrap();
        std::fs::write(&foreign, "{}").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(a.history.path())
            .unwrap()
            .set_modified(old)
            .unwrap();
        // Keeping one of each kind: `a`'s history, the older, goes.
        for (extension, _) in PER_LINK {
            trim(&path, extension, 1);
        }
        trim(&path, "json", 0);
        assert!(!a.history.path().exists());
        assert!(b.history.path().exists());
        assert!(
            !legacy.exists(),
            "an earlier version's history is trimmed as its own kind"
        );
        assert!(foreign.exists(), "a file of no link is left alone");
    }

    #[test]
    fn a_cache_directory_others_may_write_in_is_theirs_no_longer() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::from_path_buf(dir.path().join("open")).unwrap();
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o775)).unwrap();
        CacheDir::open(path.clone()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o755,
            "the group's write permission taken, nothing else"
        );
        if rustix::process::geteuid().is_root() {
            let theirs = dir.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(4242), None).unwrap();
            let theirs = Utf8PathBuf::from_path_buf(theirs).unwrap();
            let e = CacheDir::open(theirs).unwrap_err();
            assert!(e.contains("belongs to uid 4242"), "{e}");
        }
        let missing = Utf8PathBuf::from_path_buf(dir.path().join("missing")).unwrap();
        CacheDir::open(missing.clone()).unwrap();
        assert!(!missing.exists(), "made at the first write, not before");
    }
}
