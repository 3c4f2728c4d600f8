//! RunDir: a run's private directory — what lives where in it (the owner lock, the launchers'
//! socket, the build file, the build tool's log, each job attempt's stderr), who owns it, and
//! what is left of runs that died.
//!
//! It knows the directory's whole layout and the owner lock (held for the run's whole life, so
//! a later run can tell a dead run's directory from a live one); it does not run anything or
//! decide what failed.

use camino::{Utf8Path, Utf8PathBuf};
use std::fs::{self, File};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The prefix of every run's private directory in TMPDIR.
pub const PREFIX: &str = "dtlto-bridge-";
const OWNER: &str = "owner.lock";
/// The owner lock while the directory is being set up (locked, then renamed to `OWNER`).
const OWNER_NEW: &str = "owner.lock.new";
/// How old an unlocked `OWNER_NEW` must be to be a dead run's.
const SETUP_AGE: std::time::Duration = std::time::Duration::from_secs(60);
/// The socket the launchers reach the run on.
pub const SOCKET: &str = "sched.sock";
/// The jobs' stderr files.
const JOBS: &str = "jobs";
/// Says the directory was kept (`--keep`): the user's now, never removed.
const KEPT: &str = "kept";

/// A run's private directory; removed when dropped, unless kept.
pub struct RunDir {
    dir: Utf8PathBuf,
    temp: Option<tempfile::TempDir>,
    /// Locked while the run lives; the kernel drops the lock when the run dies.
    _owner: File,
}

impl RunDir {
    /// Creates a private directory (mode 0700) in TMPDIR and takes its owner lock.
    pub fn create() -> Result<RunDir, String> {
        let temp = private(PREFIX)
            .tempdir()
            .map_err(|e| format!("create temporary directory: {e}"))?;
        RunDir::own(temp)
    }

    /// Creates the private directory named `{PREFIX}{name}` (mode 0700) in TMPDIR, so that the
    /// paths in it are the same from one run to the next (they are recorded in index shards,
    /// and so in the actions a remote cache knows); a dead run's directory of that name is
    /// removed first. When another live run holds it, or it is not this user's own directory,
    /// a directory of a random name is created instead, and the second value says why.
    pub fn create_named(name: &str) -> Result<(RunDir, Option<String>), String> {
        let tmp = std::env::temp_dir();
        let path = tmp.join(format!("{PREFIX}{name}"));
        let random = |why: String| RunDir::create().map(|dir| (dir, Some(why)));
        if fs::symlink_metadata(&path).is_ok() {
            if let Err(why) = remove_if_dead(&path) {
                return random(format!("{} {why}", path.display()));
            }
        }
        match private(&format!("{PREFIX}{name}"))
            .rand_bytes(0)
            .tempdir_in(&tmp)
        {
            Ok(temp) => RunDir::own(temp).map(|dir| (dir, None)),
            Err(e) => random(format!("create {}: {e}", path.display())),
        }
    }

    /// Takes the owner lock of a new directory.
    fn own(temp: tempfile::TempDir) -> Result<RunDir, String> {
        let dir = Utf8PathBuf::from_path_buf(temp.path().to_path_buf())
            .map_err(|p| format!("use temporary directory {}: not UTF-8", p.display()))?;
        // Locked under another name first, so a scan never finds the lock file unlocked.
        let new = dir.join(OWNER_NEW);
        let owner = File::create(&new).map_err(|e| format!("create {new}: {e}"))?;
        owner.lock().map_err(|e| format!("lock {new}: {e}"))?;
        fs::rename(&new, dir.join(OWNER)).map_err(|e| format!("rename {new}: {e}"))?;
        fs::create_dir(dir.join(JOBS)).map_err(|e| format!("create {dir}/{JOBS}: {e}"))?;
        Ok(RunDir {
            dir,
            temp: Some(temp),
            _owner: owner,
        })
    }

    pub fn path(&self) -> &Utf8Path {
        &self.dir
    }

    /// The build tool's combined stdout and stderr.
    pub fn tool_log(&self) -> Utf8PathBuf {
        self.dir.join("tool.log")
    }

