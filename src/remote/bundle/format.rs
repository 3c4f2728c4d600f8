//! Format: one backend job as one file (a *bundle*): a header line, a JSON manifest (the
//! compiler's identity, the command's words after the compiler, the object's name, and each
//! file's name, size and SHA-256), then the files' bytes in the manifest's order.
//!
//! `read` treats a bundle as untrusted input: every name, size, count and digest is checked
//! before anything is written. It knows the layout; it does not know what clang does with it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The first bytes of every bundle, version included.
pub const MAGIC: &[u8] = b"DTLTO-BRIDGE BUNDLE 1\n";
/// The longest manifest read.
const MAX_MANIFEST: u64 = 16 << 20;
/// The most files a bundle may hold (OpenSSL's largest job reads 199).
const MAX_FILES: usize = 10_000;
/// The largest bundle read (distcc carries at most 4 GiB; one job reads a few MB).
pub const MAX_BUNDLE: u64 = 2 << 30;
/// The longest name inside.
const MAX_NAME: usize = 1024;

/// The compiler the job was made for, as the linking machine ran it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compiler {
    /// As the job's command names it (absolute, or a name found on PATH).
    pub path: String,
    /// The first line of its `--version`.
    pub version: String,
}

/// One file inside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub name: String,
    pub size: u64,
    pub sha256: String,
    /// Only "file" is accepted; any other kind (a link, a directory) is refused.
    #[serde(default = "file_kind", skip_serializing_if = "is_file")]
    pub kind: String,
}

fn file_kind() -> String {
    "file".into()
}

fn is_file(kind: &str) -> bool {
    kind == "file"
}

impl Entry {
    pub fn new(name: String, bytes: &[u8]) -> Entry {
        Entry::hashed(name, bytes, crate::job::util::digest::sha256_hex(bytes))
    }

    /// An entry for `bytes` whose SHA-256 (hex) is known.
    pub fn hashed(name: String, bytes: &[u8], sha256: String) -> Entry {
        Entry {
            name,
            size: bytes.len() as u64,
            sha256,
            kind: file_kind(),
        }
    }
}

/// What a bundle says of itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub compiler: Compiler,
    /// The command's words after the compiler, with the names inside.
    pub arguments: Vec<String>,
    /// The object's name inside: the one file that comes back.
    pub output: String,
    pub files: Vec<Entry>,
}

/// Writes a bundle: `files` are the manifest's files' bytes, in its order; its size.
pub fn write(
    out: &mut impl std::io::Write,
    manifest: &Manifest,
    files: &[&[u8]],
) -> std::io::Result<u64> {
    let json = serde_json::to_vec(manifest).map_err(std::io::Error::other)?;
    out.write_all(MAGIC)?;
    out.write_all(&(json.len() as u64).to_le_bytes())?;
    out.write_all(&json)?;
    for f in files {
        out.write_all(f)?;
    }
    let files: usize = files.iter().map(|f| f.len()).sum();
    Ok((MAGIC.len() + 8 + json.len() + files) as u64)
}

/// A bundle read and checked: the manifest and each file's bytes (borrowed from the bundle).
#[derive(Debug)]
pub struct Bundle<'a> {
    pub manifest: Manifest,
    pub files: Vec<&'a [u8]>,
}

