//! Own: opens a directory of remembered files only when it is this user's own and no one else
//! may write in it (files another user put there would be taken as remembered, or as outputs);
//! the owner and mode are read from the directory opened, so nothing can be put in its place
//! between the check and the use, and no symbolic link is followed below the top.
//!
//! It knows owners, modes and directory descriptors; it does not know what the files hold.

use rustix::fs::{fstat, mkdirat, openat, Mode, OFlags};
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

/// What to do with a directory of this user's that others may write in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Others {
    /// Refuse it (a directory the user named for a cache of outputs may be meant to be shared).
    Refuse,
    /// Take their write permission away (a directory dtlto-bridge made, as older versions did
    /// under the user's umask, 0775 under 002).
    Tighten,
}

/// The directory `dir`, made (0700) when missing, opened and checked: this user's, and no
/// one else may write in it (or no longer, with `Others::Tighten`). The error says why not,
/// naming the directory.
pub fn own_dir(dir: &Path, others: Others) -> Result<OwnedFd, String> {
    let shown = dir.display().to_string();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("make {shown}: {e}"))?;
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("open {shown}: {e}"))?;
    check(&fd, &shown, others)?;
    Ok(fd)
}

/// The directory `name` in `top` (shown as `shown`), made (0700) when missing, opened without
/// following a symbolic link, and checked as `own_dir` checks.
pub fn own_subdir(top: &OwnedFd, name: &str, shown: &str) -> Result<OwnedFd, String> {
    let shown = format!("{shown}/{name}");
    match mkdirat(top, name, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(e) => return Err(format!("make {shown}: {e}")),
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = openat(top, name, flags, Mode::empty()).map_err(|e| match e {
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => {
            format!("open {shown}: it is a symbolic link")
        }
        e => format!("open {shown}: {e}"),
    })?;
    check(&fd, &shown, Others::Refuse)?;
    Ok(fd)
}

/// Refuses the directory `fd` (shown as `shown`) unless it is this user's and no one else may
/// write in it; with `Others::Tighten`, a directory of this user's loses their permission.
fn check(fd: &OwnedFd, shown: &str, others: Others) -> Result<(), String> {
    let uid = rustix::process::geteuid().as_raw();
    let st = fstat(fd).map_err(|e| format!("read {shown}: {e}"))?;
    let mode = st.st_mode & 0o7777;
    if st.st_uid != uid {
        Err(format!(
            "{shown} belongs to uid {}, not to this user (uid {uid})",
            st.st_uid
        ))
    } else if mode & 0o022 != 0 && others == Others::Tighten {
        rustix::fs::fchmod(fd, rustix::fs::Mode::from_raw_mode(mode & !0o022))
            .map_err(|e| format!("take others' write permission from {shown}: {e}"))
    } else if mode & 0o022 != 0 {
        let who = match mode & 0o002 {
            0 => "its group",
            _ => "others",
        };
        Err(format!(
            "{who} may write in {shown} (mode {mode:o}): make it 0700"
        ))
    } else {
        Ok(())
    }
}
