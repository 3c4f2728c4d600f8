//! Guard: the one helper process of a `--backend direct` run, which does what the per-job
//! launchers do for ninja and make should the run be killed (even by SIGKILL): it kills the
//! commands that were running (each a process group) and waits for them to die, removes their
//! outputs and clang's temporaries, gives back the jobserver tokens they ran on, and exits.
//!
//! The run tells it over a pipe (its standard input) each command it starts and each that
//! ended; the pipe's end without a goodbye is the run's death. It knows those messages,
//! processes and files; it does not know jobs, slots or the scheduler.

use rustix::process::PidfdFlags;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the guard waits for the commands to die once the run is gone; they get SIGKILL, so
/// this is only ever the time the kernel takes.
const DYING: Duration = Duration::from_secs(5);

/// From the run to its guard, one JSON object per line.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Message {
    /// Job `index`'s command runs as `pid`, writing `outputs`, on a jobserver token or not.
    Started {
        index: usize,
        pid: i32,
        token: bool,
        outputs: Vec<String>,
    },
    /// It ended; with `keep`, its outputs are the run's to keep (or remove) from now on.
    Ended { index: usize, keep: bool },
    /// The run ends well: nothing to do.
    Bye,
}

/// The run's side of its guard.
pub struct Guard {
    pipe: Mutex<Option<ChildStdin>>,
    child: Mutex<Option<Child>>,
    /// Why the guard could not be told something, the first time.
    lost: Mutex<Option<String>>,
}

impl Guard {
    /// Starts `exe __guard DIR` for the run whose private directory is `dir`, in a process
    /// group of its own (a Ctrl-C at the terminal is the run's to handle), with the jobserver's
    /// descriptors when jobs run on its tokens.
    pub fn start(exe: &str, dir: &str, jobserver: Option<&jobserver::Client>) -> io::Result<Guard> {
        // The guard tells a job's process apart from a later one of the same pid by a pidfd.
        rustix::process::pidfd_open(rustix::process::getpid(), PidfdFlags::empty()).map_err(
            |e| {
                io::Error::other(format!(
                    "this system refuses pidfd_open (Linux 5.3 or later), which it needs: {e}"
                ))
            },
        )?;
        let mut cmd = Command::new(exe);
        cmd.args(["__guard", dir])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0);
        if let Some(client) = jobserver {
            client.configure(&mut cmd);
        }
        let mut child = cmd.spawn()?;
        Ok(Guard {
            pipe: Mutex::new(child.stdin.take()),
            child: Mutex::new(Some(child)),
            lost: Mutex::new(None),
        })
    }

    fn send(&self, message: &Message) {
        let mut line = serde_json::to_vec(message).unwrap_or_default();
        line.push(b'\n');
        if let Some(pipe) = crate::job::util::sync::lock(&self.pipe).as_mut() {
            // A guard that is gone cannot help; the run goes on without it, and says so.
            if let Err(e) = pipe.write_all(&line) {
                crate::job::util::sync::lock(&self.lost).get_or_insert_with(|| e.to_string());
            }
        }
    }

    pub fn started(&self, index: usize, pid: u32, token: bool, outputs: &[String]) {
        self.send(&Message::Started {
            index,
            pid: pid as i32,
            token,
            outputs: outputs.to_vec(),
        });
    }

    pub fn ended(&self, index: usize, keep: bool) {
        self.send(&Message::Ended { index, keep });
    }

    /// The run ends: says goodbye and waits for the guard to exit. Returns why the guard could
    /// not be told something during the run, if it could not.
    pub fn finish(&self) -> Option<String> {
        self.send(&Message::Bye);
        crate::job::util::sync::lock(&self.pipe).take();
        if let Some(mut child) = crate::job::util::sync::lock(&self.child).take() {
            let _ = child.wait();
        }
        crate::job::util::sync::lock(&self.lost).take()
    }
}