    /// Keeps the directory after the run, and returns its path; a later run never removes it.
    pub fn keep(mut self) -> Utf8PathBuf {
        let _ = fs::write(self.dir.join(KEPT), "kept by --keep\n");
        let _ = fs::remove_file(self.dir.join(OWNER));
        if let Some(t) = self.temp.take() {
            let _ = t.keep();
        }
        self.dir.clone()
    }
}

/// A directory builder with `prefix` and mode 0700 (tempfile's directories follow the umask).
fn private(prefix: &str) -> tempfile::Builder<'_, '_> {
    let mut builder = tempfile::Builder::new();
    builder
        .prefix(prefix)
        .permissions(fs::Permissions::from_mode(0o700));
    builder
}

/// Where attempt `attempt` of job `index` writes its stderr in the private directory `dir`.
pub fn stderr_file(dir: &Utf8Path, index: usize, attempt: usize) -> Utf8PathBuf {
    dir.join(JOBS).join(format!("{index}.{attempt}.stderr"))
}

/// Where the engine writes what `__send` needs of job `index` (`bundle::send::Spec`); the
/// bundle and the record of where it went are beside it.
pub fn send_spec(dir: &Utf8Path, index: usize) -> Utf8PathBuf {
    dir.join(JOBS).join(format!("{index}.send.json"))
}

/// Removes the private directories that runs of this user left in `tmp` when they died
/// (`kill -9`, the OOM killer): those whose owner lock nobody holds. Best effort.
pub fn remove_dead(tmp: &Path) {
    let Ok(entries) = fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(PREFIX) {
            let _ = remove_if_dead(&entry.path());
        }
    }
}

/// Removes `path` if it is a private directory of this user that a dead run left (its owner
/// lock is free), or says why it is not one. It is first renamed to a name of its own and
/// removed only if it still holds the lock file found free, so a run that has meanwhile
/// replaced it with a live directory of the same name keeps it.
fn remove_if_dead(path: &Path) -> Result<(), &'static str> {
    const LIVE: &str = "is another live run's";
    let uid = rustix::process::getuid().as_raw();
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() && meta.uid() == uid => {}
        _ => return Err("is not a directory of this user's"),
    }
    if path.join(KEPT).exists() {
        return Err("was kept (--keep): remove it, and relinks use one directory again");
    }
    // A run that died while setting its directory up left only the lock's first name, which a
    // live run locks right after creating it: found unlocked a minute later, it is dead.
    let setting_up = |name: &str| {
        name == OWNER_NEW
            && fs::metadata(path.join(name))
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > SETUP_AGE))
    };
    let Some((name, lock)) = [OWNER, OWNER_NEW]
        .into_iter()
        .filter(|name| *name == OWNER || setting_up(name))
        .find_map(|name| Some((name, File::open(path.join(name)).ok()?)))
    else {
        return Err(LIVE);
    };
    let (Ok(()), Ok(held)) = (lock.try_lock(), lock.metadata()) else {
        return Err(LIVE);
    };
    bury(path, name, &held).then_some(()).ok_or(LIVE)
}

