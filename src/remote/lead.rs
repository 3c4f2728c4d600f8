//! Lead: the costliest jobs of a link, started before the rest of it is read. Their inputs are
//! read and their actions built first; once the connection is made each is looked up in the
//! action cache while its inputs are sent (the costliest's first and alone) and, missed,
//! executed, on a session of their own, while the rest of the link is hashed, planned and
//! looked up. A lead's hit is the link's lookup's to write, with the others'; the scheduler
//! sends the costliest jobs first, so a lead that missed is among the first it sends: that
//! `submit` takes the lead's end from here.
//!
//! It knows which jobs lead and where their ends wait; how a job runs is `execute`'s, and the
//! order of the link's jobs is the scheduler's (`cost`, the same order).

use super::action::Common;
use super::memo::jobs::RememberedJobs;
use super::plan::{ActionPlan, Read};
use super::session::{Hit, JobState, Session, Shared};
use crate::job::outcome::RemoteEnd as End;
use crate::job::parse::JobFile;
use crate::job::util::sync::lock;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// How many of a link's `n` jobs lead: one in 16, at most 8 (the first wave's longest jobs,
/// few enough that reading their inputs first delays the rest by little). A link of few jobs
/// reads its inputs in no time: none of its jobs leads.
pub(super) fn count(n: usize) -> usize {
    (n / 16).min(8)
}

/// The `n` costliest jobs by `cost`, in the scheduler's order (the costliest, then the lowest
/// index); none when there is a single job (nothing to be ahead of).
pub(super) fn pick(cost: &[f64], n: usize) -> Vec<usize> {
    if cost.len() < 2 {
        return Vec::new();
    }
    let mut order: Vec<usize> = (0..cost.len()).collect();
    order.sort_by(|&a, &b| cost[b].total_cmp(&cost[a]).then(a.cmp(&b)));
    order.truncate(n);
    order
}

/// The link's file with the jobs `picked` alone, in that order.
pub(super) fn file_of(file: &JobFile<'static>, picked: &[usize]) -> JobFile<'static> {
    JobFile {
        schema: file.schema,
        linker_output: file.linker_output.clone(),
        jobs: picked.iter().map(|&i| file.jobs[i].clone()).collect(),
    }
}

/// The leads read, their actions built: what the connection starts once it is made.
pub(super) struct Planned {
    pub picked: Vec<usize>,
    pub file: Arc<JobFile<'static>>,
    pub plan: ActionPlan,
    /// Whether each picked job leads: its action was built, and it is new (a job remembered
    /// from the last link, its action unchanged, is most likely in the action cache: it is
    /// looked up with the rest).
    pub leads: Vec<bool>,
}

impl Planned {
    /// The actions of the `picked` jobs, from what `read` found of them; `known` the actions
    /// remembered from the last link.
    pub(super) fn build(
        common: &Common,
        known: &Arc<RememberedJobs>,
        picked: Vec<usize>,
        file: JobFile<'static>,
        cwd: &Path,
        read: Read,
    ) -> Planned {
        let file = Arc::new(file);
        let (plan, why) = ActionPlan::build(common, known.clone(), &file, cwd, read);
        let leads = (plan.jobs.iter().zip(&why))
            .map(|(job, why)| why.is_none() && job.as_ref().is_some_and(|j| j.whole))
            .collect();
        Planned {
            picked,
            file,
            plan,
            leads,
        }
    }
}

/// The leads under way: each one's lookup, waited for by the link's, and its end, by the
/// link's `submit`.
pub(super) struct Leads {
    /// The leads' own session: job `k` there is the `k`th picked job of the link.
    session: Arc<Session>,
    /// Each lead's lookup to come, by its index in the link; taken once, by the link's session.
    looked: Mutex<Vec<(usize, oneshot::Receiver<Hit>)>>,
    /// Each missed lead's end to come, by its index in the link; taken once.
    ends: Mutex<HashMap<usize, (usize, oneshot::Receiver<End>)>>,
    /// How many leads are still uploading.
    uploading: tokio::sync::watch::Receiver<usize>,
}

/// How long the other jobs wait, at most, for the leads' uploads: the leads' inputs have the
/// link's bandwidth (and this machine's cores) to themselves that long.
const HEAD_START: std::time::Duration = std::time::Duration::from_secs(2);

/// A lead's upload under way: counted off when it ends, however it ends.
struct Uploaded<'a>(&'a tokio::sync::watch::Sender<usize>);

impl Drop for Uploaded<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// The first lead's upload under way: the other leads' wait for its end, however it ends.
struct First(Option<tokio::sync::watch::Sender<bool>>);

impl Drop for First {
    fn drop(&mut self) {
        if let Some(first) = &self.0 {
            let _ = first.send(true);
        }
    }
}

/// What the link's session needs to start the leads' own.
pub(super) struct Start<'a> {
    pub rt: &'a tokio::runtime::Runtime,
    pub options: &'a super::options::Options,
    pub client: &'a super::reapi::Client,
    pub cache_updates: bool,
    pub shared: &'a Shared,
    pub cwd: &'a Path,
}