/// A running command, as the guard knows it.
struct Running {
    pid: i32,
    /// Becomes readable when the process has exited; None once it is known to be gone.
    pidfd: Option<OwnedFd>,
    /// Its process could not be told apart (no pidfd, for another reason than its being gone):
    /// it is left alone, its outputs and token too.
    unknown: bool,
    token: bool,
    outputs: Vec<String>,
}

/// The guard process: returns its exit code (0 after a goodbye, 1 after the run's death).
pub fn main() -> i32 {
    // Signals are the run's business: the guard ends with the pipe.
    for sig in crate::local::process::CANCELLING {
        // SAFETY: ignoring a signal has no preconditions.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    let mut running: HashMap<usize, Running> = HashMap::new();
    let stdin = io::stdin().lock();
    for line in stdin.lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<Message>(&line) {
            Ok(Message::Started {
                index,
                pid,
                token,
                outputs,
            }) => {
                let opened = rustix::process::Pid::from_raw(pid)
                    .map(|p| rustix::process::pidfd_open(p, PidfdFlags::empty()));
                let (pidfd, unknown) = match opened {
                    Some(Ok(fd)) => (Some(fd), false),
                    Some(Err(e)) if e == rustix::io::Errno::SRCH => (None, false),
                    _ => (None, true),
                };
                running.insert(
                    index,
                    Running {
                        pid,
                        pidfd,
                        unknown,
                        token,
                        outputs,
                    },
                );
            }
            Ok(Message::Ended { index, keep }) => {
                if keep {
                    running.remove(&index);
                } else if let Some(r) = running.get_mut(&index) {
                    r.pidfd = None;
                    r.unknown = false;
                    r.token = false;
                }
            }
            Ok(Message::Bye) => return 0,
            Err(_) => break,
        }
    }
    clean_up(running.into_values().collect());
    1
}

/// The run is gone: kills its commands and waits for them to die, removes what they may have
/// written, and gives back their tokens.
fn clean_up(running: Vec<Running>) {
    for r in &running {
        // A process group is killed only while its leader lives (its pidfd is not readable):
        // until then its id cannot name another group.
        if let Some(fd) = r.pidfd.as_ref().filter(|fd| !readable(fd, 0)) {
            let _ = rustix::process::pidfd_send_signal(fd, rustix::process::Signal::KILL);
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(-r.pid, libc::SIGKILL) };
        }
    }
    let until = Instant::now() + DYING;
    for r in &running {
        if let Some(fd) = &r.pidfd {
            while !readable(
                fd,
                until.saturating_duration_since(Instant::now()).as_millis(),
            ) {
                if Instant::now() >= until {
                    break;
                }
            }
        }
    }
    let cwd = std::path::Path::new(".");
    let mut tokens = 0;
    for r in running.iter().filter(|r| !r.unknown) {
        crate::job::files::remove(cwd, &r.outputs);
        tokens += usize::from(r.token);
    }
    if tokens > 0 {
        // SAFETY: the descriptors in the environment were inherited for this purpose.
        if let Ok(client) = unsafe { jobserver::Client::from_env_ext(true) }.client {
            for _ in 0..tokens {
                let _ = client.release_raw();
            }
        }
    }
}

/// Whether `fd` (a pidfd) is readable — its process has exited — within `ms` milliseconds.
fn readable(fd: &OwnedFd, ms: u128) -> bool {
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut poll, 1, ms.min(i32::MAX as u128) as i32) };
    rc > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line_each_and_round_trip() {
        for m in [
            Message::Started {
                index: 3,
                pid: 42,
                token: true,
                outputs: vec!["a\nb.o".into()],
            },
            Message::Ended {
                index: 3,
                keep: false,
            },
            Message::Bye,
        ] {
            let line = serde_json::to_string(&m).unwrap();
            assert!(!line.contains('\n'), "{line}");
            assert_eq!(serde_json::from_str::<Message>(&line).unwrap(), m);
        }
    }
}
