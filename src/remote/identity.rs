//! Identity: the compiler's identity (a digest of its binary and its version line) and input
//! files' digests. The identity is remembered between links by the binary's file identity
//! (device, inode, size, modification and change times), so that a link does not start the
//! compiler to ask its version.
//!
//! It knows files and their metadata; it does not know actions or servers.

use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The file remembering compilers' identities in the memo directory: a line per compiler,
/// `PATH<TAB>FILE IDENTITY<TAB>IDENTITY`.
const MEMO: &str = "compilers";
/// Compilers remembered at most (the oldest lines go first).
const REMEMBERED: usize = 32;

/// The compiler's identity: a digest of its binary and its version text, so that a compiler
/// replaced at the same path changes every action. Remembered in `memo` (a directory), if given.
pub fn compiler(program: &str, memo: Option<&Path>) -> Result<String, String> {
    let path = if program.contains('/') {
        PathBuf::from(program)
    } else {
        which::which(program).map_err(|e| format!("find the compiler {program}: {e}"))?
    };
    let real = std::fs::canonicalize(&path)
        .map_err(|e| format!("find the compiler {}: {e}", path.display()))?;
    let meta = std::fs::metadata(&real)
        .map_err(|e| format!("read the compiler {}: {e}", real.display()))?;
    let key = format!("{}\t{}", real.display(), file_identity(&meta));
    let memo = memo.map(|dir| dir.join(MEMO));
    let lines: Vec<String> = memo
        .as_ref()
        .and_then(|m| std::fs::read_to_string(m).ok())
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_default();
    let known = lines.iter().find_map(|l| {
        let (k, identity) = l.rsplit_once('\t')?;
        (k == key).then(|| identity.to_string())
    });
    if let Some(identity) = known {
        return Ok(identity);
    }
    let identity = compute(&path, &real)?;
    if let Some(memo) = &memo {
        // Best effort: a link never fails for its memo.
        let name = format!("{}\t", real.display());
        let mut kept: Vec<&String> = lines.iter().filter(|l| !l.starts_with(&name)).collect();
        let line = format!("{key}\t{identity}");
        kept.push(&line);
        let from = kept.len().saturating_sub(REMEMBERED);
        let text: String = kept[from..].iter().map(|l| format!("{l}\n")).collect();
        if let Some(dir) = memo.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Ok(path) = camino::Utf8PathBuf::from_path_buf(memo.clone()) {
            let _ = crate::fsutil::write_atomically(&path, |f| {
                std::io::Write::write_all(f, text.as_bytes())
            });
        }
    }
    Ok(identity)
}

/// What changes when a file is replaced or written: device, inode, size, and modification and
/// change times to the nanosecond.
fn file_identity(m: &std::fs::Metadata) -> String {
    format!(
        "{} {} {} {}.{:09} {}.{:09}",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    )
}

/// The identity, from the binary's bytes and `--version`'s first line.
fn compute(path: &Path, real: &Path) -> Result<String, String> {
    let (digest, _) =
        file_digest(real).map_err(|e| format!("read the compiler {}: {e}", real.display()))?;
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

/// A file's digest, read in pieces.
pub fn file_digest(path: &Path) -> std::io::Result<(re::Digest, u64)> {
    use sha2::{Digest, Sha256};
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok((
        re::Digest {
            hash: crate::fsutil::hex(&h.finalize()),
            size_bytes: size as i64,
        },
        size,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_remembered_until_the_compiler_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let cc = dir.path().join("cc");
        std::fs::write(&cc, "#!/bin/sh\necho 'fake cc 1'\n").unwrap();
        std::fs::set_permissions(&cc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let memo = dir.path().join("memo");
        let first = compiler(cc.to_str().unwrap(), Some(&memo)).unwrap();
        assert!(std::fs::read_to_string(memo.join(MEMO))
            .unwrap()
            .contains(&first));
        // The version line is not asked again while the file is the same: a memo that says
        // otherwise is believed.
        let text = std::fs::read_to_string(memo.join(MEMO)).unwrap();
        std::fs::write(memo.join(MEMO), text.replace(&first, "sha256:remembered")).unwrap();
        assert_eq!(
            compiler(cc.to_str().unwrap(), Some(&memo)).unwrap(),
            "sha256:remembered"
        );
        // Written again (another version), the file's identity changes: computed anew.
        std::fs::write(&cc, "#!/bin/sh\necho 'fake cc 2'\n").unwrap();
        let second = compiler(cc.to_str().unwrap(), Some(&memo)).unwrap();
        assert_ne!(second, "sha256:remembered");
        assert_ne!(second, first);
        assert_eq!(compiler(cc.to_str().unwrap(), None).unwrap(), second);
    }
}
