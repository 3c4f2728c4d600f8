//! Process: starts children that die with this process, and passes cancelling signals on to
//! them while (and only while) they exist.
//!
//! It knows SIGINT, SIGTERM, SIGHUP and SIGQUIT, `PR_SET_PDEATHSIG`, process groups, and reaping
//! in an order that never signals a pid or group that was already reaped (and so may be reused).
//! It does not know what the children are or what to clean up after them.

use crate::job::outcome::{now, Status};
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::Signals;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

/// The signals that cancel a run.
pub const CANCELLING: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

/// The exit code a shell reports for a process ended by `sig`.
pub fn exit_code(sig: i32) -> i32 {
    128 + sig
}

/// Called from the signal thread with each cancelling signal, before it is passed on.
type Hook = Box<dyn Fn(i32) + Send>;

#[derive(Default)]
struct Shared {
    received: AtomicI32,
    hook: Mutex<Option<Hook>>,
    /// Set once the process is about to exit: a signal then ends it at once.
    exiting: AtomicBool,
    /// Live children: a pid, or `-pgid` for a whole group, and whether signals are passed on
    /// to it as they arrive.
    targets: Mutex<Vec<(i32, bool)>>,
}

/// Watches for the cancelling signals for as long as the process lives.
#[derive(Clone)]
pub struct Watch {
    shared: Arc<Shared>,
}

impl Watch {
    pub fn start() -> io::Result<Watch> {
        let shared = Arc::new(Shared::default());
        let mut signals = Signals::new(CANCELLING)?;
        let s = shared.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    let _ = s
                        .received
                        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
                    if s.exiting.load(Ordering::SeqCst) {
                        // SAFETY: _exit has no preconditions; nothing is left to clean up.
                        unsafe { libc::_exit(exit_code(sig)) };
                    }
                    if let Some(hook) = &*crate::job::util::sync::lock(&s.hook) {
                        hook(sig);
                    }
                    let targets = crate::job::util::sync::lock(&s.targets);
                    for &(t, forward) in targets.iter() {
                        if forward {
                            send(t, sig);
                        }
                    }
                }
            })?;
        Ok(Watch { shared })
    }

    /// Calls `hook` with every cancelling signal from now on, before it is passed on to the
    /// children (at once if one came already).
    pub fn on_signal(&self, hook: impl Fn(i32) + Send + 'static) {
        if let Some(sig) = self.received() {
            hook(sig);
        }
        *crate::job::util::sync::lock(&self.shared.hook) = Some(Box::new(hook));
    }

    /// The first cancelling signal that arrived, if any.
    pub fn received(&self) -> Option<i32> {
        match self.shared.received.load(Ordering::SeqCst) {
            0 => None,
            sig => Some(sig),
        }
    }

    /// Called last, just before the process exits: returns the signal that arrived, if any;
    /// one that arrives from now on ends the process at once with 128 + its number.
    pub fn finish(&self) -> Option<i32> {
        self.shared.exiting.store(true, Ordering::SeqCst);
        self.received()
    }

    fn targets(&self) -> std::sync::MutexGuard<'_, Vec<(i32, bool)>> {
        crate::job::util::sync::lock(&self.shared.targets)
    }

    /// Knows `target` (a pid, or `-pgid`) as a live child until `forget`; with `forward`,
    /// passes signals on to it, a signal that came before at once.
    fn register(&self, target: i32, forward: bool) {
        self.targets().push((target, forward));
        if let (Some(sig), true) = (self.received(), forward) {
            send(target, sig);
        }
    }

    /// Sends `sig` to `target` (a pid, or `-pgid`) if it is a child not reaped yet.
    pub fn signal_child(&self, target: i32, sig: i32) {
        let targets = self.targets();
        if targets.iter().any(|&(t, _)| t == target) {
            send(target, sig);
        }
    }

    fn forget(&self, target: i32) {
        self.targets().retain(|&(t, _)| t != target);
    }

    /// Sends `sig` to every child not reaped yet (each is known until then).
    pub fn signal_all(&self, sig: i32) {
        for &(t, _) in self.targets().iter() {
            send(t, sig);
        }
    }
}

fn send(target: i32, sig: i32) {
    if target != 0 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(target, sig);
        }
    }
}

/// A child started by `spawn`: signals reach it (or its group) until it is reaped by `wait`.
pub struct Supervised {
    child: Child,
    target: i32,
}

