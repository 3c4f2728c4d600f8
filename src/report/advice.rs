//! Advice: gives a piece of advice once per build rather than once per link, since a build that
//! links 25 programs would otherwise print the same warning 25 times.
//!
//! It knows what identifies a build from inside one of its links (the session, the process group
//! and the jobserver the parent advertised) and keeps one marker file per (build, advice) in this
//! user's directory; it does not know what the advice says. When that directory cannot be used,
//! the advice is given every time.

use std::time::{Duration, SystemTime};

/// Markers older than this are removed.
const FORGET: Duration = Duration::from_secs(24 * 3600);

/// What names the build this process belongs to.
fn build_key() -> Vec<u8> {
    // Raw calls on purpose: in a PID namespace (a container whose session leader lives outside
    // it) both can be 0, which rustix's `Pid` refuses with a panic.
    // SAFETY: getsid and getpgrp take no pointers and cannot fail for the calling process.
    let (sid, pgrp) = unsafe { (libc::getsid(0), libc::getpgrp()) };
    let mut key = format!("{sid} {pgrp}").into_bytes();
    for var in ["MAKEFLAGS", "CARGO_MAKEFLAGS", "MFLAGS"] {
        key.push(0);
        if let Some(v) = std::env::var_os(var) {
            key.extend_from_slice(v.as_encoded_bytes());
        }
    }
    key
}

/// Prints `message` as a warning unless this build has been given it already; the markers
/// live in `dir`, this user's own directory (see `pool::user_dir`), or None when it cannot be
/// used.
pub fn once(dir: Option<&camino::Utf8Path>, message: &str) {
    if first_time(dir, message) {
        crate::report::warning(message);
    }
}

fn first_time(dir: Option<&camino::Utf8Path>, message: &str) -> bool {
    let Some(dir) = dir else {
        return true;
    };
    let name = crate::job::util::digest::stable_name(&[&build_key(), message.as_bytes()]);
    forget_old(dir.as_std_path());
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(format!("advice-{name}")));
    match created {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::AlreadyExists,
    }
}

fn forget_old(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with("advice-") {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > FORGET);
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
