//! The disk cache (`--remote-disk-cache DIR`) as a user who shares the machine needs it, against
//! the in-process server: a kept file is taken only when its bytes are its digest, a directory
//! another user owns or others may write in is not used (one warning, the link goes on), no
//! symbolic link planted under it is followed, and an output never shares its inode with a kept
//! file, so neither changes the other.

use super::reapi::{digest_of, Server};
use super::remote::{content_jobs, each_job, linked, modules, ran, COMPILE};
use crate::space::{object, stderr, Space};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The five outputs of `content_jobs`.
const OUTPUTS: usize = 5;

/// A space of `content_jobs` and its disk cache (not made yet), with the option naming it.
fn disk_space() -> (Space, PathBuf, String) {
    let s = Space::new();
    let disk = s.tmp.with_file_name("disk");
    let arg = format!("--remote-disk-cache={}", disk.display());
    modules(&s, None);
    content_jobs(&s, COMPILE);
    (s, disk, arg)
}

/// Where the object every job of `content_jobs` writes is kept.
fn kept_object(disk: &Path) -> PathBuf {
    let hash = digest_of(object().as_bytes()).hash;
    disk.join("cas").join(&hash[..2]).join(hash)
}

/// How many jobs of a report took their outputs from the disk cache.
fn from_disk(report: &serde_json::Value) -> usize {
    let workers = each_job(report, "/remote/worker");
    workers.iter().filter(|w| *w == "disk cache").count()
}

/// Every output is the object the jobs write, a regular file of its own.
fn assert_outputs(s: &Space, disk: &Path) {
    let kept = fs::symlink_metadata(kept_object(disk)).ok();
    for i in 0..OUTPUTS {
        let out = s.path(&format!("job{i}.native.o"));
        let m = fs::symlink_metadata(&out).unwrap();
        assert!(m.is_file(), "{} is a regular file", out.display());
        assert_eq!(m.nlink(), 1, "{} has no other name", out.display());
        if let Some(k) = &kept {
            assert_ne!(m.ino(), k.ino(), "{} is not the kept file", out.display());
        }
        assert_eq!(s.read(&format!("job{i}.native.o")), object());
    }
}

/// `path`'s mode bits.
fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn a_planted_file_of_the_right_name_and_size_but_other_bytes_is_not_taken() {
    let server = Server::start();
    let (s, disk, arg) = disk_space();
    let (err, first) = linked(&s, &server, &[&arg]);
    assert_eq!(ran(&first), ["remote"; OUTPUTS], "{err}");
    // Replaced by other bytes of the same size, read-only as a kept file is.
    let kept = kept_object(&disk);
    let mut planted = object().into_bytes();
    planted[40] ^= 0xff;
    fs::remove_file(&kept).unwrap();
    fs::write(&kept, &planted).unwrap();
    fs::set_permissions(&kept, fs::Permissions::from_mode(0o444)).unwrap();
    let (err, second) = linked(&s, &server, &[&arg]);
    assert_eq!(from_disk(&second), 0, "the planted file was taken: {err}");
    assert_eq!(ran(&second), ["remote cache"; OUTPUTS], "{err}");
    assert_outputs(&s, &disk);
    // It is gone, and the object kept again in its place.
    assert_eq!(fs::read(&kept).unwrap(), object().as_bytes());
    let (err, third) = linked(&s, &server, &[&arg]);
    assert_eq!(from_disk(&third), OUTPUTS, "{err}");
    assert_outputs(&s, &disk);
}

#[test]
fn a_directory_of_another_user_or_that_others_may_write_is_not_used_and_the_link_goes_on() {
    let server = Server::start();
    let (s, disk, arg) = disk_space();
    // (what the warning says, the directory's mode, its owner).
    let mut cases = vec![("others may write", 0o777, None)];
    if rustix::process::geteuid().is_root() {
        cases.push(("belongs to uid 4242", 0o700, Some(4242)));
    }
    for (why, mode, owner) in cases {
        let _ = fs::remove_dir_all(&disk);
        fs::create_dir(&disk).unwrap();
        fs::set_permissions(&disk, fs::Permissions::from_mode(mode)).unwrap();
        std::os::unix::fs::chown(&disk, owner, None).unwrap();
        for _ in 0..2 {
            let (err, report) = linked(&s, &server, &[&arg]);
            let said = err.matches("--remote-disk-cache is not used").count();
            assert_eq!(said, 1, "{why}: one warning: {err}");
            assert!(err.contains(why), "{err}");
            assert!(err.contains("DTLTO_BRIDGE_REMOTE_DISK_CACHE"), "{err}");
            assert_eq!(from_disk(&report), 0, "{why}: {err}");
            assert!(!disk.join("cas").exists(), "{why}: nothing made in it");
            assert_outputs(&s, &disk);
        }
    }
    // Named by the variable: refused the same way.
    let report = s.tmp.with_file_name("report.json");
    let mut cmd = s.bridge(&[&format!("--report={}", report.display())]);
    cmd.args(server.args())
        .env("DTLTO_BRIDGE_REMOTE_DISK_CACHE", &disk)
        .arg("j.json");
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("is not used"), "{}", stderr(&out));
}

