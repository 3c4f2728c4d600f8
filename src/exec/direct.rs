//! Direct: starts a link's commands from the run itself (`--backend direct`): no build file, no
//! build tool, no launcher process per job.
//!
//! One thread starts every command, in the order the scheduler decided (a cancel never overtakes
//! its start), without copying the run's memory (a vfork: the guard, which hears of each start,
//! stops the commands should the run die); threads kept for reuse wait for them. It knows
//! processes and files; it does not decide what runs (`sched::Core`) or check outputs.

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
use std::thread::JoinHandle;

/// What the run asks of the starter, in the order it decided.
pub enum Order {
    /// Run job `index`'s command; its stderr goes to `run.stderr` when it wrote any, its stdout
    /// nowhere (as under ninja and make, where only the tool's log gets it).
    Start { index: usize, run: proto::Run },
    /// Send `signal` to job `index`'s command, if it still runs.
    Cancel { index: usize, signal: i32 },
}

/// Called on a waiting thread with each command's end (a failure to start too).
pub type Exited = Arc<dyn Fn(usize, Status) + Send + Sync>;

/// The starter thread, until `stop`.
pub struct Direct {
    orders: Mutex<Option<mpsc::Sender<Order>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Direct {
    pub fn start(watch: Watch, guard: Arc<Guard>, exited: Exited) -> io::Result<Direct> {
        let (tx, rx) = mpsc::channel::<Order>();
        let thread = std::thread::Builder::new()
            .name("start".into())
            .spawn(move || {
                // Each job's process group, while the watch knows it.
                let mut targets: HashMap<usize, i32> = HashMap::new();
                let waiters = Waiters::new();
                for order in rx {
                    match order {
                        Order::Start { index, run } => {
                            let started = start(index, &run, &watch, &guard, &exited, &waiters);
                            if let Some(target) = started {
                                targets.insert(index, target);
                            }
                        }
                        Order::Cancel { index, signal } => {
                            if let Some(&target) = targets.get(&index) {
                                watch.signal_child(target, signal);
                            }
                        }
                    }
                }
            })?;
        Ok(Direct {
            orders: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    pub fn order(&self, order: Order) {
        if let Some(tx) = &*crate::fsutil::lock(&self.orders) {
            let _ = tx.send(order);
        }
    }

    /// Ends the starter thread, once no command runs.
    pub fn stop(&self) {
        crate::fsutil::lock(&self.orders).take();
        if let Some(t) = crate::fsutil::lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

/// Starts job `index`'s command and a thread that waits for it; returns its process group.
fn start(
    index: usize,
    run: &proto::Run,
    watch: &Watch,
    guard: &Arc<Guard>,
    exited: &Exited,
    waiters: &Waiters,
) -> Option<i32> {
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
        for var in process::JOBSERVER_VARS {
            cmd.env_remove(var);
        }
        let child = process::spawn(
            &mut cmd,
            watch,
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
    let (child, capture) = match spawned {
        Ok(started) => started,
        Err(e) => {
            exited(index, process::not_started(format!("{name}: {e}"), started));
            return None;
        }
    };
    let target = child.target();
    guard.started(index, child.id(), run.token, &run.outputs);
    let (watch, waited, path) = (watch.clone(), name.to_string(), run.stderr.clone());
    let tell = exited.clone();
    let waiting = waiters.run(Box::new(move || {
        let status = process::ended(child.wait(&watch), &waited, started);
        keep(capture, &path);
        tell(index, status);
    }));
    if let Err(e) = waiting {
        // Without a thread to wait for it, the command cannot be followed: it is killed (and
        // left unreaped, so its pid cannot be reused while the run lives), and the job fails.
        kill_group(target);
        exited(
            index,
            process::not_started(format!("wait for {name}: {e}"), started),
        );
    }
    Some(target)
}

type Work = Box<dyn FnOnce() + Send>;

/// Threads that wait for commands, each kept for another once its command ended: as many as
/// commands run at once, not one per command.
struct Waiters {
    queue: mpsc::Sender<Work>,
    taken: Arc<Mutex<mpsc::Receiver<Work>>>,
    idle: Arc<AtomicUsize>,
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

    /// Runs `work` on an idle thread, or on a new one when none is idle. The threads end with
    /// the `Waiters`.
    fn run(&self, work: Work) -> io::Result<()> {
        let reserved = self
            .idle
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if reserved.is_err() {
            let (taken, idle) = (self.taken.clone(), self.idle.clone());
            std::thread::Builder::new()
                .name("wait".into())
                .spawn(move || loop {
                    let next = crate::fsutil::lock(&taken).recv();
                    let Ok(work) = next else { return };
                    work();
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
