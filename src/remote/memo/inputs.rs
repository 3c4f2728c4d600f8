//! Inputs: input files' SHA-256 digests, remembered from one link of an output to the next by each
//! file's identity (device, inode, size, modification and change times), so that an unchanged file
//! is not read again, and by content (its BLAKE3 and size), so that a file read again for the same
//! content is not SHA-256'd again.
//!
//! It knows one small text file per (directory, linker output) beside the history, holding the
//! files and contents of the last link only. A missing, unreadable or stale file, or a line it
//! cannot read, only means files read again. A file changed less than `SETTLED` before it was
//! read is not remembered by identity: a later write in the same clock tick could leave both its
//! times as they were; nor is a file on a file system whose inodes and times may not tell a
//! file's content (`TRUSTED`).
//! Archive members that lld extracts are new files in every link, so they are always read: a
//! regular file of a size the last link read is first read for its BLAKE3 (a few times less CPU
//! than its SHA-256), and when the last link read the same content, its SHA-256 is taken from
//! there. The two digests of one content are remembered only when taken over the same bytes, in
//! one pass. It does not know what the files are for.

use crate::job::store::Kept;
use crate::job::util::digest::{is_hex_digest, Blake3, Sha256};
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use std::collections::HashMap;
use std::io::{Read, Seek};
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

/// A content's BLAKE3 (hex) and size.
type Content = (String, u64);

/// The digests remembered for one linker output, and those of this link.
#[derive(Default)]
pub struct InputDigests {
    /// Where they are kept (None: nothing is remembered).
    kept: Option<Kept>,
    known: Remembered,
    /// This link's files that may be remembered, and the contents it read, with their digests.
    now: Mutex<Remembered>,
    /// Whether each device's file system is `TRUSTED`.
    devices: Mutex<HashMap<u64, bool>>,
    /// The sizes of the contents known: only a file of one of them is read for its BLAKE3
    /// first (one of another size is read once, as without the contents).
    sizes: std::collections::HashSet<u64>,
}

/// SHA-256 digests (hex) by file identity, and by content.
#[derive(Debug, Default, PartialEq, Eq)]
struct Remembered {
    files: HashMap<Key, String>,
    contents: HashMap<Content, String>,
}

impl InputDigests {
    /// The digests kept in `kept` (nothing when None or unreadable).
    pub fn load(kept: Option<Kept>) -> InputDigests {
        let known = (kept.as_ref())
            .and_then(Kept::read)
            .map(|text| parse(&text))
            .unwrap_or_default();
        let sizes = known.contents.keys().map(|(_, size)| *size).collect();
        InputDigests {
            kept,
            known,
            now: Mutex::default(),
            devices: Mutex::default(),
            sizes,
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
            // Nothing is remembered: no identity to take, no content to know.
            return read_digest(&mut std::fs::File::open(path)?);
        }
        let seen = match seen {
            Some(m) => Key::of(m),
            None => Key::of(&std::fs::metadata(path)?),
        };
        let trusted = self.trusted(seen.dev, path);
        if let Some(hash) = self.known.files.get(&seen).filter(|_| trusted) {
            (crate::job::util::sync::lock(&self.now).files).insert(seen, hash.clone());
            return Ok(re::Digest {
                hash: hash.clone(),
                size_bytes: seen.size as i64,
            });
        }
        let mut f = std::fs::File::open(path)?;
        let meta = f.metadata()?;
        let before = Key::of(&meta);
        let now = SystemTime::now();
        // Read twice only when it may pay: a regular file (one that can be read again) of a
        // size among the contents the last link read.
        let first = meta.is_file() && self.sizes.contains(&before.size);
        let digest = self.by_content(&mut f, first)?;
        // Remembered only when nothing changed it while it was read, or shortly before.
        let after = Key::of(&f.metadata()?);
        let whole = digest.size_bytes as u64 == before.size;
        if trusted && after == before && before.settled(now) && whole {
            (crate::job::util::sync::lock(&self.now).files).insert(before, digest.hash.clone());
        }
        Ok(digest)
    }

    /// The digest of what `f` holds: when `first`, its BLAKE3 read first, and the SHA-256 the
    /// last link took of that content; else (or when the last link did not read it) both read
    /// in one pass, and remembered together.
    fn by_content(&self, f: &mut std::fs::File, first: bool) -> std::io::Result<re::Digest> {
        if first {
            let mut b3 = Blake3::default();
            let size = read_into(f, |piece| b3.update(piece))?;
            let content = (b3.finish(), size);
            if let Some(hash) = self.known.contents.get(&content) {
                return Ok(self.remember(content, hash.clone()));
            }
            f.rewind()?;
        }
        let (mut sha, mut b3) = (Sha256::default(), Blake3::default());
        let size = read_into(f, |piece| {
            sha.update(piece);
            b3.update(piece);
        })?;
        Ok(self.remember((b3.finish(), size), sha.finish()))
    }

