//! Progress: a one-line `[done/total] running N, ETA` display on a terminal while jobs run.
//!
//! It knows how to redraw one line from the counts the scheduler gives; it does not know what
//! the jobs are. It stays silent when stderr is not a terminal (lld captures it into logs).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The line shown for `done` of `total` jobs, `running` of them under way, after `elapsed`.
pub fn line(done: usize, total: usize, running: usize, elapsed: Duration) -> String {
    let eta = if done == 0 {
        "ETA --".to_string()
    } else {
        let left = elapsed.as_secs_f64() / done as f64 * (total - done.min(total)) as f64;
        format!("ETA {left:.0}s")
    };
    format!("dtlto-bridge: [{done}/{total}] running {running}, {eta}")
}

impl Progress {
    /// Starts redrawing the line from `counts` (running, done), or does nothing unless `show`.
    pub fn start(
        total: usize,
        show: bool,
        counts: impl Fn() -> (usize, usize) + Send + 'static,
    ) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        if !show {
            return Progress { stop, thread: None };
        }
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let began = Instant::now();
            while !flag.load(Ordering::SeqCst) {
                let (running, done) = counts();
                let text = line(done, total, running, began.elapsed());
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[2K{text}");
                let _ = err.flush();
                drop(err);
                std::thread::sleep(Duration::from_millis(200));
            }
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        });
        Progress {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops and clears the line.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_estimates_from_the_average_so_far() {
        assert_eq!(
            line(0, 10, 2, Duration::from_secs(1)),
            "dtlto-bridge: [0/10] running 2, ETA --"
        );
        assert_eq!(
            line(5, 10, 2, Duration::from_secs(10)),
            "dtlto-bridge: [5/10] running 2, ETA 10s"
        );
        assert_eq!(
            line(10, 10, 0, Duration::from_secs(3)),
            "dtlto-bridge: [10/10] running 0, ETA 0s"
        );
    }
}