/// Removes `path` if its owner lock file is still `held`'s (the caller keeps that file open, so
/// its inode is not reused): renamed aside first, then checked again, and put back, never over
/// another directory, if a live run replaced it meanwhile. (Three runs of one link racing for
/// its name can still leave a live run's directory aside; that run then fails.)
fn bury(path: &Path, lock: &str, held: &fs::Metadata) -> bool {
    let same = |dir: &Path| {
        fs::metadata(dir.join(lock)).is_ok_and(|m| m.dev() == held.dev() && m.ino() == held.ino())
    };
    if !same(path) {
        return false;
    }
    let grave = path.with_file_name(format!(
        "{}.dead-{}-{:x}",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    if fs::rename(path, &grave).is_err() {
        return false;
    }
    if !same(&grave) {
        rename_noreplace(&grave, path);
        return false;
    }
    fs::remove_dir_all(&grave).is_ok()
}

/// Renames `from` to `to` unless `to` exists (best effort).
fn rename_noreplace(from: &Path, to: &Path) {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    let _ = renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_directory_is_the_same_from_run_to_run_unless_a_live_run_holds_it() {
        let name = format!("test-named-{}", std::process::id());
        let (first, why) = RunDir::create_named(&name).unwrap();
        assert!(first.path().as_str().ends_with(&format!("{PREFIX}{name}")));
        assert_eq!(why, None);
        let (second, why) = RunDir::create_named(&name).unwrap();
        assert!(why.unwrap().contains("another live run's"));
        assert_ne!(
            second.path(),
            first.path(),
            "a live run keeps its directory"
        );
        let path = first.path().to_owned();
        drop(first);
        drop(second);
        let (again, _) = RunDir::create_named(&name).unwrap();
        assert_eq!(again.path(), path);
        // A kept directory is the user's now: never removed, and said so.
        let kept = again.keep();
        let (other, why) = RunDir::create_named(&name).unwrap();
        assert_ne!(other.path(), kept);
        assert!(why.unwrap().contains("was kept (--keep)"));
        fs::remove_dir_all(kept).unwrap();
    }

    #[test]
    fn private_directories_are_mode_0700_whatever_the_umask() {
        // The usual umask, which leaves a plain new directory 0755 (process-wide: the other
        // tests' files are not the worse for it).
        // SAFETY: umask has no preconditions.
        unsafe { libc::umask(0o022) };
        let mode = |dir: &RunDir| fs::metadata(dir.path()).unwrap().mode() & 0o7777;
        let (named, _) =
            RunDir::create_named(&format!("test-mode-{}", std::process::id())).unwrap();
        assert_eq!(mode(&named), 0o700, "{}", named.path());
        let random = RunDir::create().unwrap();
        assert_eq!(mode(&random), 0o700, "{}", random.path());
    }

    #[test]
    fn a_dead_directory_replaced_by_a_live_one_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(format!("{PREFIX}race"));
        fs::create_dir(&path).unwrap();
        File::create(path.join(OWNER)).unwrap();
        // This run found the lock free; then another run removed the dead directory and
        // made its own of the same name before this one removed it.
        let open = File::open(path.join(OWNER)).unwrap(); // its inode is not reused while open
        let found = open.metadata().unwrap();
        fs::remove_dir_all(&path).unwrap();
        fs::create_dir(&path).unwrap();
        File::create(path.join("keep")).unwrap();
        File::create(path.join(OWNER)).unwrap();
        assert!(
            !bury(&path, OWNER, &found),
            "another run's directory is not removed"
        );
        assert!(path.join("keep").exists());
        assert_eq!(
            fs::read_dir(tmp.path()).unwrap().count(),
            1,
            "nor moved aside"
        );
        let now = fs::metadata(path.join(OWNER)).unwrap();
        assert!(bury(&path, OWNER, &now));
        assert!(!path.exists());
        assert_eq!(
            fs::read_dir(tmp.path()).unwrap().count(),
            0,
            "no grave is left"
        );
    }

    #[test]
    fn a_dead_runs_directory_is_removed_and_a_live_or_kept_one_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let make = || {
            let t = tempfile::Builder::new()
                .prefix(PREFIX)
                .tempdir_in(tmp.path())
                .unwrap();
            t.keep()
        };
        let dead = make();
        File::create(dead.join(OWNER)).unwrap();
        let live = make();
        let held = File::create(live.join(OWNER)).unwrap();
        held.lock().unwrap();
        let kept = make(); // no owner lock: kept, or a test root
                           // Between creating its lock file and locking it, a run's directory is not dead; a
                           // minute later it is (it died while setting up).
        let setting_up = make();
        File::create(setting_up.join(OWNER_NEW)).unwrap();
        let died = make();
        File::create(died.join(OWNER_NEW))
            .unwrap()
            .set_modified(SystemTime::now() - 2 * SETUP_AGE)
            .unwrap();
        remove_dead(tmp.path());
        assert!(!dead.exists());
        assert!(setting_up.exists());
        assert!(!died.exists());
        assert!(live.exists());
        assert!(kept.exists());
    }
}