/// How a child is started.
pub struct Options {
    /// In a process group of its own, so that a signal reaches everything it starts.
    pub group: bool,
    /// The signal the child gets when the thread that started it ends (this process dies).
    /// Setting it costs a copy of this process's page tables (a fork, not a vfork).
    pub parent_death: Option<i32>,
    /// Whether the cancelling signals this process gets are passed on to the child.
    pub forward: bool,
}

/// Starts `cmd` so that it gets `opts.parent_death`, if any, when this thread ends, however it
/// ends (`kill -9` included), and receives the cancelling signals `watch` sees while it lives.
pub fn spawn(cmd: &mut Command, watch: &Watch, opts: &Options) -> io::Result<Supervised> {
    let parent = std::process::id() as libc::pid_t;
    if opts.group {
        cmd.process_group(0);
    }
    if let Some(death) = opts.parent_death {
        // SAFETY: prctl and getppid are async-signal-safe; nothing is allocated.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, death as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died before the request took effect.
                if libc::getppid() != parent {
                    return Err(io::Error::other("the parent exited"));
                }
                Ok(())
            });
        }
    }
    // A signal that arrives between spawn and register is passed on by `register`.
    let child = cmd.spawn()?;
    let pid = child.id() as i32;
    let target = if opts.group { -pid } else { pid };
    watch.register(target, opts.forward);
    Ok(Supervised { child, target })
}

impl Supervised {
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its pid, or `-pgid` when it leads a process group of its own.
    pub fn target(&self) -> i32 {
        self.target
    }

    /// Waits for the child to exit, stops passing signals on to it, and only then reaps it, so
    /// that its pid (and group) cannot have been reused by the time a signal is sent.
    pub fn wait(mut self, watch: &Watch) -> io::Result<ExitStatus> {
        let pid = self.child.id() as libc::id_t;
        loop {
            // SAFETY: a zeroed siginfo_t is a valid buffer for waitid.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: info is a valid siginfo_t; WNOWAIT leaves the child waitable.
            let rc =
                unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
            if rc == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                watch.forget(self.target);
                return Err(e);
            }
        }
        watch.forget(self.target);
        self.child.wait()
    }
}

/// Environment variables a job must not see: they describe jobservers the job takes no part in.
const JOBSERVER_VARS: [&str; 3] = ["MAKEFLAGS", "MFLAGS", "CARGO_MAKEFLAGS"];

/// Keeps `JOBSERVER_VARS` from `cmd`, removing only those set here: removing any copies the
/// whole environment for the command.
pub fn without_jobserver(cmd: &mut Command) -> &mut Command {
    for var in JOBSERVER_VARS
        .iter()
        .filter(|v| std::env::var_os(v).is_some())
    {
        cmd.env_remove(var);
    }
    cmd
}

/// A command's program, as failures name it.
pub fn program(argv: &[String]) -> &str {
    argv.first().map_or("the command", String::as_str)
}

/// How a command `name` started at `start` ended, from waiting for it.
pub fn ended(waited: io::Result<ExitStatus>, name: &str, start: f64) -> Status {
    match waited {
        Ok(s) => Status {
            code: s.code(),
            signal: s.signal(),
            spawn_error: None,
            start,
            end: now(),
        },
        Err(e) => not_started(format!("wait for {name}: {e}"), start),
    }
}

/// A command that could not be started, or followed once started: `why`.
pub fn not_started(why: String, start: f64) -> Status {
    Status {
        code: None,
        signal: None,
        spawn_error: Some(why),
        start,
        end: now(),
    }
}

/// "exit status 1", "killed by signal 9".
pub fn describe(status: &ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => status.to_string(),
    }
}

/// This program's own path, for the commands it writes that run it again.
pub fn own_exe() -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("find own executable: {e}"))?;
    exe.to_str()
        .map(str::to_string)
        .ok_or_else(|| "find own executable: its path is not UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_reaped_and_then_never_signalled() {
        let watch = Watch::start().unwrap();
        let child = spawn(
            Command::new("true").stdin(std::process::Stdio::null()),
            &watch,
            &Options {
                group: true,
                parent_death: Some(libc::SIGKILL),
                forward: true,
            },
        )
        .unwrap();
        let target = (child.target, true);
        assert!(watch.shared.targets.lock().unwrap().contains(&target));
        assert!(child.wait(&watch).unwrap().success());
        assert!(!watch.shared.targets.lock().unwrap().contains(&target));
    }
}