    /// Remembers `content` as the SHA-256 `hash`: its digest.
    fn remember(&self, content: Content, hash: String) -> re::Digest {
        let size_bytes = content.1 as i64;
        (crate::job::util::sync::lock(&self.now).contents).insert(content, hash.clone());
        re::Digest { hash, size_bytes }
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
    let mut h = Sha256::default();
    let size = read_into(f, |piece| h.update(piece))?;
    Ok(re::Digest {
        hash: h.finish(),
        size_bytes: size as i64,
    })
}

/// Reads `f` to its end, each piece given to `take`; the bytes read.
fn read_into(f: &mut impl Read, mut take: impl FnMut(&[u8])) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(size);
        }
        size += n as u64;
        take(&buf[..n]);
    }
}

/// A line per file, `DEV INO SIZE MTIME CTIME HASH` (times as seconds.nanoseconds), and per
/// content, `content BLAKE3 SIZE HASH`, sorted.
fn lines(r: &Remembered) -> Vec<String> {
    let files = r.files.iter().map(|(k, hash)| {
        format!(
            "{} {} {} {}.{:09} {}.{:09} {hash}",
            k.dev, k.ino, k.size, k.mtime.0, k.mtime.1, k.ctime.0, k.ctime.1
        )
    });
    let contents =
        (r.contents.iter()).map(|((b3, size), hash)| format!("content {b3} {size} {hash}"));
    let mut lines: Vec<String> = files.chain(contents).collect();
    lines.sort();
    lines
}

/// The digests of a file's lines.
fn parse(lines: &str) -> Remembered {
    let mut r = Remembered::default();
    for line in lines.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["content", b3, size, hash] => {
                if let (true, true, Ok(size)) =
                    (is_hex_digest(b3), is_hex_digest(hash), size.parse())
                {
                    r.contents.insert((b3.to_string(), size), hash.to_string());
                }
            }
            words => {
                if let Some((key, hash)) = parse_file(words) {
                    r.files.insert(key, hash);
                }
            }
        }
    }
    r
}

