//! Direct: starts a link's commands from the run itself (`--backend direct`): no build file, no
//! build tool, no launcher process per job.
//!
//! A command starts on the thread that decided it, at once and in decision order (the run
//! holds its lock while it starts one, so a cancel never overtakes its start): the thread that
//! saw a command end starts the next, with no other thread to wake. It starts without copying
//! the run's memory (a vfork: the guard, which hears of each start, stops the commands should
//! the run die); threads kept for reuse wait for them. It knows processes and files; it does
//! not decide what runs (`sched::Core`) or check outputs.

use crate::exec::guard::Guard;
use crate::exec::process::{self, Watch};
use crate::exec::proto;
use crate::job::outcome::{now, Status};
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
    /// Each job's process group, while the watch knows it.
    targets: HashMap<usize, i32>,
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
                waiters: Waiters::new(),
            })),
        }
    }

    /// Starts job `index`'s command on this thread (its stderr goes to `run.stderr` when it
    /// wrote any, its stdout nowhere, as under ninja and make, where only the tool's log gets
    /// it); its end comes to `exited` from a waiting thread. The status of a command that could
    /// not start (or be waited for) is returned instead, for the caller to take as its end:
    /// the caller holds the run's lock, which `exited` takes.
    pub fn start(&self, index: usize, run: &proto::Run) -> Result<(), Status> {
        let mut running = crate::fsutil::lock(&self.running);
        let Some(running) = running.as_mut() else {
            return Err(process::not_started("the run is stopping".into(), now()));
        };
        let target = self.launch(index, run, &running.waiters)?;
        running.targets.insert(index, target);
        Ok(())
    }

    /// Sends `signal` to job `index`'s command, if it still runs.
    pub fn cancel(&self, index: usize, signal: i32) {
        let running = crate::fsutil::lock(&self.running);
        if let Some(&target) = running.as_ref().and_then(|r| r.targets.get(&index)) {
            self.watch.signal_child(target, signal);
        }
    }

    /// Starts nothing more; the waiting threads end once no command runs.
    pub fn stop(&self) {
        crate::fsutil::lock(&self.running).take();
    }

    /// Starts job `index`'s command and hands it to a waiting thread; returns its process group,
    /// or the status of a command that could not start or be waited for.
    fn launch(&self, index: usize, run: &proto::Run, waiters: &Waiters) -> Result<i32, Status> {
        let started = now();
        let name = process::program(&run.argv);
        // In memory until the command ends: most write nothing, and a file created per job costs
        // more than the rest of its start on some file systems.
        let capture = rustix::fs::memfd_create("stderr", rustix::fs::MemfdFlags::CLOEXEC)
            .map(File::from)
            .map_err(io::Error::from)
            .and_then(|f| Ok((f.try_clone()?, f)))
            .map_err(|e| io::Error::other(format!("capture its stderr: {e}")));
        let spawned = capture.and_then(|(stderr, capture)| {
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
                    // The guard stops it should the run die: a start without a step of its own
                    // in the child is a vfork, not a copy of the run's memory.
                    parent_death: None,
                    forward: false,
                },
            )?;
            Ok((child, capture))
        });
        let (child, capture) =
            spawned.map_err(|e| process::not_started(format!("{name}: {e}"), started))?;
        let target = child.target();
        self.guard
            .started(index, child.id(), run.token, &run.outputs);
        let (watch, waited, path) = (self.watch.clone(), name.to_string(), run.stderr.clone());
        let tell = self.exited.clone();
        let waiting = waiters.run(Box::new(move || {
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
        Ok(target)
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
                    let next = crate::fsutil::lock(&taken).recv();
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

/// Kills a process group that no thread waits for; its members are reaped by whoever adopts
/// them once the run ends.
fn kill_group(target: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(target, libc::SIGKILL) };
}
