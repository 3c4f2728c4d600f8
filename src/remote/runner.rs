//! Runner: the link's handle (`Remote`) that runs its jobs on a Remote Execution API server — one
//! connection per link, the costliest jobs started while the rest is read (`lead`), every
//! distinct input uploaded once, the action cache asked first, transient failures retried,
//! outputs written atomically and verified like local ones.
//!
//! It knows how one remote job goes, from upload to verified output, and reports each job's end
//! to a callback. It does not decide which job goes remote or what happens after a failure (the
//! scheduler does), and it starts no local processes.

use super::connect::{connect_while_reading, Connection, Given};
use super::lead::Leads;
use super::memo::compilers::AskedCompiler;
use super::options::Options;
use super::plan::ActionPlan;
use super::session::Session;
use crate::job::outcome::{RemoteEnd as End, RemoteTotals as Totals};
use crate::job::parse::JobFile;
use crate::job::util::sync::lock;
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest lld waits at the end of a link for its entry to be written.
const ENTRY_WRITE: Duration = Duration::from_secs(3);

/// A link's connection to the server, and the jobs it can run there.
pub struct Remote {
    /// Dropped before the runtime: stops what still runs when the link drops its handle unfinished.
    stop: Stop,
    rt: tokio::runtime::Runtime,
    session: Arc<Session>,
    /// The costliest jobs, started before the rest was read (`lead`).
    leads: Option<Arc<Leads>>,
    cancel: Arc<tokio::sync::watch::Sender<bool>>,
    /// The CancelOperation calls under way, waited for by `finish`.
    cancelling: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    server: String,
    /// What went wrong on the side (a cancel the server refused), for the caller to print.
    warnings: Arc<Mutex<Vec<String>>>,
}

impl Remote {
    /// Connects, checks the server, and turns each job into an action; the costliest jobs
    /// (by `cost`, the scheduler's order) start as soon as they can. Returns, for each job, why
    /// it runs here instead (None: it can run remotely).
    pub fn start(
        options: &Options,
        file: &Arc<JobFile<'static>>,
        cwd: &Path,
        identity: AskedCompiler,
        seen: &crate::job::validate::Seen,
        cost: &[f64],
    ) -> Result<(Remote, Vec<Option<String>>), String> {
        let (cancel, cancelled) = tokio::sync::watch::channel(false);
        let given = Given {
            options,
            file,
            cwd,
            seen,
            cost,
        };
        let (connected, common, memo, known, read) =
            connect_while_reading(&given, identity, cancelled);
        let connection = match connected {
            Ok(connection) => connection,
            Err(e) => {
                // No server: the digests read so far are remembered all the same.
                let _ = memo.save();
                return Err(e);
            }
        };
        let (actions, mut why) = ActionPlan::build(&common?, known, file, cwd, read);
        let mut warnings: Vec<String> = options.target.exposed_headers().into_iter().collect();
        if let Err(e) = memo.save() {
            warnings.push(format!("remember the inputs' digests: {e}"));
        }
        let Connection {
            rt,
            client,
            cache_updates,
            shared,
            leads,
            prefetch,
        } = connection;
        let mut session = Session::new(options, client, cache_updates, actions, file, cwd, shared);
        session.entry = (options.link_entry)
            .then(|| super::entry::entry_key(&session.jobs))
            .flatten();
        // A lead was looked up, and runs remotely when it missed: its answer comes from there.
        let looked = leads.iter().flat_map(|l| l.looked()).collect::<Vec<_>>();
        for (i, _) in &looked {
            session.lead[*i] = true;
            why[*i] = None;
        }
        session.lead_looked = Mutex::new(looked);
        session.prefetch = Mutex::new(prefetch);
        let (session, leads, cancel) = (Arc::new(session), leads.map(Arc::new), Arc::new(cancel));
        Ok((
            Remote {
                stop: Stop {
                    armed: true,
                    cancel: cancel.clone(),
                    session: session.clone(),
                    leads: leads.clone(),
                    handle: rt.handle().clone(),
                },
                rt,
                session,
                leads,
                cancel,
                cancelling: Mutex::new(Vec::new()),
                server: options.target.url.clone(),
                warnings: Arc::new(Mutex::new(warnings)),
            },
            why,
        ))
    }
    /// Looks every job up in the action cache before the scheduler starts any (the leads,
    /// started already, asked for themselves), and writes the hits' outputs: each hit's end,
    /// None for the jobs still to run. Nothing when the cache is off.
    pub fn look_up(&self) -> Vec<Option<End>> {
        if !self.session.cache {
            return vec![None; self.session.jobs.len()];
        }
        let session = self.session.clone();
        let mut cancelled = self.session.cancelled.clone();
        let n = self.session.jobs.len();
        // A cancel stops the lookup where it is: the hits written so far count for nothing (the
        // run removes the outputs of jobs that did not end well).
        let ends = self.rt.block_on(async move {
            tokio::select! {
                ends = super::lookup::look_up(session) => ends,
                _ = cancelled.wait_for(|c| *c) => vec![None; n],
            }
        });
        // The first, and how many: each job meets the same cause.
        let problems = std::mem::take(&mut *lock(&self.session.lookup_problems));
        if let Some(first) = problems.iter().min() {
            let more = match problems.len() {
                1 => String::new(),
                n => format!(" ({} more jobs alike)", n - 1),
            };
            lock(&self.warnings).push(format!("remote: {first}{more}"));
        }
        ends
    }

