//! Direct: starts a link's commands from the run itself (`--backend direct`): no build file, no
//! build tool, no launcher process per job.
//!
//! A command is reserved when the run decides it (under the run's lock) and starts on the
//! deciding thread once that lock is released, so two threads start commands at once and none
//! waits for another's start (a start lasts until the command has executed its program): the
//! thread that saw a command end starts the next, with no other thread to wake. A cancel that
//! comes between the reservation and the start is sent as soon as the command has started. It
//! starts without copying the run's memory (a vfork: the guard, which hears of each start,
//! stops the commands should the run die); threads kept for reuse wait for them. It knows
//! processes and files; it does not decide what runs (`sched::Core`) or check outputs.

use crate::job::outcome::{now, Status};
use crate::local::guard::Guard;
use crate::local::process::{self, Watch};
use crate::local::proto;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

/// Called on a waiting thread with each command's end.
pub type Exited = Arc<dyn Fn(usize, Status) + Send + Sync>;

/// The commands of a run, until `stop`.
pub struct Direct {
    watch: Watch,
    guard: Arc<Guard>,
    exited: Exited,
    /// None once stopped: nothing starts any more.
    running: Mutex<Option<Running>>,
}

struct Running {
    /// Each job's process group, from its start to the job's next reservation (a job runs again
    /// after its wrapped attempt failed); signals reach it while the watch knows it.
    targets: HashMap<usize, i32>,
    /// Jobs reserved and not started yet, with the signal of a cancel that came meanwhile.
    reserved: HashMap<usize, Option<i32>>,
    waiters: Waiters,
}

impl Direct {
    pub fn new(watch: Watch, guard: Arc<Guard>, exited: Exited) -> Direct {
        Direct {
            watch,
            guard,
            exited,
            running: Mutex::new(Some(Running {
                targets: HashMap::new(),
                reserved: HashMap::new(),
                waiters: Waiters::new(),
            })),
        }
    }

    /// Reserves job `index`'s start, which `start` then makes; called under the run's lock,
    /// where the run decided it. The status of a start refused (the run is stopping) is
    /// returned instead, for the caller to take as the command's end.
    pub fn reserve(&self, index: usize) -> Result<(), Status> {
        let mut running = crate::job::util::sync::lock(&self.running);
        let Some(running) = running.as_mut() else {
            return Err(stopping(now()));
        };
        // A cancel from now on is for this attempt, not for an earlier one that ended.
        running.targets.remove(&index);
        running.reserved.insert(index, None);
        Ok(())
    }

    /// Starts reserved job `index`'s command on this thread, with the run's lock released (its
    /// stderr goes to `run.stderr` when it wrote any, its stdout nowhere, as under ninja and
    /// make, where only the tool's log gets it); its end comes to `exited` from a waiting
    /// thread. The status of a command that could not start (or be waited for) is returned
    /// instead, for the caller to take as its end.
    pub fn start(&self, index: usize, run: &proto::Run) -> Result<(), Status> {
        let started = now();
        let name = process::program(&run.argv);
        let spawned =
            (self.spawn(run)).map_err(|e| process::not_started(format!("{name}: {e}"), started));
        if let Ok((child, _)) = &spawned {
            // Before the lock: another thread's start may be waiting for it.
            self.guard
                .started(index, child.id(), run.token, &run.outputs);
        }
        let mut running = crate::job::util::sync::lock(&self.running);
        let cancelled = running.as_mut().and_then(|r| r.reserved.remove(&index));
        let (child, capture) = spawned?;
        let target = child.target();
        let Some(running) = running.as_mut() else {
            // Stopped while it started: it is killed and waited for here.
            drop(running);
            kill_group(target);
            let _ = child.wait(&self.watch);
            return Err(stopping(started));
        };
        let (watch, waited, path) = (self.watch.clone(), name.to_string(), run.stderr.clone());
        let tell = self.exited.clone();
        let waiting = running.waiters.run(Box::new(move || {
            let status = process::ended(child.wait(&watch), &waited, started);
            keep(capture, &path);
            tell(index, status);
        }));
        if let Err(e) = waiting {
            // Without a thread to wait for it, the command cannot be followed: it is killed (and
            // left unreaped, so its pid cannot be reused while the run lives), and the job fails.
            kill_group(target);
            return Err(process::not_started(
                format!("wait for {name}: {e}"),
                started,
            ));
        }
        running.targets.insert(index, target);
        if let Some(Some(signal)) = cancelled {
            self.watch.signal_child(target, signal);
        }
        Ok(())
    }

