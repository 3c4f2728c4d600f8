//! Cancel: catches SIGINT, SIGTERM and SIGHUP and passes them on to a child process (group).
//!
//! It knows signals and process ids; it does not know what the child is or what to clean up:
//! its caller asks `received()` once the child is gone and tidies up itself.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

/// Watches for the cancelling signals for as long as it lives.
pub struct Watch {
    received: Arc<AtomicI32>,
    /// Whom to pass a signal on to: a pid, or a negative process-group id; 0 for nobody yet.
    target: Arc<AtomicI32>,
}

impl Watch {
    pub fn start() -> std::io::Result<Watch> {
        let received = Arc::new(AtomicI32::new(0));
        let target = Arc::new(AtomicI32::new(0));
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let (r, t) = (received.clone(), target.clone());
        std::thread::spawn(move || {
            for sig in signals.forever() {
                r.store(sig, Ordering::SeqCst);
                forward(t.load(Ordering::SeqCst), sig);
            }
        });
        Ok(Watch { received, target })
    }

    /// From now on, signals go to `target` too (a pid, or `-pgid` for a whole group). A signal
    /// that came before is passed on at once.
    pub fn forward_to(&self, target: i32) {
        self.target.store(target, Ordering::SeqCst);
        let sig = self.received.load(Ordering::SeqCst);
        if sig != 0 {
            forward(target, sig);
        }
    }

    /// The signal that arrived, if any.
    pub fn received(&self) -> Option<i32> {
        match self.received.load(Ordering::SeqCst) {
            0 => None,
            sig => Some(sig),
        }
    }
}

fn forward(target: i32, sig: i32) {
    if target != 0 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(target, sig);
        }
    }
}

/// The exit code a shell reports for a process ended by `sig`.
pub fn exit_code(sig: i32) -> i32 {
    128 + sig
}