    /// Stops the remote side from another thread (a signal's hook): as `cancel`, but only the
    /// link's own work, no call to the server.
    pub fn stopper(&self) -> impl Fn() + Send + 'static {
        let cancel = self.cancel.clone();
        move || {
            let _ = cancel.send(true);
        }
    }

    /// Runs job `index` remotely; `reply` learns how it ended (not called once the link is
    /// cancelled).
    pub fn submit(&self, index: usize, reply: Box<dyn FnOnce(End) + Send>) {
        let session = self.session.clone();
        let leads = self.leads.clone();
        let lead = leads.as_ref().and_then(|l| l.take(index));
        // Ranked as the scheduler sends them, costliest first: their uploads go in that order.
        let rank = |s: &Session| s.sent_jobs.fetch_add(1, Ordering::Relaxed);
        let ranked = lead.is_none().then(|| rank(&session));
        self.rt.spawn(async move {
            let mut cancelled = session.cancelled.clone();
            let run = async {
                match (lead, &leads) {
                    // A lead's own task ends it; one gone without an end runs here again.
                    (Some((k, end)), Some(leads)) => {
                        if let Ok(end) = end.await {
                            leads.adopt(k, index, &session);
                            return end;
                        }
                    }
                    // The leads' inputs go first, alone.
                    (_, Some(leads)) => leads.head_start().await,
                    _ => {}
                }
                let rank = ranked.unwrap_or_else(|| rank(&session));
                super::execute::run_job(&session, index, rank).await
            };
            let end = tokio::select! {
                end = run => end,
                _ = cancelled.wait_for(|c| *c) => return,
            };
            if !*session.cancelled.borrow() {
                reply(end);
            }
        });
    }

    /// Stops every remote job: nothing more is written, and the server is asked to cancel the
    /// operations in flight.
    pub fn cancel(&self) {
        let _ = self.cancel.send(true);
        self.cancel_operations();
    }

    /// Asks the server to cancel every operation of the link's still in flight, the leads' too.
    fn cancel_operations(&self) {
        let names = operations(&self.session, self.leads.as_deref());
        // Spawned, not waited for: this may run on one of the runtime's own threads.
        let mut cancelling = lock(&self.cancelling);
        for name in names {
            let mut client = self.session.client.clone();
            let warnings = self.warnings.clone();
            cancelling.push(self.rt.spawn(async move {
                if let Err(e) = client.cancel(&name).await {
                    lock(&warnings).push(format!("cancel the remote operation {name}: {e}"));
                }
            }));
        }
    }

    /// Waits for nothing more: the run is over. Returns what was sent and fetched, and the
    /// warnings to print.
    pub fn finish(mut self) -> (Totals, Vec<String>) {
        self.stop.armed = false;
        let c = &self.session.counters;
        let totals = Totals {
            server: self.server.clone(),
            distinct_blobs: c.distinct_blobs.load(Ordering::Relaxed),
            uploaded_bytes: c.uploaded_bytes.load(Ordering::Relaxed),
            uploaded_blobs: c.uploaded_blobs.load(Ordering::Relaxed),
            downloaded_bytes: c.downloaded_bytes.load(Ordering::Relaxed),
        };
        if !*self.session.cancelled.borrow() {
            if let Err(e) = super::lookup::keep(&self.session) {
                lock(&self.warnings).push(format!("remote: {e}"));
            }
        }
        if let Err(e) = self.session.later.known.save() {
            lock(&self.warnings).push(format!("remote: remember the jobs' actions: {e}"));
        }
        // Not to a server found down: lld would wait on it for nothing.
        if !*self.session.cancelled.borrow() && self.session.health.down().is_none() {
            let session = self.session.clone();
            let remembered = self.rt.block_on(async move {
                tokio::time::timeout(ENTRY_WRITE, remember_entry(&session))
                    .await
                    .unwrap_or_else(|_| Err("write the link's cache entry: timed out".into()))
            });
            if let Err(e) = remembered {
                lock(&self.warnings).push(format!("remote: {e}"));
            }
        }
        if let Some(w) = self.session.health.warning() {
            lock(&self.warnings).insert(0, w);
        }
        let _ = self.cancel.send(true);
        // A lead the scheduler never sent (the link stopped first) executes no longer.
        self.cancel_operations();
        let cancelling = std::mem::take(&mut *lock(&self.cancelling));
        self.rt.block_on(async {
            for handle in cancelling {
                let _ = handle.await;
            }
        });
        self.rt.shutdown_timeout(Duration::from_secs(2));
        let warnings = std::mem::take(&mut *lock(&self.warnings));
        // Every job's action, input and remembered entry: freed on a thread of its own while
        // the link's records are written (here, when no thread can be started).
        let session = self.session;
        let _ = std::thread::Builder::new().spawn(move || drop(session));
        (totals, warnings)
    }
}

