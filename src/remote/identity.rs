//! Identity: the compiler's identity (a digest of its binary and its version line), remembered
//! for a clang binary that did not change.
//!
//! It knows how to ask a compiler its version, and one small file beside the history,
//! `compilers`, a line per compiler asked: `KEY IDENTITY`. The key is a digest of the
//! compiler's path and the identities (device, inode, size, modification and change times) of
//! its file, its directory and the `../lib` beside it, where its libraries are: a package
//! upgrade renames files in both. Only an ELF file named `clang…` is remembered: a script, or
//! any other program (ccache or distcc in the compiler's place, say), may run whichever compiler
//! its environment selects, which only its version line tells, so it is asked at every link.
//! It does not know actions or servers.

use super::digests::{trusted, Key};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// The first line of the file; another one means a file of another layout, read as empty.
const HEADER: &str = "dtlto-bridge compilers 1";
/// The most compilers remembered: the newest stay.
const MAX_LINES: usize = 64;

/// The compiler's identity, asked on a thread of its own as soon as the job file is read: the
/// compiler starts in tens of milliseconds, which the link's other work hides.
/// Dropped unanswered (a link that fails first), it waits for the compiler, which never
/// outlives the link.
pub struct Asked(Option<JoinHandle<Result<String, String>>>);

impl Asked {
    /// Asks the compiler of `file`'s first job, or remembers it from `dir` (the history's).
    pub fn start(file: &crate::job::parse::JobFile<'_>, dir: Option<PathBuf>) -> Asked {
        let program = file
            .jobs
            .first()
            .and_then(|j| j.command.words().next())
            .map(|w| w.to_string())
            .unwrap_or_default();
        Asked(Some(std::thread::spawn(move || {
            compiler(&program, dir.as_deref())
        })))
    }

    /// The answer, waited for.
    pub fn answer(mut self) -> Result<String, String> {
        let thread = self.0.take().expect("answered once");
        thread
            .join()
            .unwrap_or_else(|_| Err("ask the compiler its version: the thread panicked".into()))
    }
}

impl Drop for Asked {
    fn drop(&mut self) {
        if let Some(thread) = self.0.take() {
            let _ = thread.join();
        }
    }
}

/// The compiler's identity: a digest of its binary and its version text, so that a compiler
/// replaced at the same path changes every action. Remembered in `dir` when it may be.
pub fn compiler(program: &str, dir: Option<&Path>) -> Result<String, String> {
    let path = if program.contains('/') {
        PathBuf::from(program)
    } else {
        which::which(program).map_err(|e| format!("find the compiler {program}: {e}"))?
    };
    let real = std::fs::canonicalize(&path)
        .map_err(|e| format!("find the compiler {}: {e}", path.display()))?;
    let memo = dir.and_then(|dir| Some((dir.join("compilers"), key(&real)?)));
    if let Some((file, key)) = &memo {
        if let Some(identity) = remembered(file, key) {
            return Ok(identity);
        }
    }
    let identity = ask(&path, &real)?;
    if let Some((file, key)) = memo {
        // Best effort: not remembered only means asked again.
        let _ = remember(&file, &key, &identity);
    }
    Ok(identity)
}

