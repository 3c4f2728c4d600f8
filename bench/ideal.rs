//! The ideal executor: the physical limit dtlto-bridge is measured against in bench/run.sh.
//!
//! Used as a DTLTO distributor, it reads the job file and runs its jobs with N worker threads
//! (argument `-jN`, default: the available parallelism), in file order, and nothing else: no build
//! file, no build tool, no launcher, no verification. It fails when a job fails.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

fn main() {
    let mut jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let mut path = None;
    for arg in std::env::args().skip(1) {
        match arg.strip_prefix("-j") {
            Some(n) => jobs = n.parse().expect("-jN takes a number"),
            None => path = Some(arg),
        }
    }
    let path = path.expect("usage: ideal [-jN] JOBS.json");
    let text = std::fs::read_to_string(&path).expect("read the job file");
    let file = dtlto_bridge::job::parse(&text).expect("parse the job file");
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = file.jobs.get(i) else { break };
                let mut words = job.command.words().map(|w| w.as_ref());
                let program = words.next().expect("a command");
                let ok = Command::new(program)
                    .args(words)
                    .status()
                    .is_ok_and(|s| s.success());
                if !ok {
                    failed.store(true, Ordering::SeqCst);
                }
            });
        }
    });
    std::process::exit(if failed.load(Ordering::SeqCst) { 1 } else { 0 });
}
