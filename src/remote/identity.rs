//! Identity: the compiler's identity (a digest of its binary and its version line) and input
//! files' digests.
//!
//! It knows files and how to ask a compiler its version; it does not know actions or servers.
//! The identity is not remembered between links: a compiler at a path may be a script that
//! runs whichever compiler is selected, which only its version line tells.

use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The compiler's identity: a digest of its binary and its version text, so that a compiler
/// replaced at the same path changes every action.
pub fn compiler(program: &str) -> Result<String, String> {
    let path = if program.contains('/') {
        PathBuf::from(program)
    } else {
        which::which(program).map_err(|e| format!("find the compiler {program}: {e}"))?
    };
    let real = std::fs::canonicalize(&path)
        .map_err(|e| format!("find the compiler {}: {e}", path.display()))?;
    let (digest, _) =
        file_digest(&real).map_err(|e| format!("read the compiler {}: {e}", real.display()))?;
    let version = std::process::Command::new(&path)
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