/// Asks the compiler: its binary's digest and its version line, digested.
fn ask(path: &Path, real: &Path) -> Result<String, String> {
    let digest = std::fs::File::open(real)
        .and_then(|mut f| super::digests::read_digest(&mut f))
        .map_err(|e| format!("read the compiler {}: {e}", real.display()))?;
    let version = std::process::Command::new(path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default();
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(digest.hash.as_bytes());
    h.update(version.as_bytes());
    Ok(format!("sha256:{}", crate::fsutil::hex(&h.finalize())))
}

/// The key the compiler at `real` (its canonical path) is remembered by, when it may be: a
/// clang binary, settled (not changed in the last second), on a file system whose identities
/// tell a file's content.
fn key(real: &Path) -> Option<String> {
    let name = real.file_name()?.to_str()?;
    let mut magic = [0u8; 4];
    std::fs::File::open(real)
        .and_then(|mut f| f.read_exact(&mut magic))
        .ok()?;
    if !name.starts_with("clang") || magic != *b"\x7fELF" || !trusted(real) {
        return None;
    }
    let now = std::time::SystemTime::now();
    let dir = real.parent()?;
    let mut text = real.to_str()?.to_string();
    for (k, p) in [real, dir, &dir.join("../lib")].into_iter().enumerate() {
        let seen = std::fs::metadata(p).ok().map(|m| Key::of(&m));
        if k == 0 && !seen.is_some_and(|s| s.settled(now)) {
            return None;
        }
        text.push_str(&format!("\n{seen:?}"));
    }
    Some(crate::fsutil::sha256_hex(text.as_bytes()))
}

/// The identity remembered under `key` in `file`.
fn remembered(file: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    let mut lines = text.lines();
    (lines.next() == Some(HEADER)).then_some(())?;
    lines
        .filter_map(|l| l.split_once(' '))
        .find(|(k, _)| *k == key)
        .map(|(_, identity)| identity.to_string())
}

/// Remembers `identity` under `key` in `file`, first, with at most `MAX_LINES` others.
fn remember(file: &Path, key: &str, identity: &str) -> std::io::Result<()> {
    let old = std::fs::read_to_string(file).unwrap_or_default();
    let others = match old.split_once('\n') {
        Some((HEADER, rest)) => rest,
        _ => "",
    };
    let mut text = format!("{HEADER}\n{key} {identity}\n");
    for line in others
        .lines()
        .filter(|l| l.split_once(' ').is_some_and(|(k, _)| k != key))
        .take(MAX_LINES - 1)
    {
        text.push_str(line);
        text.push('\n');
    }
    crate::fsutil::keep(file, false, || Ok(text.into_bytes())).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn lines(file: &Path) -> usize {
        std::fs::read_to_string(file).map_or(0, |t| t.lines().count())
    }

    #[test]
    fn a_clang_binary_is_remembered_until_it_or_its_libraries_change_a_script_never() {
        let dir = tempfile::tempdir().unwrap();
        let (bin, lib, history) = (
            dir.path().join("bin"),
            dir.path().join("lib"),
            dir.path().join("h"),
        );
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&lib).unwrap();
        let clang = bin.join("clang-x");
        std::fs::copy("/bin/true", &clang).unwrap();
        let script = bin.join("clang-script");
        std::fs::write(&script, "#!/bin/sh\necho 'fake clang version 1'\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let memo = history.join("compilers");
        let clang = clang.to_str().unwrap();
        // Just written: not settled, so asked and not remembered.
        let asked = compiler(clang, Some(&history)).unwrap();
        assert_eq!(lines(&memo), 0);
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert_eq!(compiler(clang, Some(&history)).unwrap(), asked);
        assert_eq!(lines(&memo), 2, "the header and the compiler");
        // Remembered: the answer comes from the file, not from the compiler.
        let text = std::fs::read_to_string(&memo).unwrap();
        std::fs::write(&memo, text.replace(&asked, "sha256:remembered")).unwrap();
        assert_eq!(
            compiler(clang, Some(&history)).unwrap(),
            "sha256:remembered"
        );
        assert_eq!(compiler(clang, None).unwrap(), asked, "no history");
        // A library beside it changes: asked again.
        std::fs::write(lib.join("libLLVM.so.1"), b"new").unwrap();
        assert_eq!(compiler(clang, Some(&history)).unwrap(), asked);
        // A script is asked at every link, and never remembered.
        let lines_before = lines(&memo);
        let one = compiler(script.to_str().unwrap(), Some(&history)).unwrap();
        assert_eq!(lines(&memo), lines_before);
        std::fs::write(&script, "#!/bin/sh\necho 'fake clang version 2'\n").unwrap();
        assert_ne!(
            compiler(script.to_str().unwrap(), Some(&history)).unwrap(),
            one
        );
    }
}
