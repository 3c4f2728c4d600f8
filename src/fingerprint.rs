//! Fingerprint: what a file is now (device, inode, size, modification and change times), so
//! that an emitted link's own rule can tell whether one of its archives changed since it was
//! written, whatever the clocks say; and which files are dated in the future.
//!
//! It knows file metadata and the one file it keeps the fingerprints in; it does not know
//! what the files are for or run anything.

use camino::Utf8Path;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::time::SystemTime;

/// The file, in an emitted link's directory, that holds its archives' fingerprints.
const FILE: &str = "archives.json";

type Print = [i64; 7];

fn of(path: &Utf8Path) -> Option<Print> {
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

/// Records the fingerprints of `files` (relative to `cwd`) in `dir`.
pub fn record(dir: &Utf8Path, cwd: &Utf8Path, files: &[String]) -> Result<(), String> {
    let prints: BTreeMap<&str, Option<Print>> = files
        .iter()
        .map(|f| (f.as_str(), of(&cwd.join(f))))
        .collect();
    let path = dir.join(FILE);
    let text = serde_json::to_string(&prints).expect("JSON of numbers");
    fs::write(&path, text).map_err(|e| format!("write {path}: {e}"))
}

/// Whether every file recorded in `dir` is still what it was (false if nothing was recorded).
pub fn unchanged(dir: &Utf8Path, cwd: &Utf8Path) -> bool {
    let Ok(text) = fs::read_to_string(dir.join(FILE)) else {
        return false;
    };
    let Ok(prints) = serde_json::from_str::<BTreeMap<String, Option<Print>>>(&text) else {
        return false;
    };
    !prints.is_empty()
        && prints
            .iter()
            .all(|(f, print)| print.is_some() && of(&cwd.join(f)) == *print)
}

/// The files among `files` (relative to `cwd`) dated later than now.
pub fn future<'a>(cwd: &Utf8Path, files: &'a [String]) -> Vec<&'a str> {
    let now = SystemTime::now();
    files
        .iter()
        .filter(|f| {
            fs::metadata(cwd.join(f))
                .and_then(|m| m.modified())
                .is_ok_and(|t| t > now)
        })
        .map(String::as_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use camino::Utf8PathBuf;

    #[test]
    fn a_rewritten_or_removed_file_is_a_change_whatever_its_date() {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = Utf8PathBuf::from_path_buf(tmp.path().to_path_buf()).unwrap();
        fs::write(cwd.join("a"), "one").unwrap();
        fs::write(cwd.join("b"), "two").unwrap();
        let files = vec!["a".to_string(), "b".to_string()];
        assert!(!unchanged(&cwd, &cwd), "nothing recorded");
        record(&cwd, &cwd, &files).unwrap();
        assert!(unchanged(&cwd, &cwd));
        // Rewritten with the same size and dated back to where it was: the change time tells.
        let before = fs::metadata(cwd.join("a")).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(cwd.join("a"), "uno").unwrap();
        fs::File::options()
            .write(true)
            .open(cwd.join("a"))
            .unwrap()
            .set_modified(before)
            .unwrap();
        assert!(!unchanged(&cwd, &cwd));
        record(&cwd, &cwd, &files).unwrap();
        fs::remove_file(cwd.join("b")).unwrap();
        assert!(!unchanged(&cwd, &cwd));
        assert!(future(&cwd, &files).is_empty());
        let later = SystemTime::now() + std::time::Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(cwd.join("a"))
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_eq!(future(&cwd, &files), ["a"]);
    }
}
