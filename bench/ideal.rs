//! The ideal executor: the physical limit dtlto-bridge is measured against in bench/run.sh.
//!
//! Used as a DTLTO distributor, it reads the job file and runs its jobs with N worker threads
//! (argument `-jN`, default: the available parallelism), in file order, and nothing else: no build
//! file, no build tool, no launcher, no verification. It fails when a job fails.
//!
//! With `--store DIR` it is the floor of a cached relink (bench/many.sh): a job's object is
//! hard-linked from `DIR`, named after the job's first input (its module), when it is there,
//! and kept there once it ran. Keyed by a name only, nothing hashed or checked: right only when
//! nothing changes between links, which is all a floor needs.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

fn main() {
    let mut jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let mut path = None;
    let mut store = None;
    for arg in std::env::args().skip(1) {
        if let Some(dir) = arg.strip_prefix("--store=") {
            store = Some(std::path::PathBuf::from(dir));
            continue;
        }
        match arg.strip_prefix("-j") {
            Some(n) => jobs = n.parse().expect("-jN takes a number"),
            None => path = Some(arg),
        }
    }
    let path = path.expect("usage: ideal [-jN] [--store=DIR] JOBS.json");
    let text = std::fs::read_to_string(&path).expect("read the job file");
    let file = dtlto_bridge::job::parse(&text).expect("parse the job file");
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = file.jobs.get(i) else { break };
                let stored = store
                    .as_ref()
                    .map(|dir| dir.join(job.inputs[0].replace('/', "%")));
                let output = job.outputs[0].as_ref();
                if let Some(stored) = &stored {
                    if std::fs::hard_link(stored, output).is_ok() {
                        continue;
                    }
                }
                let mut words = job.command.words().map(|w| w.as_ref());
                let program = words.next().expect("a command");
                let ok = Command::new(program)
                    .args(words)
                    .status()
                    .is_ok_and(|s| s.success());
                if !ok {
                    failed.store(true, Ordering::SeqCst);
                } else if let Some(stored) = &stored {
                    let _ = std::fs::hard_link(output, stored);
                }
            });
        }
    });
    std::process::exit(if failed.load(Ordering::SeqCst) { 1 } else { 0 });
}