/// The operations of the link still in flight, the leads' too, each taken (cancelled once).
fn operations(session: &Session, leads: Option<&Leads>) -> Vec<String> {
    let mut names: Vec<String> = lock(&session.state)
        .iter_mut()
        .filter_map(|s| s.operation.take())
        .collect();
    names.extend(leads.iter().flat_map(|l| l.operations()));
    names
}

/// What a link that drops its handle unfinished (it failed after the lookup, before any job
/// was sent) leaves running: nothing is written from then on, and the operations in flight
/// (the leads') are cancelled, a few seconds at most.
struct Stop {
    armed: bool,
    cancel: Arc<tokio::sync::watch::Sender<bool>>,
    session: Arc<Session>,
    leads: Option<Arc<Leads>>,
    handle: tokio::runtime::Handle,
}

impl Drop for Stop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let _ = self.cancel.send(true);
        let names = operations(&self.session, self.leads.as_deref());
        let client = self.session.client.clone();
        let cancelled = async move {
            for name in names {
                let _ = client.clone().cancel(&name).await;
            }
        };
        // The timer is made inside the runtime, which has it.
        let _ = (self.handle)
            .block_on(async { tokio::time::timeout(Duration::from_secs(3), cancelled).await });
    }
}

/// Writes the link's entry when every job's outputs are held by the server (from its cache or
/// executed there, none from the disk cache), the server takes updates, and the entry did not
/// answer this link already.
async fn remember_entry(session: &Session) -> Result<(), String> {
    let Some(entry) = &session.entry else {
        return Ok(());
    };
    if !session.cache || !session.cache_updates || session.entry_found.load(Ordering::Relaxed) {
        return Ok(());
    }
    let results: Vec<Option<Vec<re::OutputFile>>> = {
        let state = lock(&session.state);
        // Outputs taken from the disk cache may be outputs the server never held.
        if state.iter().any(|s| s.from_disk) {
            return Ok(());
        }
        state.iter().map(|s| s.result.clone()).collect()
    };
    match super::entry::remember(&session.client, entry, &results).await {
        Ok(()) => Ok(()),
        Err(s) if s.code() == tonic::Code::PermissionDenied => Err(format!(
            "{} refuses this client's action-cache writes ({}): --remote-no-cache-write reads \
             the cache without writing it",
            session.server,
            super::reapi::describe(&s)
        )),
        Err(s) => Err(format!(
            "write the link's cache entry: {}",
            super::reapi::describe(&s)
        )),
    }
}
