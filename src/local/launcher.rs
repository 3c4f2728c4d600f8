//! Launcher: the per-job process that generated build files run (`dtlto-bridge __job DIR N`).
//!
//! It says hello to the run that owns the private directory DIR, runs what it is told, reports
//! how that ended, and exits as told. It takes no decision of its own, with one exception: when
//! the run disappears (killed, even by SIGKILL), it stops its command, removes the job's outputs
//! and clang's temporaries, gives back the jobserver token its job ran on, and exits. It knows
//! the wire protocol and processes; it does not know jobs, slots or the build tool.

use crate::job::outcome::{now, Status};
use crate::local::process::{self, Watch};
use crate::local::proto::{self, ToLauncher, ToRun};
use camino::Utf8Path;
use std::fs::File;
use std::io::BufReader;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// What the launcher waits for.
enum Event {
    Order(ToLauncher),
    /// The run closed the connection (or it broke).
    RunGone,
    Exited(Status),
}

/// Runs job `index` of the run in `dir` as told; returns the code to exit with.
pub fn main(dir: &Utf8Path, index: usize) -> i32 {
    let fail = |what: &str| {
        crate::report::error(&format!("run job {index}: {what}"));
        1
    };
    let watch = match Watch::start() {
        Ok(w) => w,
        Err(e) => return fail(&format!("watch signals: {e}")),
    };
    let stream = match proto::connect(dir) {
        Ok(s) => s,
        Err(e) => return fail(&format!("reach the link's dtlto-bridge through {dir}: {e}")),
    };
    let hello = ToRun::Hello {
        index,
        pid: std::process::id(),
    };
    if let Err(e) = proto::send(&stream, &hello) {
        return fail(&format!("reach the link's dtlto-bridge: {e}"));
    }
    let (tx, rx) = mpsc::channel();
    let reader = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => return fail(&format!("read from the link's dtlto-bridge: {e}")),
    };
    let orders = tx.clone();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(reader);
        while let Ok(Some(order)) = proto::receive::<ToLauncher>(&mut reader) {
            if orders.send(Event::Order(order)).is_err() {
                return;
            }
        }
        let _ = orders.send(Event::RunGone);
    });

    // The last command it was told to run, until the run says how the job ends; whether that
    // command still runs; whether the job holds a jobserver token.
    let mut last: Option<proto::Run> = None;
    let mut running = false;
    let mut token = false;
    for event in rx.iter() {
        match event {
            Event::Order(ToLauncher::Run(run)) => {
                token |= run.token;
                running = start(&run, &watch, &tx);
                last = Some(run);
            }
            Event::Exited(status) => {
                running = false;
                if proto::send(&stream, &ToRun::Exited(status)).is_err() {
                    return abandon(&watch, &rx, last.as_ref(), false, token);
                }
            }
            Event::Order(ToLauncher::Finish { code }) => return code,
            Event::Order(ToLauncher::Cancel { signal }) => watch.signal_all(signal),
            // A report may have gone into the socket of a run that was dying (its threads end
            // one by one): without an answer, the job's outputs are of no use to anyone.
            Event::RunGone => return abandon(&watch, &rx, last.as_ref(), running, token),
        }
    }
    1
}

/// Starts the command; its end arrives as `Event::Exited`, a failure to start too. Returns
/// whether it started.
fn start(run: &proto::Run, watch: &Watch, events: &mpsc::Sender<Event>) -> bool {
    let started = now();
    let spawned = File::create(&run.stderr).and_then(|stderr| {
        let mut cmd = Command::new(&run.argv[0]);
        cmd.args(&run.argv[1..]).stdin(Stdio::null()).stderr(stderr);
        process::without_jobserver(&mut cmd);
        process::spawn(
            &mut cmd,
            watch,
            &process::Options {
                group: true,
                parent_death: Some(libc::SIGKILL),
                forward: true,
            },
        )
    });
    let events = events.clone();
    match spawned {
        Ok(child) => {
            let watch = watch.clone();
            let name = process::program(&run.argv).to_string();
            std::thread::spawn(move || {
                let status = process::ended(child.wait(&watch), &name, started);
                let _ = events.send(Event::Exited(status));
            });
            true
        }
        Err(e) => {
            let why = format!("{}: {e}", process::program(&run.argv));
            let _ = events.send(Event::Exited(process::not_started(why, started)));
            false
        }
    }
}

/// The run is gone before it said how the job ends: stop the command if it still runs
/// (SIGTERM, then SIGKILL), remove what it may have written, give the token back, and exit
/// non-zero.
fn abandon(
    watch: &Watch,
    events: &mpsc::Receiver<Event>,
    run: Option<&proto::Run>,
    still_running: bool,
    token: bool,
) -> i32 {
    if let Some(run) = run {
        if still_running {
            watch.signal_all(libc::SIGTERM);
            if !wait_exit(events, Duration::from_secs(2)) {
                watch.signal_all(libc::SIGKILL);
                wait_exit(events, Duration::from_secs(5));
            }
        }
        crate::job::files::remove(std::path::Path::new("."), &run.outputs);
    }
    if token {
        // SAFETY: the descriptors in the environment were inherited for this purpose.
        if let Ok(client) = unsafe { jobserver::Client::from_env_ext(true) }.client {
            let _ = client.release_raw();
        }
    }
    1
}

/// Waits until the running command's end arrives, at most `limit`.
fn wait_exit(events: &mpsc::Receiver<Event>, limit: Duration) -> bool {
    let until = std::time::Instant::now() + limit;
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match events.recv_timeout(left) {
            Ok(Event::Exited(_)) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
}
