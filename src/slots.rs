//! Slots: decides how many backend jobs may run at once, and gates each job on a slot.
//!
//! It knows the GNU make jobserver (pipe or fifo, through the `jobserver` crate), the implicit
//! slot a process under a jobserver already holds, and the host-wide pool of lock files shared
//! by concurrent dtlto-bridge runs. It does not know what the jobs are.
//!
//! The gate is the per-job launcher: every job takes one slot before its command starts and gives
//! it back when the launcher exits, whatever the build tool is (make 4.3 or 4.4, ninja 1.11 or
//! 1.13), so one mechanism covers them all and the implicit slot is counted exactly once.

use camino::{Utf8Path, Utf8PathBuf};
use jobserver::{Client, FromEnvErrorKind};
use std::fs::{self, File, OpenOptions};
use std::process::Command;
use std::time::Duration;

/// Environment variable through which the run tells its launchers how to gate.
pub const GATE_ENV: &str = "DTLTO_BRIDGE_GATE";

/// How the launchers of one run get their slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// No gating: the build tool's `-j` alone limits the jobs.
    Open,
    /// The parent's jobserver; the lock file stands for this process's implicit slot.
    Jobserver { implicit: Utf8PathBuf },
    /// The host-wide pool: `slots` lock files in `dir`.
    Pool { dir: Utf8PathBuf, slots: usize },
}

impl Gate {
    fn encode(&self) -> Option<String> {
        match self {
            Gate::Open => None,
            Gate::Jobserver { implicit } => Some(format!("jobserver:{implicit}")),
            Gate::Pool { dir, slots } => Some(format!("pool:{slots}:{dir}")),
        }
    }

    fn decode(text: &str) -> Option<Gate> {
        if let Some(path) = text.strip_prefix("jobserver:") {
            return Some(Gate::Jobserver {
                implicit: path.into(),
            });
        }
        let rest = text.strip_prefix("pool:")?;
        let (slots, dir) = rest.split_once(':')?;
        Some(Gate::Pool {
            dir: dir.into(),
            slots: slots.parse().ok()?,
        })
    }
}

/// What the run decided: the gate, the `-j` to give the build tool, and what to tell the user.
pub struct Decision {
    pub gate: Gate,
    pub build_jobs: usize,
    pub client: Option<Client>,
    pub warnings: Vec<String>,
}

impl Decision {
    /// Passes the gate (and the jobserver's descriptors) down to the build tool and its launchers.
    pub fn configure(&self, cmd: &mut Command) {
        // A make or ninja that joined the parent's jobserver would take a second token per job.
        for var in ["MAKEFLAGS", "MFLAGS", "MAKELEVEL", "CARGO_MAKEFLAGS"] {
            cmd.env_remove(var);
        }
        if let Some(client) = &self.client {
            client.configure(cmd);
        }
        match self.gate.encode() {
            Some(text) => cmd.env(GATE_ENV, text),
            None => cmd.env_remove(GATE_ENV),
        };
    }
}

/// The most launchers one link keeps waiting for a parent's tokens.
const MAX_WAITING: usize = 64;

pub struct Request<'a> {
    /// `-j` as given by the user, if given.
    pub explicit_jobs: Option<usize>,
    pub parallelism: usize,
    /// Size of the host-wide pool; 0 turns it off.
    pub host_slots: usize,
    pub pool_dir: &'a Utf8Path,
    pub state_dir: &'a Utf8Path,
    pub job_count: usize,
}

/// Looks for a parent's jobserver. Call it first thing, before the process opens files of its
/// own: a closed jobserver descriptor's number may otherwise be reused and mistaken for it.
pub fn probe() -> jobserver::FromEnv {
    // SAFETY: called at start-up, before other descriptors are opened, as the crate asks.
    unsafe { Client::from_env_ext(true) }
}

/// The variable that advertised a jobserver, as `NAME=value`, if any did.
pub fn advertised(from_env: &jobserver::FromEnv) -> Option<String> {
    from_env
        .var
        .as_ref()
        .map(|(name, value)| format!("{name}={}", value.to_string_lossy()))
}

/// Whether a jobserver was advertised but cannot be used (closed or reused descriptors, a fifo
/// that cannot be opened), as opposed to none being advertised at all.
pub fn unusable(e: &jobserver::FromEnvError) -> bool {
    !matches!(
        e.kind(),
        FromEnvErrorKind::NoEnvVar | FromEnvErrorKind::NoJobserver
    )
}