    /// Sends `signal` to job `index`'s command, if it still runs.
    pub fn cancel(&self, index: usize, signal: i32) {
        let mut running = crate::job::util::sync::lock(&self.running);
        let Some(running) = running.as_mut() else {
            return;
        };
        if let Some(&target) = running.targets.get(&index) {
            self.watch.signal_child(target, signal);
        } else if let Some(cancelled) = running.reserved.get_mut(&index) {
            *cancelled = Some(signal);
        }
    }

    /// Starts nothing more; the waiting threads end once no command runs.
    pub fn stop(&self) {
        crate::job::util::sync::lock(&self.running).take();
    }

    /// Starts a command, its stderr captured in memory until it ends: most write nothing, and a
    /// file created per job costs more than the rest of its start on some file systems.
    fn spawn(&self, run: &proto::Run) -> io::Result<(process::Supervised, File)> {
        let capture = rustix::fs::memfd_create("stderr", rustix::fs::MemfdFlags::CLOEXEC)
            .map(File::from)
            .map_err(io::Error::from)
            .and_then(|f| Ok((f.try_clone()?, f)))
            .map_err(|e| io::Error::other(format!("capture its stderr: {e}")));
        let (stderr, capture) = capture?;
        let mut cmd = Command::new(&run.argv[0]);
        cmd.args(&run.argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        process::without_jobserver(&mut cmd);
        let child = process::spawn(
            &mut cmd,
            &self.watch,
            &process::Options {
                group: true,
                // The guard stops it should the run die: a start without a step of its own in
                // the child is a vfork, not a copy of the run's memory.
                parent_death: None,
                forward: false,
            },
        )?;
        Ok((child, capture))
    }
}

type Work = Box<dyn FnOnce() + Send>;

/// Threads that wait for commands, each kept for another once its command ended: as many as
/// commands run at once, not one per command. A thread that saw its command end waits next for
/// the first command started meanwhile (usually by itself), with no other thread to wake.
struct Waiters {
    queue: mpsc::Sender<Work>,
    taken: Arc<Mutex<mpsc::Receiver<Work>>>,
    idle: Arc<AtomicUsize>,
}

thread_local! {
    /// On a waiting thread busy with a command's end: Some, holding the first command handed
    /// to the waiters meanwhile, which this thread takes next.
    static NEXT: std::cell::RefCell<Option<Option<Work>>> = const { std::cell::RefCell::new(None) };
}

impl Waiters {
    fn new() -> Waiters {
        let (queue, taken) = mpsc::channel();
        Waiters {
            queue,
            taken: Arc::new(Mutex::new(taken)),
            idle: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Runs `work` on this thread once its own work is done, when it is a waiting thread that
    /// takes one; else on an idle thread, or on a new one when none is idle. The threads end
    /// with the `Waiters`.
    fn run(&self, work: Work) -> io::Result<()> {
        let work = NEXT.with_borrow_mut(|next| match next {
            Some(slot @ None) => {
                *slot = Some(work);
                None
            }
            _ => Some(work),
        });
        let Some(work) = work else { return Ok(()) };
        let reserved = self
            .idle
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if reserved.is_err() {
            let (taken, idle) = (self.taken.clone(), self.idle.clone());
            std::thread::Builder::new()
                .name("wait".into())
                .spawn(move || loop {
                    let next = crate::job::util::sync::lock(&taken).recv();
                    let Ok(mut work) = next else { return };
                    loop {
                        NEXT.set(Some(None));
                        work();
                        match NEXT.take().flatten() {
                            Some(next) => work = next,
                            None => break,
                        }
                    }
                    idle.fetch_add(1, Ordering::SeqCst);
                })?;
        }
        (self.queue.send(work)).map_err(|_| io::Error::other("the waiting threads are gone"))
    }
}

/// Writes what a command wrote to `path`, when it wrote anything; best effort, as a launcher's
/// stderr file.
fn keep(mut capture: File, path: &str) {
    use std::io::{Seek, SeekFrom};
    if capture.metadata().is_ok_and(|m| m.len() > 0) && capture.seek(SeekFrom::Start(0)).is_ok() {
        if let Ok(mut file) = File::create(path) {
            let _ = io::copy(&mut capture, &mut file);
        }
    }
}

/// The status of a start refused because the run is stopping.
fn stopping(at: f64) -> Status {
    process::not_started("the run is stopping".into(), at)
}

/// Kills a process group that no thread waits for; its members are reaped by whoever adopts
/// them once the run ends.
fn kill_group(target: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(target, libc::SIGKILL) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::time::{Duration, Instant};

    /// A run's `Direct`, with a stand-in guard that reads and drops every message; the ends
    /// come to the returned receiver.
    fn direct(dir: &Path) -> (Direct, mpsc::Receiver<(usize, Status)>) {
        let guard = dir.join("guard");
        std::fs::write(&guard, "#!/bin/sh\nexec cat >/dev/null\n").unwrap();
        std::fs::set_permissions(&guard, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Another test's start may hold the script open for writing a moment longer (a fork
        // between its open and its close): "text file busy" passes.
        let mut tries = 0;
        let guard = loop {
            match Guard::start(guard.to_str().unwrap(), dir.to_str().unwrap(), None) {
                Err(e) if e.kind() == io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                started => break started.unwrap(),
            }
        };
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let exited: Exited = Arc::new(move |index, status| {
            let _ = crate::job::util::sync::lock(&tx).send((index, status));
        });
        let watch = Watch::start().unwrap();
        (Direct::new(watch, Arc::new(guard), exited), rx)
    }

    fn run(dir: &Path, argv: &[&str]) -> proto::Run {
        proto::Run {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            stderr: dir.join("stderr").to_str().unwrap().into(),
            outputs: Vec::new(),
            token: false,
        }
    }

    /// Reserves job 7, cancels it with SIGTERM, then starts a long command for it: the command
    /// must end by that signal.
    fn cancel_then_start(direct: &Direct, ends: &mpsc::Receiver<(usize, Status)>, dir: &Path) {
        direct.reserve(7).unwrap();
        direct.cancel(7, libc::SIGTERM);
        direct.start(7, &run(dir, &["sleep", "30"])).unwrap();
        let (index, status) = ends.recv_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(
            (index, status.signal),
            (7, Some(libc::SIGTERM)),
            "{status:?}"
        );
    }

    #[test]
    fn a_cancel_between_reservation_and_start_reaches_the_command_once_started() {
        let dir = tempfile::tempdir().unwrap();
        let (direct, ends) = direct(dir.path());
        cancel_then_start(&direct, &ends, dir.path());
        direct.stop();
    }

    #[test]
    fn a_cancel_before_a_second_attempt_starts_reaches_that_attempt() {
        let dir = tempfile::tempdir().unwrap();
        let (direct, ends) = direct(dir.path());
        direct.reserve(7).unwrap();
        direct.start(7, &run(dir.path(), &["true"])).unwrap();
        let (_, first) = ends.recv_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(first.code, Some(0), "{first:?}");
        cancel_then_start(&direct, &ends, dir.path());
        direct.stop();
    }

    #[test]
    fn a_start_after_stop_is_refused_and_a_reservation_made_before_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let (direct, ends) = direct(dir.path());
        direct.reserve(1).unwrap();
        direct.stop();
        assert!(direct.reserve(2).is_err());
        let started = Instant::now();
        let refused = direct
            .start(1, &run(dir.path(), &["sleep", "30"]))
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "it waited for the command"
        );
        assert!(
            refused.describe().contains("stopping"),
            "{}",
            refused.describe()
        );
        assert!(
            ends.try_recv().is_err(),
            "a refused start is the caller's to report"
        );
    }
}