#[test]
fn symbolic_links_planted_in_the_cache_are_followed_neither_by_keep_nor_by_trim() {
    let server = Server::start();
    let (s, disk, arg) = disk_space();
    // The user's files: one of the object's very bytes, one last written two days ago.
    let copy = s.tmp.with_file_name("copy.o");
    fs::write(&copy, object()).unwrap();
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o644)).unwrap();
    let notes = s.tmp.with_file_name("notes");
    fs::write(&notes, "precious").unwrap();
    let two_days = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 86400);
    let file = fs::File::options().write(true).open(&notes).unwrap();
    file.set_modified(two_days).unwrap();
    // Links under the cache, where the object is kept and where trim stamps its walks.
    let kept = kept_object(&disk);
    fs::create_dir_all(kept.parent().unwrap()).unwrap();
    for dir in [
        &disk,
        &disk.join("cas"),
        &kept.parent().unwrap().to_path_buf(),
    ] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
    }
    std::os::unix::fs::symlink(&copy, &kept).unwrap();
    std::os::unix::fs::symlink(&notes, disk.join("trimmed")).unwrap();
    let (err, first) = linked(&s, &server, &[&arg]);
    assert_eq!(ran(&first), ["remote"; OUTPUTS], "{err}");
    assert_eq!(
        mode(&copy),
        0o644,
        "keep changed the mode of the file a link names"
    );
    assert_eq!(
        fs::read_to_string(&notes).unwrap(),
        "precious",
        "trim wrote into it"
    );
    assert!(
        fs::symlink_metadata(&kept).unwrap().is_file(),
        "kept as a file"
    );
    assert!(fs::symlink_metadata(disk.join("trimmed"))
        .unwrap()
        .is_file());
    assert_outputs(&s, &disk);
    let (err, second) = linked(&s, &server, &[&arg]);
    assert_eq!(from_disk(&second), OUTPUTS, "{err}");
    assert_outputs(&s, &disk);
    assert_eq!(mode(&copy), 0o644);
    assert_eq!(fs::read(&copy).unwrap(), object().as_bytes());
}

#[test]
fn an_output_is_never_the_kept_files_inode_keeps_its_mode_and_its_edits_stay_its_own() {
    let server = Server::start();
    let (s, disk, arg) = disk_space();
    // The mode a file written here gets (the test's umask): what the outputs have.
    let written = mode(&s.write("probe", ""));
    let (err, first) = linked(&s, &server, &[&arg]);
    assert_eq!(ran(&first), ["remote"; OUTPUTS], "{err}");
    let kept = kept_object(&disk);
    assert_eq!(mode(&kept) & 0o222, 0, "kept read-only");
    assert_eq!(mode(&disk), 0o700, "the directory made 0700");
    for i in 0..OUTPUTS {
        assert_eq!(
            mode(&s.path(&format!("job{i}.native.o"))),
            written,
            "job{i}"
        );
    }
    assert_outputs(&s, &disk);
    // Each output rewritten in place to the same size (objcopy or strip running as root,
    // whom no mode stops): the kept object stays as it was.
    let edit = |i: usize| {
        use std::io::{Seek, Write};
        let mut f = fs::File::options()
            .write(true)
            .open(s.path(&format!("job{i}.native.o")))
            .unwrap();
        f.seek(std::io::SeekFrom::Start(40)).unwrap();
        f.write_all(b"edited").unwrap();
    };
    (0..OUTPUTS).for_each(edit);
    assert_eq!(
        fs::read(&kept).unwrap(),
        object().as_bytes(),
        "an edit reached it"
    );
    let (err, second) = linked(&s, &server, &[&arg]);
    assert_eq!(from_disk(&second), OUTPUTS, "{err}");
    assert_outputs(&s, &disk);
    for i in 0..OUTPUTS {
        assert_eq!(
            mode(&s.path(&format!("job{i}.native.o"))),
            written,
            "job{i}"
        );
    }
    // An output placed from the cache, edited again: the cache is not.
    edit(0);
    assert_eq!(fs::read(&kept).unwrap(), object().as_bytes());
}
