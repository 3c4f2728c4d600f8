//! Inputs: input files' SHA-256 digests, remembered from one link of an output to the next by each
//! file's identity (device, inode, size, modification and change times), so that an unchanged file
//! is not read again.
//!
//! It knows one small text file per (directory, linker output) beside the history, holding the
//! files of the last link only. A missing, unreadable or stale file, or a line it cannot read,
//! only means files read again. A file changed less than `SETTLED` before it was read is not
//! remembered: a later write in the same clock tick could leave both its times as they were;
//! nor is a file on a file system whose inodes and times may not tell a file's content
//! (`TRUSTED`).
//! Archive members that lld extracts are new files in every link, so they are always read. It
//! does not know what the files are for.

use crate::job::store::Kept;
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// How long a file must have been left alone before its digest is remembered.
const SETTLED: Duration = Duration::from_secs(1);

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(in crate::remote) struct Key {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Key {
    pub(in crate::remote) fn of(m: &std::fs::Metadata) -> Key {
        Key {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// Whether the file was last changed at least `SETTLED` before `now`.
    pub(super) fn settled(&self, now: SystemTime) -> bool {
        let Ok(now) = now.duration_since(SystemTime::UNIX_EPOCH) else {
            return false;
        };
        let since = |(s, ns): (i64, i64)| {
            let at = Duration::new(s.max(0) as u64, ns.clamp(0, 999_999_999) as u32);
            now.checked_sub(at).is_some_and(|d| d >= SETTLED)
        };
        since(self.mtime) && since(self.ctime)
    }
}

/// The digests remembered for one linker output, and those of this link.
#[derive(Default)]
pub struct InputDigests {
    /// Where they are kept (None: nothing is remembered).
    kept: Option<Kept>,
    known: HashMap<Key, String>,
    /// This link's files that may be remembered, with their digests.
    now: Mutex<HashMap<Key, String>>,
    /// Whether each device's file system is `TRUSTED`.
    devices: Mutex<HashMap<u64, bool>>,
}

impl InputDigests {
    /// The digests kept in `kept` (nothing when None or unreadable).
    pub fn load(kept: Option<Kept>) -> InputDigests {
        let known = (kept.as_ref())
            .and_then(Kept::read)
            .map(|text| parse(&text))
            .unwrap_or_default();
        InputDigests {
            kept,
            known,
            now: Mutex::default(),
            devices: Mutex::default(),
        }
    }

    /// The digest of the file at `path`: remembered when its identity is unchanged (one look
    /// at the file, which is not opened; none when `seen` is what a look found, earlier in the
    /// link: the linker's inputs do not change while it links), else read.
    pub fn digest(
        &self,
        path: &Path,
        seen: Option<&std::fs::Metadata>,
    ) -> std::io::Result<re::Digest> {
        if self.kept.is_none() {
            // Nothing is remembered: no identity to take.
            return read_digest(&mut std::fs::File::open(path)?);
        }
        let seen = match seen {
            Some(m) => Key::of(m),
            None => Key::of(&std::fs::metadata(path)?),
        };
        let trusted = self.trusted(seen.dev, path);
        if let Some(hash) = self.known.get(&seen).filter(|_| trusted) {
            crate::job::util::sync::lock(&self.now).insert(seen, hash.clone());
            return Ok(re::Digest {
                hash: hash.clone(),
                size_bytes: seen.size as i64,
            });
        }
        let mut f = std::fs::File::open(path)?;
        let before = Key::of(&f.metadata()?);
        let now = SystemTime::now();
        let digest = read_digest(&mut f)?;
        // Remembered only when nothing changed it while it was read, or shortly before.
        let after = Key::of(&f.metadata()?);
        let whole = digest.size_bytes as u64 == before.size;
        if trusted && after == before && before.settled(now) && whole {
            crate::job::util::sync::lock(&self.now).insert(before, digest.hash.clone());
        }
        Ok(digest)
    }

    /// Whether the file system of device `dev`, where `path` is, is `TRUSTED`: asked once per
    /// device.
    fn trusted(&self, dev: u64, path: &Path) -> bool {
        if let Some(&known) = crate::job::util::sync::lock(&self.devices).get(&dev) {
            return known;
        }
        let trusted = trusted(path);
        crate::job::util::sync::lock(&self.devices).insert(dev, trusted);
        trusted
    }

    /// Keeps this link's digests for the next link of the output, when they differ from those
    /// it found; an error only says they could not be written.
    pub fn save(&self) -> std::io::Result<()> {
        let Some(kept) = &self.kept else {
            return Ok(());
        };
        let now = crate::job::util::sync::lock(&self.now);
        kept.keep(*now == self.known, || Ok(lines(&now)))?;
        Ok(())
    }
}

/// File systems whose inode numbers stay with a file and whose change times are kept to the
/// nanosecond by the kernel: ext4, XFS, Btrfs, tmpfs, overlayfs, ZFS. Elsewhere (FAT keeps
/// times to 2 s, FUSE and network file systems may renumber inodes or copy times) a file's
/// identity may not tell its content, so nothing there is remembered.
const TRUSTED: [i64; 6] = [
    0xEF53,
    0x5846_5342,
    0x9123_683E,
    0x0102_1994,
    0x794C_7630,
    0x2FC1_2FC1,
];

// f_type's integer type differs from one architecture to another.
#[allow(clippy::unnecessary_cast)]
pub(super) fn trusted(path: &Path) -> bool {
    rustix::fs::statfs(path).is_ok_and(|s| TRUSTED.contains(&(s.f_type as i64)))
}

/// A file's digest, read in pieces.
pub fn read_digest(f: &mut impl Read) -> std::io::Result<re::Digest> {
    let mut h = crate::job::util::digest::Sha256::default();
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
    Ok(re::Digest {
        hash: h.finish(),
        size_bytes: size as i64,
    })
}

/// A line per file, `DEV INO SIZE MTIME CTIME HASH` (times as seconds.nanoseconds), sorted.
fn lines(entries: &HashMap<Key, String>) -> Vec<String> {
    let mut lines: Vec<String> = entries
        .iter()
        .map(|(k, hash)| {
            format!(
                "{} {} {} {}.{:09} {}.{:09} {hash}",
                k.dev, k.ino, k.size, k.mtime.0, k.mtime.1, k.ctime.0, k.ctime.1
            )
        })
        .collect();
    lines.sort();
    lines
}

/// The digests of a file's lines.
fn parse(lines: &str) -> HashMap<Key, String> {
    lines.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<(Key, String)> {
    let time = |w: &str| -> Option<(i64, i64)> {
        let (s, ns) = w.split_once('.')?;
        Some((s.parse().ok()?, ns.parse().ok()?))
    };
    let words: Vec<&str> = line.split(' ').collect();
    let [dev, ino, size, mtime, ctime, hash] = words.as_slice() else {
        return None;
    };
    let hex = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then_some(())?;
    Some((
        Key {
            dev: dev.parse().ok()?,
            ino: ino.parse().ok()?,
            size: size.parse().ok()?,
            mtime: time(mtime)?,
            ctime: time(ctime)?,
        },
        hash.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_times(path: &Path, seconds_ago: u64) {
        let t = SystemTime::now() - Duration::from_secs(seconds_ago);
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_times(std::fs::FileTimes::new().set_modified(t).set_accessed(t))
            .unwrap();
    }

    #[test]
    fn a_file_is_remembered_only_once_settled_and_read_again_once_changed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.o");
        let cache = camino::Utf8PathBuf::from_path_buf(dir.path().join("cache")).unwrap();
        let kept = crate::job::store::CacheDir::open(cache)
            .unwrap()
            .link(dir.path(), "x")
            .digests;
        let memo_path = kept.path().to_path_buf();
        std::fs::write(&file, b"one").unwrap();
        let one = read_digest(&mut &b"one"[..]).unwrap();
        // Just written: its change time is now, so it is read but not remembered.
        let memo = InputDigests::load(Some(kept.clone()));
        assert_eq!(memo.digest(&file, None).unwrap(), one);
        memo.save().unwrap();
        assert!(InputDigests::load(Some(kept.clone())).known.is_empty());
        // The change time cannot be set back: a memo that saw it long ago stands in for that.
        let key = Key::of(&std::fs::metadata(&file).unwrap());
        let fake = "f".repeat(64);
        kept.keep(false, || Ok(lines(&HashMap::from([(key, fake.clone())]))))
            .unwrap();
        let memo = InputDigests::load(Some(kept.clone()));
        assert_eq!(
            memo.digest(&file, None).unwrap().hash,
            fake,
            "not read again"
        );
        // Unchanged: not written again, only marked as used.
        let text = std::fs::read_to_string(&memo_path).unwrap();
        set_times(&memo_path, 3600);
        memo.save().unwrap();
        assert_eq!(std::fs::read_to_string(&memo_path).unwrap(), text);
        let age = std::fs::metadata(&memo_path)
            .unwrap()
            .modified()
            .unwrap()
            .elapsed();
        assert!(age.unwrap() < Duration::from_secs(600));
        // Rewritten with the same size and an old modification time: read again.
        std::fs::write(&file, b"two").unwrap();
        set_times(&file, 3600);
        let memo = InputDigests::load(Some(kept.clone()));
        assert_eq!(
            memo.digest(&file, None).unwrap(),
            read_digest(&mut &b"two"[..]).unwrap()
        );
    }

    #[test]
    fn the_file_reads_back_and_bad_lines_are_left_out() {
        let key = Key {
            dev: 2049,
            ino: 77,
            size: 3,
            mtime: (1_700_000_000, 5),
            ctime: (1_700_000_001, 999_999_999),
        };
        let hash = "0123456789abcdef".repeat(4);
        let text: String = lines(&HashMap::from([(key, hash.clone())]))
            .iter()
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(
            text,
            format!("2049 77 3 1700000000.000000005 1700000001.999999999 {hash}\n")
        );
        assert_eq!(parse(&text), HashMap::from([(key, hash.clone())]));
        let bad = format!("{text}1 2 3 4.5 6.7 nothex\n1 2 3 4 5.6 {hash}\n\n");
        assert_eq!(parse(&bad).len(), 1);
        assert!(Key::of(&std::fs::metadata("/").unwrap()).settled(SystemTime::now()));
    }
}
