//! Job: runs one backend command for the build tool and records how it went.
//!
//! Generated build files call `dtlto-bridge __job STATE_DIR N -- COMMAND...` during a run; it
//! saves the command's stderr and a status file for job N. It does not know what the job
//! should produce: `verify` checks that.

use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use std::fs::{self, File};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// The recorded outcome of one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// Exit code, when the command exited.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
    /// Why the command could not be started at all.
    pub spawn_error: Option<String>,
    /// Seconds since the Unix epoch.
    pub start: f64,
    pub end: f64,
    /// Whether the command ran through a wrapper (at first).
    #[serde(default)]
    pub wrapped: bool,
    /// Set when the run through the wrapper failed and the job was run again locally.
    #[serde(default)]
    pub fallback: Option<Fallback>,
}

/// Why a job ran a second time, locally, and what the wrapped run said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fallback {
    pub reason: String,
    pub stderr: String,
}

impl Status {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// "exit status 1", "killed by signal 9", "could not start: ...".
    pub fn describe(&self) -> String {
        match (&self.spawn_error, self.code, self.signal) {
            (Some(e), _, _) => format!("could not start: {e}"),
            (None, Some(code), _) => format!("exit status {code}"),
            (None, None, Some(sig)) => format!("killed by signal {sig}"),
            (None, None, None) => "ended without a status".to_string(),
        }
    }

    /// The code the launcher exits with, as a shell would report it.
    fn exit_code(&self) -> i32 {
        match (&self.spawn_error, self.code, self.signal) {
            (Some(_), _, _) => 127,
            (None, Some(code), _) => code,
            (None, None, Some(sig)) => 128 + sig,
            (None, None, None) => 1,
        }
    }
}

/// Every launcher holds a shared lock on this file while it lives, so the run can wait for the
/// last one to finish before it removes the directory.
pub fn launchers_lock(state_dir: &Utf8Path) -> Utf8PathBuf {
    state_dir.join("launchers.lock")
}

pub fn jobs_dir(state_dir: &Utf8Path) -> Utf8PathBuf {
    state_dir.join("jobs")
}

pub fn stderr_path(state_dir: &Utf8Path, index: usize) -> Utf8PathBuf {
    jobs_dir(state_dir).join(format!("{index}.stderr"))
}

pub fn status_path(state_dir: &Utf8Path, index: usize) -> Utf8PathBuf {
    jobs_dir(state_dir).join(format!("{index}.status"))
}

/// Seconds since the Unix epoch.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// Environment variable with which a run turns the local fallback off for its launchers (read
/// by clap, as `JobArgs::no_fallback`).
pub const NO_FALLBACK_ENV: &str = "DTLTO_BRIDGE_NO_FALLBACK";

/// Takes a slot, runs the command with its stderr saved, and — when a wrapper ran it and it
/// failed or left an output missing or empty — runs the job once more locally, without the
/// wrapper. Writes the status, gives the slot back, and returns the exit code. A cancelling
/// signal goes on to the command.
pub fn run(args: &crate::cli::JobArgs) -> anyhow::Result<i32> {
    use anyhow::Context;
    let (state_dir, index, command) = (args.state_dir.as_path(), args.index, &args.command);
    let watch = crate::cancel::Watch::start().context("watch signals")?;
    let alive = File::open(launchers_lock(state_dir)).context("open the launchers' lock")?;
    alive.lock_shared().context("lock the launchers' lock")?;
    let held = crate::slots::acquire(&|| watch.received().is_some()).context("take a job slot")?;
    let Some(held) = held else {
        // Cancelled while waiting: the job never started.
        return Ok(crate::cancel::exit_code(
            watch.received().unwrap_or(libc::SIGTERM),
        ));
    };
    let local = &command[command.len().saturating_sub(args.local)..];
    let wrapped = command.len() > local.len();
    let fallback_allowed = wrapped && !args.no_fallback;

    let stderr_file = stderr_path(state_dir, index);
    let mut status = attempt(command, &stderr_file, &watch)?;
    status.wrapped = wrapped;
    if fallback_allowed && watch.received().is_none() {
        if let Some(reason) = problem(&status, &args.outputs) {
            for out in &args.outputs {
                let _ = fs::remove_file(out);
            }
            let stderr = fs::read_to_string(&stderr_file).unwrap_or_default();
            let start = status.start;
            status = attempt(local, &stderr_file, &watch)?;
            status.start = start;
            status.wrapped = true;
            status.fallback = Some(Fallback { reason, stderr });
        }
    }
    drop(held);

    let path = status_path(state_dir, index);
    let partial = path.with_extension("status.partial");
    fs::write(&partial, serde_json::to_vec(&status)?)
        .with_context(|| format!("write {partial}"))?;
    fs::rename(&partial, &path).with_context(|| format!("rename {partial} to {path}"))?;
    if let Some(e) = &status.spawn_error {
        eprintln!("dtlto-bridge: error: run job {index}: {e}");
    }
    Ok(status.exit_code())
}

/// Runs one command to its end, its stderr into `stderr_file`.
fn attempt(
    command: &[String],
    stderr_file: &Utf8Path,
    watch: &crate::cancel::Watch,
) -> anyhow::Result<Status> {
    use anyhow::Context;
    let stderr = File::create(stderr_file).with_context(|| format!("create {stderr_file}"))?;
    let start = now();
    let result = Command::new(&command[0])
        .args(&command[1..])
        .stderr(stderr)
        .spawn()
        .and_then(|mut child| {
            watch.forward_to(child.id() as i32);
            child.wait()
        });
    let end = now();
    Ok(match result {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            Status {
                code: s.code(),
                signal: s.signal(),
                spawn_error: None,
                start,
                end,
                wrapped: false,
                fallback: None,
            }
        }
        Err(e) => Status {
            code: None,
            signal: None,
            spawn_error: Some(format!("{}: {e}", command[0])),
            start,
            end,
            wrapped: false,
            fallback: None,
        },
    })
}

/// What is wrong with a finished run: a failure, or an output missing, empty or cut short.
fn problem(status: &Status, outputs: &[String]) -> Option<String> {
    if !status.success() {
        return Some(status.describe());
    }
    outputs.iter().find_map(|out| {
        crate::verify::output_problem(std::path::Path::new(out)).map(|p| p.describe(out))
    })
}

/// Reads the status job N left, if it ran to the end.
pub fn read_status(state_dir: &Utf8Path, index: usize) -> Option<Status> {
    let text = fs::read(status_path(state_dir, index)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Reads what job N wrote to stderr; empty when it wrote nothing or never ran.
pub fn read_stderr(state_dir: &Utf8Path, index: usize) -> String {
    fs::read(stderr_path(state_dir, index))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}
