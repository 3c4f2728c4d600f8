//! Compilers: which compiler a host's entry runs for a bundle. Never one the bundle names by
//! itself: the host's setting DTLTO_CLANG_COMPILER, the real clang beside the entry in an
//! icecream environment (`clang.real`), or one of those `host setup` listed beside the entry
//! (`dtlto-clang-compilers`) that the bundle's compiler names by path or name; and only when
//! its `--version` line is the bundle's. The versions are remembered by the binary's identity.
//!
//! It knows the host's files; it does not know the bundle's contents beyond its compiler.

use super::format::Manifest;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The compiler a host runs for every bundle, when set.
pub const COMPILER_VAR: &str = "DTLTO_CLANG_COMPILER";

/// The name of the real compiler beside the entry where the entry takes the compiler's name (an
/// icecream environment runs `/usr/bin/clang`: there the entry is `clang`, the compiler
/// `clang.real`).
pub const BESIDE: &str = "clang.real";

/// The file beside the entry that lists the compilers a host allows, one path a line.
pub const ALLOWED: &str = "dtlto-clang-compilers";

/// The directory of the entry reached as `me` (a bare name was found on PATH).
fn home(me: &Path) -> Option<PathBuf> {
    let found = match me.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => return Some(dir.to_path_buf()),
        _ => which::which(me).ok()?,
    };
    found.parent().map(Path::to_path_buf)
}

/// The compilers the entry reached as `me` may run for a bundle made with `m`'s compiler (any
/// allowed one when `m` is None), best first, or why none.
pub fn allowed(me: &Path, m: Option<&Manifest>) -> Result<Vec<PathBuf>, String> {
    if let Some(set) = std::env::var_os(COMPILER_VAR) {
        return Ok(vec![PathBuf::from(set)]);
    }
    let beside = me.with_file_name(BESIDE);
    if beside.is_file() {
        return Ok(vec![beside]);
    }
    let list = home(me).map(|d| d.join(ALLOWED));
    let text = list.as_ref().and_then(|l| std::fs::read_to_string(l).ok());
    let Some(text) = text else {
        return Err(format!(
            "this host allows no compiler: no {ALLOWED} beside the entry (run `dtlto-bridge host \
             setup`) and no {COMPILER_VAR}"
        ));
    };
    let entries: Vec<PathBuf> = (text.lines().filter(|l| !l.is_empty()))
        .map(PathBuf::from)
        .collect();
    let Some(m) = m else {
        return Ok(entries);
    };
    // The same path, then the same file, then the same name.
    let named = Path::new(&m.compiler.path);
    let real = |p: &Path| std::fs::canonicalize(p).ok();
    let rank = |e: &PathBuf| {
        if e == named {
            Some(0)
        } else if named.is_absolute() && real(named).is_some_and(|r| Some(r) == real(e)) {
            Some(1)
        } else {
            (e.file_name() == named.file_name()).then_some(2)
        }
    };
    let mut found: Vec<(u8, PathBuf)> = (entries.into_iter())
        .filter_map(|e| Some((rank(&e)?, e)))
        .collect();
    found.sort_by_key(|(rank, _)| *rank);
    let found: Vec<PathBuf> = found.into_iter().map(|(_, e)| e).collect();
    match found.is_empty() {
        false => Ok(found),
        true => Err(format!(
            "this host does not allow the compiler {} (not in {})",
            m.compiler.path,
            list.unwrap_or_default().display()
        )),
    }
}

/// The compiler to run for a bundle made with `m`'s: the first of `allowed` whose version is
/// the bundle's, or why none is.
pub fn find(me: &Path, m: &Manifest) -> Result<PathBuf, String> {
    let candidates = allowed(me, Some(m))?;
    let mut first = None;
    for c in &candidates {
        let version = remembered_version(c)?;
        if version == m.compiler.version {
            return Ok(c.clone());
        }
        first.get_or_insert((c, version));
    }
    let (c, version) = first.ok_or("no compiler")?;
    Err(format!(
        "the compiler here, {}, is {version:?}; the bundle was made for {:?}",
        c.display(),
        m.compiler.version
    ))
}

/// The compilers on PATH a host allows by default: each `clang` and `clang-N`, and where each
/// really is (lld names Debian's `/usr/lib/llvm-22/bin/clang`), sorted, once each.
pub fn on_path() -> Vec<PathBuf> {
    let mut found = std::collections::BTreeSet::new();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let versioned = name
                .strip_prefix("clang-")
                .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
            if (name == "clang" || versioned) && e.path().is_file() {
                found.insert(e.path());
                found.extend(std::fs::canonicalize(e.path()).ok());
            }
        }
    }
    found.into_iter().collect()
}

/// The directory in TMPDIR where the entry remembers compilers' versions (this user's, 0700).
const VERSIONS: &str = "dtlto-clang-versions";

/// `version_line`, remembered in TMPDIR by the binary's identity (its canonical path, device,
/// inode, size, modification and change times: a binary replaced or changed is asked again),
/// so that a host does not start clang twice per job. Asked every time where nothing can be
/// remembered safely.
fn remembered_version(compiler: &Path) -> Result<String, String> {
    use crate::remote::memo::inputs::Key;
    let key = std::fs::canonicalize(compiler).and_then(|real| {
        let seen = Key::of(&std::fs::metadata(&real)?);
        let key = format!("{}\0{seen:?}", real.display());
        Ok(crate::job::util::digest::sha256_hex(key.as_bytes()))
    });
    let dir = std::env::temp_dir().join(VERSIONS);
    let ours = crate::job::store::own_dir(&dir, crate::job::store::Others::Refuse).is_ok();
    let file = match (key, ours) {
        (Ok(key), true) => dir.join(&key[..32]),
        _ => return version_line(compiler),
    };
    if let Ok(line) = std::fs::read_to_string(&file) {
        if !line.is_empty() && !line.contains('\n') {
            return Ok(line);
        }
    }
    let line = version_line(compiler)?;
    // Best effort: not remembered only means asked again.
    let _ = crate::job::util::whole::write_whole(&file, line.as_bytes(), 0o600, || Ok(()));
    Ok(line)
}

/// The first line `compiler --version` prints.
pub fn version_line(compiler: &Path) -> Result<String, String> {
    // Pipes, not /dev/null (see `run`); `output` closes stdin at once.
    let out = Command::new(compiler)
        .arg("--version")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("run {} --version: {e}", compiler.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.lines().next() {
        Some(line) if out.status.success() && !line.is_empty() => Ok(line.to_string()),
        _ => Err(format!(
            "{} --version printed no version",
            compiler.display()
        )),
    }
}
