//! Connect: the remote side of a run before the scheduler starts anything — the connection
//! (the costliest jobs started on it as soon as it is made, `remote`'s leads), which jobs may
//! go there, and the action cache's answers (their outputs written and verified); and the
//! `RemoteLane` through which the scheduler hands the rest to the remote runner.
//!
//! It knows how `local` and `remote` meet; the protocol is `remote`'s, the scheduling `local`'s.

use super::prepare::Prepared;
use crate::job::outcome::{RemoteEnd, RemoteTotals};
use crate::local::process::Watch;
use crate::local::server::RemoteLane;
use crate::report;

/// The link's remote side: the connection, which jobs may go there, and how many at once.
pub(super) struct Remoting {
    pub remote: Option<crate::remote::Remote>,
    pub ok: Vec<bool>,
    pub jobs: usize,
}

/// Connects to the remote server, if one is named: the connection, and which jobs may go there.
/// A server that cannot be used is one warning, and every job runs here.
pub(super) fn start_remote(p: &mut Prepared<'_>) -> Remoting {
    let none = || Remoting {
        remote: None,
        ok: Vec::new(),
        jobs: 0,
    };
    let (Some(options), Some(identity)) = (&p.remote, p.identity.take()) else {
        return none();
    };
    let seen = std::mem::take(&mut p.seen);
    match crate::remote::Remote::start(options, &p.file, &p.cwd, identity, &seen, &p.cost) {
        Ok((remote, why)) => {
            let here: Vec<(usize, &String)> = why
                .iter()
                .enumerate()
                .filter_map(|(i, w)| w.as_ref().map(|w| (i, w)))
                .collect();
            if let Some((i, reason)) = here.first() {
                report::note(&format!(
                    "{} job(s) run here, not remotely; job {i} ({}): {reason}",
                    here.len(),
                    p.file.jobs[*i].outputs[0]
                ));
            }
            Remoting {
                remote: Some(remote),
                ok: why.iter().map(Option::is_none).collect(),
                jobs: options.jobs,
            }
        }
        Err(e) => {
            report::warning(&format!("remote: {e}; every job runs here"));
            none()
        }
    }
}

/// Each job's end when the action cache had it (its outputs written and verified), looked up
/// before the scheduler starts anything; empty without a server. A signal stops the lookup.
pub(super) fn look_up(remoting: &mut Remoting, watch: &Watch) -> Vec<Option<RemoteEnd>> {
    let Some(remote) = &remoting.remote else {
        return Vec::new();
    };
    let stop = remote.stopper();
    watch.on_signal(move |_| stop());
    if watch.received().is_some() {
        return Vec::new();
    }
    let hits = remote.look_up();
    // A hit is done: the scheduler, which starts remote jobs before their launchers come, must
    // not send it again.
    for (ok, hit) in remoting.ok.iter_mut().zip(&hits) {
        *ok &= hit.is_none();
    }
    hits
}

impl RemoteLane for crate::remote::Remote {
    fn submit(&self, index: usize, reply: Box<dyn FnOnce(RemoteEnd) + Send>) {
        crate::remote::Remote::submit(self, index, reply)
    }

    fn cancel(&self) {
        crate::remote::Remote::cancel(self)
    }

    fn finish(self: Box<Self>) -> (RemoteTotals, Vec<String>) {
        crate::remote::Remote::finish(*self)
    }
}
