//! Settle: the fourth step — every launcher gone, the server finished, each job's outcome read
//! from its record and stderr, and the outputs of jobs that did not finish well removed.
//!
//! It knows what is left once jobs have ended; it words nothing for the user.

use super::build::{Built, LAUNCHERS_GONE};
use super::prepare::Prepared;
use crate::job::files;
use crate::job::outcome::{Fallback, Outcome, RemoteEnd, Sent};
use crate::local::process::Watch;
use crate::local::rundir;
use crate::local::sched::JobRecord;
use crate::local::server;
use std::fs;
use std::process::ExitStatus;

/// What `settle` leaves for `conclude`.
pub(super) struct Settled {
    pub outcomes: Vec<Outcome>,
    pub warnings: Vec<String>,
    pub remote: Option<crate::job::outcome::RemoteTotals>,
    /// How the build tool ended; None when none ran.
    pub tool: Option<Result<ExitStatus, String>>,
    pub signal: Option<i32>,
    pub start: f64,
    pub end: f64,
}

pub(super) fn settle(
    p: &Prepared<'_>,
    built: Built,
    hits: Vec<Option<RemoteEnd>>,
    watch: &Watch,
) -> Settled {
    let Built {
        server,
        guard,
        remote,
        tool,
        start,
        end,
    } = built;
    let server::Finished {
        mut records,
        mut warnings,
        remote,
    } = finish(p, server, remote, watch);
    for (index, end) in hits.into_iter().enumerate() {
        if let Some(end) = end {
            records[index] = JobRecord::from_cache(end);
        }
    }
    let outcomes = outcomes(p, &records);
    // Only jobs that did not finish well lose their outputs: with --save-temps, lld keeps the
    // objects of the jobs that did, even in a cancelled link.
    for o in outcomes.iter().filter(|o| !o.ok()) {
        files::remove(&p.cwd, &p.file.jobs[o.index].outputs);
    }
    if let Some(lost) = guard.and_then(|g| g.finish()) {
        warnings.push(format!(
            "the run's guard went away ({lost}): had dtlto-bridge been killed, its jobs would \
             have been left running"
        ));
    }
    Settled {
        outcomes,
        warnings,
        remote,
        tool,
        signal: watch.received(),
        start,
        end,
    }
}

/// The server finished once its launchers are gone (those that linger stopped), or without a
/// server, the remote side.
fn finish(
    p: &Prepared<'_>,
    server: Option<server::Server>,
    remote: Option<crate::remote::Remote>,
    watch: &Watch,
) -> server::Finished {
    match server {
        Some(server) => {
            // The build tool is gone; its launchers should be too. Those that linger are stopped.
            if !server.wait_for_launchers(LAUNCHERS_GONE) {
                server.cancel(watch.received().unwrap_or(libc::SIGTERM));
                server.wait_for_launchers(LAUNCHERS_GONE);
            }
            server.finish()
        }
        None => {
            let (totals, warnings) = remote.map(crate::remote::Remote::finish).unzip();
            server::Finished {
                records: vec![JobRecord::default(); p.file.jobs.len()],
                warnings: warnings.unwrap_or_default(),
                remote: totals,
            }
        }
    }
}

/// A fallback of a job sent as a bundle says why in one line jobs alike share, without the
/// wrapper's stderr (`bundle::send::fallback_reason`); the report keeps it per job (`sent`).
fn bundle_fallback(fallback: Option<Fallback>, sent: Option<&Sent>) -> Option<Fallback> {
    let (fallback, sent) = match (fallback, sent) {
        (Some(f), Some(s)) => (f, s),
        (f, _) => return f,
    };
    match crate::remote::bundle::send::fallback_reason(sent, &fallback.stderr) {
        Some(reason) => Some(Fallback {
            reason,
            stderr: String::new(),
        }),
        None => Some(fallback),
    }
}

/// Each job's outcome from its record, with the stderr of its attempts from the private
/// directory.
fn outcomes(p: &Prepared<'_>, records: &[JobRecord]) -> Vec<Outcome> {
    let dir = p.tool.as_ref().map(|t| t.state.path());
    let read = |index: usize, attempt: usize| {
        dir.and_then(|dir| fs::read(rundir::stderr_file(dir, index, attempt)).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    // Where a bundle went, as `__send` recorded it beside its spec.
    let sent = |index: usize| -> Option<Sent> {
        let spec = rundir::send_spec(dir?, index);
        let (_, record) = crate::remote::bundle::send::paths(spec.as_std_path());
        serde_json::from_slice(&fs::read(record).ok()?).ok()
    };
    records
        .iter()
        .enumerate()
        .map(|(index, r)| {
            let last = r.attempts.last().filter(|_| r.finished);
            Outcome {
                index,
                start: r.attempts.first().map(|a| a.status.start),
                ran: r.ran(),
                fallback: bundle_fallback(r.fallback(|| read(index, 0)), sent(index).as_ref()),
                stderr: if r.attempts.is_empty() {
                    String::new()
                } else {
                    read(index, r.attempts.len() - 1)
                },
                status: last.map(|a| a.status.clone()),
                problem: last.and_then(|a| a.problem.clone()),
                remote: r.attempts.first().and_then(|a| a.remote.clone()),
                sent: sent(index),
            }
        })
        .collect()
}