/// Decides the gate for one run from what `probe` found.
pub fn decide(from_env: jobserver::FromEnv, req: &Request<'_>) -> Decision {
    let advertised = advertised(&from_env);
    let mut warnings = Vec::new();
    if let Some(n) = req.explicit_jobs {
        if let (Ok(_), Some(var)) = (&from_env.client, &advertised) {
            warnings.push(format!(
                "-j {n} was given: it overrides the jobserver of the parent build ({var})"
            ));
        }
        return open(n, warnings);
    }
    match from_env.client {
        Ok(client) => Decision {
            gate: Gate::Jobserver {
                implicit: req.state_dir.join("implicit-slot.lock"),
            },
            build_jobs: req.job_count.clamp(1, MAX_WAITING),
            client: Some(client),
            warnings,
        },
        Err(e) if unusable(&e) => {
            warnings.push(format!(
                "use the parent's jobserver ({}): {e}; running one job at a time, as make does. \
                 Fix: mark the link recipe with '+' (or run it through $(MAKE)) so make passes \
                 its jobserver to the linker",
                advertised.unwrap_or_default()
            ));
            open(1, warnings)
        }
        Err(_) if req.host_slots == 0 => open(req.parallelism, warnings),
        Err(_) => Decision {
            gate: Gate::Pool {
                dir: req.pool_dir.to_owned(),
                slots: req.host_slots,
            },
            build_jobs: req.job_count.clamp(1, req.host_slots),
            client: None,
            warnings,
        },
    }
}

fn open(jobs: usize, warnings: Vec<String>) -> Decision {
    Decision {
        gate: Gate::Open,
        build_jobs: jobs.max(1),
        client: None,
        warnings,
    }
}

/// The default place of the host-wide pool: private to this user.
pub fn default_pool_dir() -> Utf8PathBuf {
    let base = std::env::var("XDG_RUNTIME_DIR")
        .ok()
        .filter(|d| !d.is_empty() && Utf8Path::new(d).is_dir())
        .map(Utf8PathBuf::from);
    match base {
        Some(dir) => dir.join("dtlto-bridge-slots"),
        None => {
            let tmp = std::env::temp_dir();
            let tmp = Utf8PathBuf::from_path_buf(tmp).unwrap_or_else(|_| "/tmp".into());
            // SAFETY: getuid has no preconditions.
            tmp.join(format!("dtlto-bridge-slots-{}", unsafe { libc::getuid() }))
        }
    }
}

/// A slot held by a launcher; dropping it gives the slot back.
pub enum Held {
    Nothing,
    Lock(#[allow(dead_code)] File),
    Token(#[allow(dead_code)] jobserver::Acquired),
}

/// Takes a slot as the gate in the environment says, waiting as long as it takes, unless
/// `stop` says so (a signal arrived): then it returns None.
pub fn acquire(stop: &dyn Fn() -> bool) -> std::io::Result<Option<Held>> {
    let gate = std::env::var(GATE_ENV)
        .ok()
        .and_then(|t| Gate::decode(&t))
        .unwrap_or(Gate::Open);
    match gate {
        Gate::Open => Ok(Some(Held::Nothing)),
        Gate::Jobserver { implicit } => {
            // SAFETY: the launcher calls this first, before opening files of its own.
            let client = unsafe { Client::from_env_ext(true) }
                .client
                .map_err(std::io::Error::other)?;
            let implicit = lock_file(&implicit)?;
            wait(stop, || {
                if try_lock(&implicit)? {
                    return Ok(Some(Held::Lock(implicit.try_clone()?)));
                }
                Ok(client.try_acquire()?.map(Held::Token))
            })
        }
        Gate::Pool { dir, slots } => {
            fs::create_dir_all(&dir)?;
            let files = (0..slots)
                .map(|i| lock_file(&dir.join(format!("slot-{i}.lock"))))
                .collect::<std::io::Result<Vec<File>>>()?;
            wait(stop, || {
                for f in &files {
                    if try_lock(f)? {
                        return Ok(Some(Held::Lock(f.try_clone()?)));
                    }
                }
                Ok(None)
            })
        }
    }
}

/// Polls `attempt` with a short, growing pause until it yields a slot or `stop` says to stop.
fn wait(
    stop: &dyn Fn() -> bool,
    mut attempt: impl FnMut() -> std::io::Result<Option<Held>>,
) -> std::io::Result<Option<Held>> {
    let mut pause = Duration::from_millis(1);
    loop {
        if stop() {
            return Ok(None);
        }
        if let Some(held) = attempt()? {
            return Ok(Some(held));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

fn lock_file(path: &Utf8Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

/// A lock on the file, held until the file is closed: the kernel drops it when the process
/// dies, however it dies, so a killed job never keeps a slot.
fn try_lock(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(fs::TryLockError::WouldBlock) => Ok(false),
        Err(fs::TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_round_trip_through_the_environment_text() {
        for gate in [
            Gate::Jobserver {
                implicit: "/tmp/a b/implicit-slot.lock".into(),
            },
            Gate::Pool {
                dir: "/run/user/1000/dtlto-bridge-slots".into(),
                slots: 8,
            },
        ] {
            assert_eq!(Gate::decode(&gate.encode().unwrap()), Some(gate));
        }
        assert_eq!(Gate::Open.encode(), None);
        assert_eq!(Gate::decode("pool:x:/d"), None);
    }

    #[test]
    fn pool_slots_are_exclusive_and_come_back_on_close() {
        let dir = tempfile::tempdir().unwrap();
        let path = Utf8Path::from_path(dir.path()).unwrap().join("slot.lock");
        let a = lock_file(&path).unwrap();
        let b = lock_file(&path).unwrap();
        assert!(try_lock(&a).unwrap());
        assert!(!try_lock(&b).unwrap());
        drop(a);
        assert!(try_lock(&b).unwrap());
    }
}
