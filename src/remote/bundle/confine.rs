//! Confine: the compiler a host entry runs, held to the bundle's files. Landlock lets it read
//! and run only the system's programs and libraries (`/usr`, `/lib*`, `/bin`, the loader's
//! cache, `/dev/zero` and `/dev/urandom`, the compiler's own installation) and write only in
//! the scratch directory (and /dev/null), so that
//! nothing a bundle holds (module asm's `.incbin "/etc/shadow"`, an `#include`) reaches a host
//! file; its environment is cleared (HOME and TMPDIR are the scratch directory), and its file
//! size and CPU time are bounded.
//!
//! Where the kernel has no Landlock it says so and refuses, unless the host sets
//! DTLTO_CLANG_UNCONFINED (then it runs as distccd runs any compile its clients send). It does
//! not know what clang does inside those bounds.

use landlock::{
    path_beneath_rules, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, ABI,
};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set on a host whose kernel cannot confine the compiler, to run bundles anyway.
pub const UNCONFINED_VAR: &str = "DTLTO_CLANG_UNCONFINED";
/// The largest file the compiler may write (an object is far smaller).
const FILE_SIZE: u64 = 2 << 30;
/// The most CPU time one backend compile may take.
const CPU_SECONDS: u64 = 3600;

/// A Landlock ruleset made ready for the compiler (None: running unconfined, as the host
/// allowed).
pub struct Confinement(Option<OwnedFd>);

/// The ruleset for a compile in `scratch` by `compiler`, or why there can be none.
pub fn prepare(scratch: &Path, compiler: &Path) -> Result<Confinement, String> {
    let abi = ABI::V5;
    let mut system: Vec<PathBuf> = [
        "/usr",
        "/lib",
        "/lib64",
        "/lib32",
        "/bin",
        "/etc/ld.so.cache",
        "/dev/zero",
        "/dev/urandom",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    // An installation elsewhere (/opt/llvm-22/bin/clang): its prefix.
    let real = std::fs::canonicalize(compiler).unwrap_or_else(|_| compiler.to_path_buf());
    system.extend(real.parent().and_then(Path::parent).map(Path::to_path_buf));
    let created = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(&system, AccessFs::from_read(abi))))
        .and_then(|r| {
            r.add_rules(path_beneath_rules(
                [scratch, Path::new("/dev/null")],
                AccessFs::from_all(abi),
            ))
        })
        .map_err(|e| format!("confine the compiler: {e}"))?;
    match Option::<OwnedFd>::from(created) {
        Some(fd) => Ok(Confinement(Some(fd))),
        None if std::env::var_os(UNCONFINED_VAR).is_some() => Ok(Confinement(None)),
        None => Err(format!(
            "this host's kernel cannot confine the compiler to the bundle's files (no \
             Landlock); set {UNCONFINED_VAR}=1 for the daemon to run bundles anyway"
        )),
    }
}

impl Confinement {
    /// Makes `cmd` start confined: Landlock (with no new privileges), the file size and CPU
    /// bounds, an environment of PATH alone with HOME and TMPDIR in `scratch`.
    pub fn apply(&self, cmd: &mut Command, scratch: &Path) {
        cmd.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", scratch)
            .env("TMPDIR", scratch);
        let fd = self.0.as_ref().map(|fd| fd.as_raw_fd());
        // SAFETY: only async-signal-safe calls (setrlimit, prctl, syscall) between fork and
        // exec; the ruleset's descriptor outlives the spawn (`self` is borrowed across it).
        unsafe {
            cmd.pre_exec(move || {
                let limit = |resource, max: u64| {
                    let l = libc::rlimit {
                        rlim_cur: max,
                        rlim_max: max,
                    };
                    match libc::setrlimit(resource, &l) {
                        0 => Ok(()),
                        _ => Err(std::io::Error::last_os_error()),
                    }
                };
                limit(libc::RLIMIT_FSIZE, FILE_SIZE)?;
                limit(libc::RLIMIT_CPU, CPU_SECONDS)?;
                if let Some(fd) = fd {
                    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
}