impl Leads {
    /// Starts every lead: looked up while its inputs are sent, then, missed, executed. The
    /// first (the costliest) sends alone: the others' uploads wait for its end (HEAD_START at
    /// most), so that its inputs have the link's bandwidth and the server to themselves, and it
    /// executes before anything else is sent.
    pub(super) fn start(s: Start<'_>, planned: Planned) -> Leads {
        let Planned {
            picked,
            file,
            plan,
            leads,
        } = planned;
        let session = Session::new(
            s.options,
            s.client.clone(),
            s.cache_updates,
            plan,
            &file,
            s.cwd,
            s.shared.clone(),
        );
        let session = Arc::new(session);
        let mut ends = HashMap::new();
        let mut looked = Vec::new();
        let count = leads.iter().filter(|l| **l).count();
        let (pending, uploading) = tokio::sync::watch::channel(count);
        let pending = Arc::new(pending);
        let (first, first_sent) = tokio::sync::watch::channel(false);
        let mut first = Some(first);
        for (k, i) in picked.iter().enumerate().filter(|(k, _)| leads[*k]) {
            let pending = pending.clone();
            // The first lead tells its end; the others wait for it.
            let (alone, mut after) = (First(first.take()), first_sent.clone());
            let (tell_hit, hit) = oneshot::channel();
            looked.push((*i, hit));
            let (tell_end, end) = oneshot::channel();
            ends.insert(*i, (k, end));
            let rank = session.sent_jobs.fetch_add(1, Ordering::Relaxed);
            let session = session.clone();
            s.rt.spawn(async move {
                let mut cancelled = session.cancelled.clone();
                let run = async {
                    // Asked like every job (a hit is written by the link's lookup), its inputs
                    // sent meanwhile: sent for nothing on a hit, a round trip sooner on a miss.
                    let uploaded = Uploaded(&pending);
                    let (hit, ()) = tokio::join!(super::lookup::ask_one(&session, k), async {
                        if alone.0.is_none() {
                            let _ = tokio::time::timeout(HEAD_START, after.wait_for(|s| *s)).await;
                        }
                        if let Some(job) = session.jobs[k].as_ref() {
                            let _ = super::upload::upload_job(&session, k, job, rank).await;
                        }
                        drop(alone);
                    });
                    drop(uploaded);
                    let missed = hit.is_none();
                    let _ = tell_hit.send(hit);
                    if missed {
                        let end = super::execute::run_job(&session, k, rank).await;
                        let _ = tell_end.send(end);
                    }
                };
                tokio::select! {
                    _ = run => {}
                    _ = cancelled.wait_for(|c| *c) => {}
                }
            });
        }
        Leads {
            session,
            uploading,
            looked: Mutex::new(looked),
            ends: Mutex::new(ends),
        }
    }

    /// Waits until every lead's inputs are sent (or could not be), HEAD_START at most: what a
    /// job that does not lead does before its own upload.
    pub(super) async fn head_start(&self) {
        let mut uploading = self.uploading.clone();
        let _ = tokio::time::timeout(HEAD_START, uploading.wait_for(|n| *n == 0)).await;
    }

    /// Whether any job leads (before `looked` takes them).
    pub(super) fn any(&self) -> bool {
        !lock(&self.looked).is_empty()
    }

    /// The jobs of the link that lead, each with its lookup to wait for: taken once.
    pub(super) fn looked(&self) -> Vec<(usize, oneshot::Receiver<Hit>)> {
        std::mem::take(&mut *lock(&self.looked))
    }

    /// Job `index`'s end to wait for, when it leads and was not taken before, and the state to
    /// give the link's session once it comes (`adopt`).
    pub(super) fn take(&self, index: usize) -> Option<(usize, oneshot::Receiver<End>)> {
        lock(&self.ends).remove(&index)
    }

    /// The state lead `k` left (its outputs as the server holds them, whether they came from
    /// the disk cache), given to the same job, `index`, of the link's `session`.
    pub(super) fn adopt(&self, k: usize, index: usize, session: &Session) {
        let JobState {
            bad_result,
            from_disk,
            result,
            ..
        } = lock(&self.session.state)[k].clone();
        let state = &mut lock(&session.state)[index];
        state.bad_result = bad_result;
        state.from_disk = from_disk;
        state.result = result;
    }

    /// The operations of the leads still executing, each taken (to be cancelled once).
    pub(super) fn operations(&self) -> Vec<String> {
        lock(&self.session.state)
            .iter_mut()
            .filter_map(|s| s.operation.take())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::pick;

    #[test]
    fn one_job_in_sixteen_leads_at_most_eight() {
        let cases = [
            (0, 0),
            (5, 0),
            (15, 0),
            (16, 1),
            (47, 2),
            (128, 8),
            (1049, 8),
        ];
        for (n, leads) in cases {
            assert_eq!(super::count(n), leads, "{n} jobs");
        }
    }

    #[test]
    fn the_costliest_lead_in_the_schedulers_order() {
        let cases: &[(&[f64], usize, &[usize])] = &[
            (&[1.0, 5.0, 3.0, 5.0, 2.0], 3, &[1, 3, 2]),
            (&[1.0, 5.0, 3.0], 8, &[1, 2, 0]),
            (&[4.0, 4.0, 4.0], 2, &[0, 1]),
            (&[9.0], 8, &[]),
            (&[], 8, &[]),
            (&[1.0, 2.0], 0, &[]),
        ];
        for (cost, n, want) in cases {
            assert_eq!(pick(cost, *n), *want, "{cost:?} {n}");
        }
    }
}
