//! Fingerprint: what an emitted link's archives were when it was written (their metadata and
//! the digest of the bytes read), so that its own rule, once the build tool runs it, can tell
//! whether one really changed; and which of them are dated in the future.
//!
//! It knows file metadata and what the one file it keeps the fingerprints in holds (a line of
//! JSON, in the store's layout: `store::ARCHIVES`); it does not know what the files are for,
//! nor when the build tool runs the rule (it goes by dates).

use camino::Utf8Path;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::time::SystemTime;

/// The file, in an emitted link's directory, that holds its archives' fingerprints.
const FILE: &str = "archives";

/// The fingerprints' file of the link emitted with `dir`.
fn kept(dir: &Utf8Path) -> crate::job::store::Kept {
    crate::job::store::Kept::new(dir.join(FILE), crate::job::store::ARCHIVES)
}

/// Device, inode, size, modification and change times.
type Stat = [i64; 7];

/// An archive as it was read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Print {
    stat: Option<Stat>,
    sha256: String,
}

impl Print {
    /// The fingerprint of `bytes`, read from a file whose metadata, taken before reading, was
    /// `stat`.
    pub fn new(stat: Option<Stat>, bytes: &[u8]) -> Print {
        Print {
            stat,
            sha256: crate::job::util::digest::sha256_hex(bytes),
        }
    }
}

/// The fingerprints an emit recorded, and whether an archive was dated in the future then.
#[derive(Debug, Serialize, Deserialize)]
struct Recorded {
    skewed: bool,
    archives: BTreeMap<String, Print>,
}

/// The file's metadata now, if it is there.
pub fn stat(path: &Utf8Path) -> Option<Stat> {
    let m = fs::metadata(path).ok()?;
    Some([
        m.dev() as i64,
        m.ino() as i64,
        m.size() as i64,
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ])
}

/// Records the archives' fingerprints in `dir`.
pub fn record(
    dir: &Utf8Path,
    archives: BTreeMap<String, Print>,
    skewed: bool,
) -> Result<(), String> {
    write(dir, &Recorded { skewed, archives }).map_err(|e| format!("write {dir}/{FILE}: {e}"))
}

/// Writes the record whole, so a check never reads half.
fn write(dir: &Utf8Path, record: &Recorded) -> std::io::Result<()> {
    let line = serde_json::to_string(record).expect("JSON of strings");
    kept(dir).keep(false, || Ok(vec![line])).map(drop)
}

/// Whether the link emitted with `dir` must be emitted again: an archive's bytes changed (its
/// metadata alone changing, as by `touch`, is noted and is no change), or nothing was recorded,
/// or an archive is dated in the future where none was, or none is any more where one was (the
/// file gets or drops the rule that checks on every run).
pub fn changed(dir: &Utf8Path, cwd: &Utf8Path) -> bool {
    let Some(mut record) = kept(dir)
        .read()
        .and_then(|text| serde_json::from_str::<Recorded>(&text).ok())
    else {
        return true;
    };
    let mut noted = false;
    for (file, print) in record.archives.iter_mut() {
        let path = cwd.join(file);
        let now = stat(&path);
        if now.is_some() && now == print.stat {
            continue;
        }
        match fs::read(&path) {
            Ok(bytes) if Print::new(now, &bytes).sha256 == print.sha256 => {
                print.stat = now;
                noted = true;
            }
            _ => return true,
        }
    }
    // Dated in the future now, or no longer: the file gets, or drops, the rule that checks on
    // every run.
    let files: Vec<String> = record.archives.keys().cloned().collect();
    if record.skewed == future(cwd, &files).is_empty() {
        return true;
    }
    if noted {
        let _ = write(dir, &record);
    }
    false
}

/// The files among `files` (relative to `cwd`) dated later than now.
pub fn future(cwd: &Utf8Path, files: &[String]) -> Vec<String> {
    let now = SystemTime::now();
    files
        .iter()
        .filter(|f| {
            fs::metadata(cwd.join(f))
                .and_then(|m| m.modified())
                .is_ok_and(|t| t > now)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use camino::Utf8PathBuf;
    use std::time::Duration;

    fn date(path: &Utf8Path, when: SystemTime) {
        fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }

    #[test]
    fn only_new_bytes_are_a_change_and_a_future_date_is_checked_until_it_passes() {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = Utf8PathBuf::from_path_buf(tmp.path().to_path_buf()).unwrap();
        let print = |name: &str| {
            let path = cwd.join(name);
            let s = stat(&path);
            (name.to_string(), Print::new(s, &fs::read(&path).unwrap()))
        };
        fs::write(cwd.join("a"), "one").unwrap();
        fs::write(cwd.join("b"), "two").unwrap();
        assert!(changed(&cwd, &cwd), "nothing recorded");
        record(&cwd, [print("a"), print("b")].into(), false).unwrap();
        assert!(!changed(&cwd, &cwd));
        // Touched, or rewritten with the same bytes: no change (and noted, not hashed again).
        date(&cwd.join("a"), SystemTime::now() - Duration::from_secs(5));
        fs::write(cwd.join("b"), "two").unwrap();
        assert!(!changed(&cwd, &cwd));
        let saved: Recorded = serde_json::from_str(&kept(&cwd).read().unwrap()).unwrap();
        assert_eq!(
            saved.archives["a"].stat,
            stat(&cwd.join("a")),
            "noted, not hashed again"
        );
        assert_eq!(saved.archives["b"].stat, stat(&cwd.join("b")));
        // Rewritten with other bytes of the same size, dated back: a change.
        let before = fs::metadata(cwd.join("a")).unwrap().modified().unwrap();
        fs::write(cwd.join("a"), "uno").unwrap();
        date(&cwd.join("a"), before);
        assert!(changed(&cwd, &cwd));
        // Removed: a change.
        record(&cwd, [print("a"), print("b")].into(), false).unwrap();
        fs::remove_file(cwd.join("b")).unwrap();
        assert!(changed(&cwd, &cwd));
        // Dated in the future: no change while it is; once it is not, emitted again.
        let files = ["a".to_string()];
        record(&cwd, [print("a")].into(), false).unwrap();
        date(
            &cwd.join("a"),
            SystemTime::now() + Duration::from_secs(3600),
        );
        assert_eq!(future(&cwd, &files), ["a"]);
        assert!(changed(&cwd, &cwd), "dated in the future since");
        record(&cwd, [print("a")].into(), true).unwrap();
        assert!(!changed(&cwd, &cwd));
        date(&cwd.join("a"), SystemTime::now() - Duration::from_secs(1));
        assert!(future(&cwd, &files).is_empty());
        assert!(changed(&cwd, &cwd), "the clocks agree again");
    }
}