/// Reads and checks a bundle: the header, the manifest, every name (relative, plain, unique,
/// no file under another), kind, size (they sum to the bytes that follow) and digest.
pub fn read(data: &[u8]) -> Result<Bundle<'_>, String> {
    let rest = data
        .strip_prefix(MAGIC)
        .ok_or("it does not start as a dtlto-bridge bundle of version 1")?;
    let (len, rest) = rest
        .split_first_chunk::<8>()
        .ok_or("it ends inside its header")?;
    let len = u64::from_le_bytes(*len);
    if len > MAX_MANIFEST {
        return Err(format!(
            "its manifest's declared length {len} is over the {MAX_MANIFEST} bytes a manifest may have"
        ));
    }
    if len > rest.len() as u64 {
        return Err(format!(
            "its manifest's declared length {len} is more than the {} bytes that follow",
            rest.len()
        ));
    }
    let (json, mut body) = rest.split_at(len as usize);
    let manifest: Manifest =
        serde_json::from_slice(json).map_err(|e| format!("its manifest is not valid: {e}"))?;
    check_names(&manifest)?;
    let declared = manifest
        .files
        .iter()
        .try_fold(0u64, |sum, e| sum.checked_add(e.size))
        .filter(|sum| *sum == body.len() as u64)
        .ok_or_else(|| {
            format!(
                "its files' declared sizes do not add up to the {} bytes that follow the manifest \
                 (truncated, or sizes that lie)",
                body.len()
            )
        })?;
    debug_assert_eq!(declared, body.len() as u64);
    let mut files = Vec::with_capacity(manifest.files.len());
    for entry in &manifest.files {
        let (bytes, after) = body.split_at(entry.size as usize);
        body = after;
        if crate::job::util::digest::sha256_hex(bytes) != entry.sha256 {
            return Err(format!(
                "its file {} does not have the SHA-256 its manifest declares",
                entry.name
            ));
        }
        files.push(bytes);
    }
    Ok(Bundle { manifest, files })
}

/// Why a name inside cannot be a plain file of the scratch directory, if it cannot.
fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Some("is empty or too long");
    }
    if name.starts_with('/') {
        return Some("is absolute");
    }
    if name.contains('\0') || name.contains('\\') {
        return Some("holds a NUL or a backslash");
    }
    if name.starts_with('-') || name == ".lock" {
        return Some("starts with - or is the scratch directory's lock");
    }
    let parts: Vec<&str> = name.split('/').collect();
    if parts.contains(&"..") {
        return Some("has a .. in it");
    }
    if parts.iter().any(|p| p.is_empty() || *p == ".") {
        return Some("has an empty or . part");
    }
    None
}

