//! Identity: the compiler's identity (a digest of its binary and its version line).
//!
//! It knows how to ask a compiler its version; it does not know actions or servers.
//! The identity is not remembered between links: a compiler at a path may be a script that
//! runs whichever compiler is selected, which only its version line tells.

use std::path::PathBuf;

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
    let digest = std::fs::File::open(&real)
        .and_then(|mut f| super::digests::read_digest(&mut f))
        .map_err(|e| format!("read the compiler {}: {e}", real.display()))?;
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