fn parse_file(words: &[&str]) -> Option<(Key, String)> {
    let time = |w: &str| -> Option<(i64, i64)> {
        let (s, ns) = w.split_once('.')?;
        Some((s.parse().ok()?, ns.parse().ok()?))
    };
    let [dev, ino, size, mtime, ctime, hash] = words else {
        return None;
    };
    is_hex_digest(hash).then_some(())?;
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

    /// The digests' memo of a link of `x` in `dir`.
    fn memo_in(dir: &Path) -> Kept {
        let cache = camino::Utf8PathBuf::from_path_buf(dir.join("cache")).unwrap();
        let store = crate::job::store::CacheDir::open(cache).unwrap();
        store.link(dir, "x").digests
    }

    /// The BLAKE3 of `bytes`, in hex.
    fn b3(bytes: &[u8]) -> String {
        blake3::hash(bytes).to_hex().to_string()
    }

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
        let kept = memo_in(dir.path());
        let memo_path = kept.path().to_path_buf();
        std::fs::write(&file, b"one").unwrap();
        let one = read_digest(&mut &b"one"[..]).unwrap();
        // Just written: its change time is now, so it is read but not remembered.
        let memo = InputDigests::load(Some(kept.clone()));
        assert_eq!(memo.digest(&file, None).unwrap(), one);
        memo.save().unwrap();
        assert!(InputDigests::load(Some(kept.clone()))
            .known
            .files
            .is_empty());
        // The change time cannot be set back: a memo that saw it long ago stands in for that.
        let key = Key::of(&std::fs::metadata(&file).unwrap());
        let fake = "f".repeat(64);
        let files = HashMap::from([(key, fake.clone())]);
        kept.keep(false, || Ok(lines(&files_only(files)))).unwrap();
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

    fn files_only(files: HashMap<Key, String>) -> Remembered {
        Remembered {
            files,
            contents: HashMap::new(),
        }
    }

    #[test]
    fn a_content_read_in_the_last_link_is_known_by_its_blake3_under_any_name() {
        let dir = tempfile::tempdir().unwrap();
        let kept = memo_in(dir.path());
        // The first link reads a member lld extracted (a new file): both digests remembered.
        let first = dir.path().join("libx.a(m.o at 80).1.aa.o");
        std::fs::write(&first, b"member").unwrap();
        let memo = InputDigests::load(Some(kept.clone()));
        let member = read_digest(&mut &b"member"[..]).unwrap();
        assert_eq!(memo.digest(&first, None).unwrap(), member);
        memo.save().unwrap();
        let member_b3 = b3(b"member");
        let text = std::fs::read_to_string(kept.path()).unwrap();
        assert!(
            text.contains(&format!("content {member_b3} 6 {}\n", member.hash)),
            "{text}"
        );
        // A memo whose SHA-256 for that content is another stands for one that was not read:
        // the next link's member (another name, another file) takes it from there.
        let fake = "e".repeat(64);
        let mut r = files_only(HashMap::new());
        r.contents.insert((member_b3, 6), fake.clone());
        kept.keep(false, || Ok(lines(&r))).unwrap();
        let second = dir.path().join("libx.a(m.o at 80).2.bb.o");
        std::fs::write(&second, b"member").unwrap();
        let memo = InputDigests::load(Some(kept.clone()));
        assert_eq!(memo.digest(&second, None).unwrap().hash, fake);
        // Another content is read whole, and its two digests remembered beside.
        std::fs::write(&second, b"changed").unwrap();
        let memo = InputDigests::load(Some(kept.clone()));
        let changed = read_digest(&mut &b"changed"[..]).unwrap();
        assert_eq!(memo.digest(&second, None).unwrap(), changed);
        memo.save().unwrap();
        let known = InputDigests::load(Some(kept.clone())).known.contents;
        let key = (b3(b"changed"), 7);
        assert_eq!(known.get(&key), Some(&changed.hash));
        // Nothing remembered: the file is read for its SHA-256 alone.
        let memo = InputDigests::load(None);
        assert_eq!(memo.digest(&second, None).unwrap(), changed);
    }

    #[test]
    fn the_same_contents_again_only_touch_the_memo_and_others_rewrite_it() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let kept = memo_in(dir.path());
        let m = dir.path().join("m.o");
        // A link that reads `bytes` from a new file, as lld's extracted members are.
        let link = |bytes: &[u8]| {
            let _ = std::fs::remove_file(&m);
            std::fs::write(&m, bytes).unwrap();
            let memo = InputDigests::load(Some(kept.clone()));
            memo.digest(&m, None).unwrap();
            memo.save().unwrap();
            std::fs::metadata(kept.path()).unwrap().ino()
        };
        let first = link(b"member");
        assert_eq!(
            link(b"member"),
            first,
            "same content, new file: not rewritten"
        );
        assert_ne!(link(b"others"), first, "other content: rewritten");
    }

    #[test]
    fn what_cannot_be_read_twice_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let kept = memo_in(dir.path());
        // A content of the size a pipe has (none) is known: not a regular file, it is read once
        // all the same.
        let mut r = files_only(HashMap::new());
        let empty = b3(b"");
        r.contents.insert((empty, 0), "b".repeat(64));
        kept.keep(false, || Ok(lines(&r))).unwrap();
        let fifo = dir.path().join("f.o");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(fifo, b"fifo").unwrap())
        };
        assert_eq!(std::fs::metadata(&fifo).unwrap().len(), 0);
        let got = InputDigests::load(Some(kept)).digest(&fifo, None);
        writer.join().unwrap();
        assert_eq!(got.unwrap(), read_digest(&mut &b"fifo"[..]).unwrap());
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
        let b3 = "a".repeat(64);
        let mut r = files_only(HashMap::from([(key, hash.clone())]));
        r.contents.insert((b3.clone(), 3), hash.clone());
        let text: String = lines(&r).iter().map(|l| format!("{l}\n")).collect();
        assert_eq!(
            text,
            format!(
                "2049 77 3 1700000000.000000005 1700000001.999999999 {hash}\n\
                 content {b3} 3 {hash}\n"
            )
        );
        assert_eq!(parse(&text), r);
        // Upper-case digits too: REAPI's digests are lower case.
        let upper = hash.to_uppercase();
        let bad = format!(
            "{text}1 2 3 4.5 6.7 nothex\n1 2 3 4 5.6 {hash}\n\ncontent {b3} x {hash}\n\
             content {b3} 3\ncontent nothex 3 {hash}\ncontent {b3} 4 {upper}\n\
             1 2 3 4.5 6.7 {upper}\n"
        );
        assert_eq!(parse(&bad), r);
        assert!(Key::of(&std::fs::metadata("/").unwrap()).settled(SystemTime::now()));
    }
}