/// Every name plain and unique, no file where another's directory is, only files, and a count
/// within bounds; the object's name plain and not among the files.
fn check_names(m: &Manifest) -> Result<(), String> {
    if m.files.len() > MAX_FILES {
        return Err(format!(
            "it declares {} files, more than the {MAX_FILES} a bundle may hold",
            m.files.len()
        ));
    }
    let mut names = BTreeSet::new();
    for e in &m.files {
        if let Some(why) = name_problem(&e.name) {
            return Err(format!("its file name {:?} {why}", e.name));
        }
        if e.kind != "file" {
            return Err(format!(
                "its entry {} is a {}: a bundle holds only files",
                e.name, e.kind
            ));
        }
        if !names.insert(e.name.as_str()) {
            return Err(format!("its file name {} is there twice", e.name));
        }
    }
    for name in &names {
        let mut at = 0;
        while let Some(i) = name[at..].find('/') {
            at += i + 1;
            if names.contains(&name[..at - 1]) {
                return Err(format!(
                    "its file {} is also a directory of {name}",
                    &name[..at - 1]
                ));
            }
        }
    }
    if let Some(why) = name_problem(&m.output) {
        return Err(format!("its object's name {:?} {why}", m.output));
    }
    if names.contains(m.output.as_str()) {
        return Err(format!(
            "its object's name {} is also one of its files",
            m.output
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(files: &[(&str, &[u8])]) -> Manifest {
        Manifest {
            compiler: Compiler {
                path: "/usr/bin/clang-22".into(),
                version: "clang version 22".into(),
            },
            arguments: ["-c", "-fthinlto-index=s.bc", "m/a.o", "-o", "o.o"]
                .map(String::from)
                .to_vec(),
            output: "o.o".into(),
            files: files
                .iter()
                .map(|(n, b)| Entry::new(n.to_string(), b))
                .collect(),
        }
    }

    fn bundle(m: &Manifest, files: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        write(&mut out, m, files).unwrap();
        out
    }

    const FILES: [(&str, &[u8]); 2] = [("m/a.o", b"module bytes"), ("s.bc", b"shard")];

    #[test]
    fn a_bundle_round_trips() {
        let m = manifest(&FILES);
        let data = bundle(&m, &[FILES[0].1, FILES[1].1]);
        let read = read(&data).unwrap();
        assert_eq!(read.manifest, m);
        assert_eq!(read.files, [FILES[0].1, FILES[1].1]);
    }

    /// Each hostile bundle is refused, and says why.
    #[test]
    fn hostile_bundles_are_refused_with_their_reason() {
        let good = manifest(&FILES);
        let data = bundle(&good, &[FILES[0].1, FILES[1].1]);
        let with = |edit: &dyn Fn(&mut Manifest)| {
            let mut m = good.clone();
            edit(&mut m);
            bundle(&m, &[FILES[0].1, FILES[1].1])
        };
        let mut flipped = data.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let mut many = good.clone();
        many.files = (0..100_000)
            .map(|i| Entry::new(format!("f{i}"), b""))
            .collect();
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            (
                "truncated",
                data[..data.len() - 3].to_vec(),
                "do not add up",
            ),
            (
                "cut in its header",
                data[..MAGIC.len() + 3].to_vec(),
                "inside its header",
            ),
            ("not a bundle", b"int main;".to_vec(), "does not start as"),
            ("a flipped byte", flipped, "does not have the SHA-256"),
            (
                "../x",
                with(&|m| m.files[0].name = "../x".into()),
                "has a .. in it",
            ),
            (
                "a/../../x",
                with(&|m| m.files[0].name = "m/../../x".into()),
                "has a .. in it",
            ),
            (
                "absolute",
                with(&|m| m.files[0].name = "/etc/passwd".into()),
                "is absolute",
            ),
            (
                "a link",
                with(&|m| m.files[0].kind = "link".into()),
                "is a link",
            ),
            (
                "twice",
                with(&|m| m.files[1].name = "m/a.o".into()),
                "there twice",
            ),
            (
                "a file as a directory",
                with(&|m| m.files[1].name = "m/a.o/x".into()),
                "also a directory",
            ),
            (
                "size 2^63",
                with(&|m| m.files[0].size = 1 << 63),
                "do not add up",
            ),
            (
                "sizes that wrap",
                with(&|m| {
                    m.files[0].size = u64::MAX;
                    m.files[1].size = 2;
                }),
                "do not add up",
            ),
            ("100,000 entries", bundle(&many, &[]), "more than the 10000"),
            (
                "an absolute object",
                with(&|m| m.output = "/tmp/o.o".into()),
                "is absolute",
            ),
            (
                "an object over a file",
                with(&|m| m.output = "s.bc".into()),
                "also one of its files",
            ),
            (
                "an unknown field",
                {
                    let mut d = MAGIC.to_vec();
                    let json = br#"{"compiler":{"path":"c","version":"v"},"arguments":[],"output":"o","files":[],"run":"rm -rf /"}"#;
                    d.extend((json.len() as u64).to_le_bytes());
                    d.extend(json);
                    d
                },
                "unknown field",
            ),
            (
                "a manifest of 2^40 bytes",
                {
                    let mut d = MAGIC.to_vec();
                    d.extend((1u64 << 40).to_le_bytes());
                    d
                },
                "a manifest may have",
            ),
            (
                "a manifest longer than the bundle",
                {
                    let mut d = MAGIC.to_vec();
                    d.extend(100u64.to_le_bytes());
                    d.extend(b"{}");
                    d
                },
                "more than the 2 bytes that follow",
            ),
        ];
        for (what, data, want) in cases {
            let why = read(&data).map(|_| ()).unwrap_err();
            assert!(why.contains(want), "{what}: {why}");
        }
    }
}
