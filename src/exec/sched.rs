//! Sched: the link's scheduler, the one place that decides which ready job runs next
//! (costliest first), on which slot, and what happens when it ends (it finishes, or runs again
//! locally when it failed through the wrapper).
//!
//! `Core` is that decision logic alone — events in, steps out — and knows no sockets,
//! processes or files; `server` carries the steps out.

use crate::exec::slots::Slot;
use crate::job::outcome::{Fallback, Ran, Status};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What the core decides.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Tell job `index`'s launcher to run its command (through the wrapper or not).
    Run {
        index: usize,
        wrapped: bool,
        slot: Slot,
        attempt: usize,
    },
    /// Tell job `index`'s launcher to exit with `code`.
    Finish { index: usize, code: i32 },
    /// Tell job `index`'s launcher to stop its command.
    Cancel { index: usize, signal: i32 },
    /// Run job `index` remotely, as attempt `attempt`; its launcher waits.
    Remote { index: usize, attempt: usize },
    /// Stop every remote job.
    CancelRemote,
    /// Ask the supply for this many more slots.
    Request(usize),
    /// Give this many taken slots back to the supply.
    Release(usize),
}

/// What the run tells the core once.
pub struct Policy {
    /// Whether jobs run through a wrapper first.
    pub wrapped: bool,
    /// Whether a job that fails through the wrapper runs again locally.
    pub fallback: bool,
    /// How many launchers the build tool starts at once.
    pub expected: usize,
    /// Slots held from the start.
    pub own: usize,
    /// Whether the supply can give more.
    pub can_grow: bool,
    /// Jobs that may run remotely (empty: none), and how many at once.
    pub remote: Vec<bool>,
    pub remote_jobs: usize,
    /// Whether a job that fails remotely runs again here.
    pub remote_fallback: bool,
    /// Whether a failed job stops the run from starting any other (as ninja and make stop;
    /// with a build tool, the tool itself stops starting launchers).
    pub stop_after_failure: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// No launcher yet.
    Waiting,
    /// Its launcher waits for a slot.
    Ready,
    /// It runs on the remote server; its launcher waits.
    Remote,
    Running {
        slot: Slot,
        wrapped: bool,
    },
    Done,
}

/// One run of a job's command.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub wrapped: bool,
    /// How it ran remotely, if it did.
    pub remote: Option<crate::job::outcome::RemoteInfo>,
    pub status: Status,
    /// What was wrong with it, if anything (a failure, or an output missing or empty).
    pub problem: Option<String>,
}

/// What the core knows of a job when the run ends.
#[derive(Debug, Clone, Default)]
pub struct JobRecord {
    pub attempts: Vec<Attempt>,
    /// Whether its launcher was told to finish (the job ended, one way or the other).
    pub finished: bool,
}

impl JobRecord {
    /// A job that the action cache answered before the run (`remote::Remote::look_up`).
    pub fn from_cache(end: crate::job::outcome::RemoteEnd) -> JobRecord {
        JobRecord {
            attempts: vec![Attempt {
                wrapped: false,
                remote: Some(end.info),
                status: end.status,
                problem: end.problem,
            }],
            finished: true,
        }
    }

    /// Where the job ran, as the report says.
    pub fn ran(&self) -> Ran {
        match self.attempts.as_slice() {
            _ if !self.finished => Ran::NotRun,
            [] => Ran::NotRun,
            [first, _, ..] if first.wrapped || first.remote.is_some() => Ran::Fallback,
            [first] if first.remote.as_ref().is_some_and(|r| r.cached) => Ran::RemoteCache,
            [first] if first.remote.is_some() => Ran::Remote,
            [first, ..] if first.wrapped => Ran::Wrapper,
            _ => Ran::Local,
        }
    }

    /// Why the job ran again locally, and the stderr of its run through the wrapper (read by
    /// the caller from the first attempt's file).
    pub fn fallback(&self, first_stderr: impl FnOnce() -> String) -> Option<Fallback> {
        match self.attempts.as_slice() {
            [first, _, ..] => Some(Fallback {
                reason: first.problem.clone().unwrap_or_default(),
                stderr: first_stderr(),
            }),
            _ => None,
        }
    }
}

/// A ready job in the queue: the costliest first, then the lowest index.
#[derive(Debug, PartialEq)]
struct Entry {
    cost: f64,
    index: usize,
}

impl Eq for Entry {}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cost
            .total_cmp(&other.cost)
            .then(other.index.cmp(&self.index))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The scheduler's decisions, without any I/O.
pub struct Core {
    cost: Vec<f64>,
    phase: Vec<Phase>,
    records: Vec<JobRecord>,
    ready: BinaryHeap<Entry>,
    /// Ready jobs that go to the remote server.
    ready_remote: BinaryHeap<Entry>,
    remote: Vec<bool>,
    remote_jobs: usize,
    remote_fallback: bool,
    remote_running: usize,
    /// Slots held and not in use.
    free: Vec<Slot>,
    /// Slots asked of the supply and not yet arrived.
    asked: usize,
    can_grow: bool,
    gathering: bool,
    connected: usize,
    expected: usize,
    wrapped: bool,
    fallback: bool,
    cancelled: Option<i32>,
    stop_after_failure: bool,
    /// A job failed: nothing more starts.
    stopped: bool,
    running: usize,
    done: usize,
}

impl Core {
    /// A core for jobs of these costs (higher runs first).
    pub fn new(cost: Vec<f64>, policy: &Policy) -> Core {
        let n = cost.len();
        Core {
            cost,
            phase: vec![Phase::Waiting; n],
            records: vec![JobRecord::default(); n],
            ready: BinaryHeap::new(),
            ready_remote: BinaryHeap::new(),
            remote: policy.remote.clone(),
            remote_jobs: policy.remote_jobs,
            remote_fallback: policy.remote_fallback,
            remote_running: 0,
            free: vec![Slot::Own; policy.own],
            asked: 0,
            can_grow: policy.can_grow,
            gathering: policy.expected > 1,
            connected: 0,
            expected: policy.expected,
            wrapped: policy.wrapped,
            fallback: policy.fallback,
            cancelled: None,
            stop_after_failure: policy.stop_after_failure,
            stopped: false,
            running: 0,
            done: 0,
        }
    }

    /// (running, done) jobs, for the progress line.
    pub fn counts(&self) -> (usize, usize) {
        (self.running, self.done)
    }

    pub fn records(&self) -> &[JobRecord] {
        &self.records
    }

    /// Jobs running on a taken slot now.
    pub fn running_on_taken(&self) -> usize {
        self.phase
            .iter()
            .filter(|p| {
                matches!(
                    p,
                    Phase::Running {
                        slot: Slot::Taken,
                        ..
                    }
                )
            })
            .count()
    }

    /// Job `index`'s launcher is ready. None when no such job waits for a launcher.
    pub fn hello(&mut self, index: usize) -> Option<Vec<Step>> {
        if self.phase.get(index) != Some(&Phase::Waiting) {
            return None;
        }
        if let Some(sig) = self.cancelled {
            self.phase[index] = Phase::Done;
            return Some(vec![Step::Finish {
                index,
                code: crate::exec::process::exit_code(sig),
            }]);
        }
        self.phase[index] = Phase::Ready;
        let entry = Entry {
            cost: self.cost[index],
            index,
        };
        if self.remote.get(index) == Some(&true) && self.remote_jobs > 0 {
            self.ready_remote.push(entry);
        } else {
            self.ready.push(entry);
        }
        self.connected += 1;
        if self.connected >= self.expected {
            self.gathering = false;
        }
        Some(self.dispatch())
    }

    /// The first launchers had their time to connect.
    pub fn gathered(&mut self) -> Vec<Step> {
        self.gathering = false;
        self.dispatch()
    }

    /// A slot asked of the supply arrived.
    pub fn slot_arrived(&mut self) -> Vec<Step> {
        self.asked = self.asked.saturating_sub(1);
        self.free.push(Slot::Taken);
        self.dispatch()
    }

    /// The supply failed: it gives no more, and `instead` own slots take its place.
    pub fn supply_failed(&mut self, instead: usize) -> Vec<Step> {
        self.can_grow = false;
        self.asked = 0;
        let own = self.free.iter().filter(|s| **s == Slot::Own).count()
            + self
                .phase
                .iter()
                .filter(|p| {
                    matches!(
                        p,
                        Phase::Running {
                            slot: Slot::Own,
                            ..
                        }
                    )
                })
                .count();
        for _ in own..instead.max(1) {
            self.free.push(Slot::Own);
        }
        self.dispatch()
    }

    /// Job `index`'s command ended; `problem` says what was wrong with it, if anything.
    pub fn exited(&mut self, index: usize, status: Status, problem: Option<String>) -> Vec<Step> {
        let Some(Phase::Running { slot, wrapped }) = self.phase.get(index).cloned() else {
            return Vec::new();
        };
        let failed = problem.is_some();
        let code = match (&problem, status.success()) {
            (None, _) => 0,
            (Some(_), true) => 1,
            (Some(_), false) => status.exit_code(),
        };
        let record = &mut self.records[index];
        record.attempts.push(Attempt {
            wrapped,
            remote: None,
            status,
            problem,
        });
        if wrapped && failed && self.fallback && self.cancelled.is_none() {
            self.phase[index] = Phase::Running {
                slot,
                wrapped: false,
            };
            return vec![Step::Run {
                index,
                wrapped: false,
                slot,
                attempt: record.attempts.len(),
            }];
        }
        record.finished = true;
        self.end(index, slot);
        let mut steps = vec![Step::Finish { index, code }];
        if failed {
            steps.extend(self.stop_starting(code));
        }
        steps.extend(self.dispatch());
        steps
    }

    /// Job `index` ended remotely; `end.problem` says what was wrong, if anything. A job that
    /// failed runs again here when the policy says so.
    pub fn remote_done(&mut self, index: usize, end: crate::job::outcome::RemoteEnd) -> Vec<Step> {
        if self.phase.get(index) != Some(&Phase::Remote) {
            return Vec::new();
        }
        self.remote_running -= 1;
        let failed = end.problem.is_some();
        let record = &mut self.records[index];
        record.attempts.push(Attempt {
            wrapped: false,
            remote: Some(end.info),
            status: end.status,
            problem: end.problem,
        });
        if failed && self.remote_fallback && self.cancelled.is_none() {
            self.phase[index] = Phase::Ready;
            self.running -= 1;
            self.ready.push(Entry {
                cost: self.cost[index],
                index,
            });
            return self.dispatch();
        }
        record.finished = true;
        self.phase[index] = Phase::Done;
        self.running -= 1;
        self.done += 1;
        let mut steps = vec![Step::Finish {
            index,
            code: i32::from(failed),
        }];
        if failed {
            steps.extend(self.stop_starting(1));
        }
        steps.extend(self.dispatch());
        steps
    }

    /// Job `index`'s launcher went away (it exited, or was killed).
    pub fn gone(&mut self, index: usize) -> Vec<Step> {
        match self.phase.get(index).cloned() {
            Some(Phase::Remote) => {
                self.phase[index] = Phase::Done;
                self.remote_running -= 1;
                self.running -= 1;
                self.dispatch()
            }
            Some(Phase::Ready) => {
                // Left in the heap; `dispatch` skips it.
                self.phase[index] = Phase::Done;
                self.dispatch()
            }
            Some(Phase::Running { slot, .. }) => {
                self.end(index, slot);
                self.dispatch()
            }
            _ => Vec::new(),
        }
    }

    /// The run is cancelled by `signal`: nothing more starts, running commands are stopped.
    pub fn cancel(&mut self, signal: i32) -> Vec<Step> {
        if self.cancelled.is_some() {
            return Vec::new();
        }
        self.cancelled = Some(signal);
        let mut steps = Vec::new();
        if self.remote_running > 0 {
            steps.push(Step::CancelRemote);
        }
        for index in 0..self.phase.len() {
            match self.phase[index] {
                Phase::Ready | Phase::Remote => {
                    self.phase[index] = Phase::Done;
                    steps.push(Step::Finish {
                        index,
                        code: crate::exec::process::exit_code(signal),
                    });
                }
                Phase::Running { .. } => steps.push(Step::Cancel { index, signal }),
                _ => {}
            }
        }
        self.ready.clear();
        self.ready_remote.clear();
        self.remote_running = 0;
        steps.extend(self.dispatch());
        steps
    }

    /// A job failed: with `stop_after_failure`, the run goes no further, as ninja and make
    /// stop after a failure: ready jobs never start (each is told to finish with `code`), those
    /// running finish.
    fn stop_starting(&mut self, code: i32) -> Vec<Step> {
        if !self.stop_after_failure || self.stopped || self.cancelled.is_some() {
            return Vec::new();
        }
        self.stopped = true;
        let mut steps = Vec::new();
        for index in 0..self.phase.len() {
            if self.phase[index] == Phase::Ready {
                self.phase[index] = Phase::Done;
                steps.push(Step::Finish { index, code });
            }
        }
        self.ready.clear();
        self.ready_remote.clear();
        steps
    }

    fn end(&mut self, index: usize, slot: Slot) {
        self.phase[index] = Phase::Done;
        self.running -= 1;
        self.done += 1;
        self.free.push(slot);
    }

    /// Starts the costliest ready jobs on free slots, then asks for the slots still needed or
    /// gives back those no job needs.
    fn dispatch(&mut self) -> Vec<Step> {
        let mut steps = Vec::new();
        if self.cancelled.is_none() && !self.gathering && !self.stopped {
            while self.remote_running < self.remote_jobs {
                let Some(Entry { index, .. }) = self.ready_remote.pop() else {
                    break;
                };
                if self.phase[index] != Phase::Ready {
                    continue;
                }
                self.phase[index] = Phase::Remote;
                self.remote_running += 1;
                self.running += 1;
                steps.push(Step::Remote {
                    index,
                    attempt: self.records[index].attempts.len(),
                });
            }
            while !self.free.is_empty() {
                let Some(Entry { index, .. }) = self.ready.pop() else {
                    break;
                };
                if self.phase[index] != Phase::Ready {
                    continue;
                }
                // Own slots first: taken ones are the ones to give back.
                let at = self.free.iter().position(|s| *s == Slot::Own);
                let slot = self.free.remove(at.unwrap_or(self.free.len() - 1));
                // A job that failed remotely runs here without the wrapper.
                let attempt = self.records[index].attempts.len();
                let wrapped = self.wrapped && attempt == 0;
                self.phase[index] = Phase::Running { slot, wrapped };
                self.running += 1;
                steps.push(Step::Run {
                    index,
                    wrapped,
                    slot,
                    attempt,
                });
            }
        }
        let waiting = if self.cancelled.is_some() {
            0
        } else {
            self.ready
                .iter()
                .filter(|e| self.phase[e.index] == Phase::Ready)
                .count()
        };
        let spare = self.free.len();
        if waiting == 0 {
            let taken = self.free.iter().filter(|s| **s == Slot::Taken).count();
            self.free.retain(|s| *s == Slot::Own);
            if taken > 0 {
                steps.push(Step::Release(taken));
            }
        } else if self.can_grow && waiting > spare + self.asked {
            let more = waiting - spare - self.asked;
            self.asked += more;
            steps.push(Step::Request(more));
        }
        steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: i32) -> Status {
        Status {
            code: Some(code),
            signal: None,
            spawn_error: None,
            start: 0.0,
            end: 1.0,
        }
    }

    fn policy(own: usize, can_grow: bool, expected: usize) -> Policy {
        Policy {
            wrapped: false,
            fallback: false,
            expected,
            own,
            can_grow,
            remote: Vec::new(),
            remote_jobs: 0,
            remote_fallback: false,
            stop_after_failure: false,
        }
    }

    fn runs(steps: &[Step]) -> Vec<usize> {
        steps
            .iter()
            .filter_map(|a| match a {
                Step::Run { index, .. } => Some(*index),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn with_stop_after_failure_a_failed_job_frees_no_slot_for_another() {
        let mut core = Core::new(
            vec![3.0, 2.0, 1.0],
            &Policy {
                stop_after_failure: true,
                ..policy(1, false, 3)
            },
        );
        let mut a = Vec::new();
        for i in 0..3 {
            a.extend(core.hello(i).unwrap());
        }
        assert_eq!(runs(&a), [0]);
        let a = core.exited(0, status(3), Some("exit status 3".into()));
        assert!(
            runs(&a).is_empty(),
            "nothing starts after the failure: {a:?}"
        );
        for index in [0, 1, 2] {
            assert!(
                a.iter().any(
                    |x| matches!(x, Step::Finish { index: i, code } if *i == index && *code != 0)
                ),
                "job {index} is told to finish: {a:?}"
            );
        }
        assert_eq!(core.counts(), (0, 1));
    }

    #[test]
    fn the_costliest_ready_job_gets_each_slot() {
        let mut core = Core::new(vec![1.0, 5.0, 3.0, 5.0], &policy(1, true, 4));
        let mut asked = 0;
        for i in 0..4 {
            let a = core.hello(i).unwrap();
            for action in &a {
                if let Step::Request(n) = action {
                    asked += n;
                }
            }
            if i < 3 {
                assert!(runs(&a).is_empty(), "gathering: {a:?}");
            } else {
                // All four connected: the own slot goes to the costliest (ties: lower index).
                assert_eq!(runs(&a), [1]);
            }
        }
        assert_eq!(
            asked, 3,
            "the three others wait for slots asked of the supply"
        );
        assert_eq!(runs(&core.slot_arrived()), [3]);
        assert_eq!(runs(&core.exited(1, status(0), None)), [2]);
        assert_eq!(runs(&core.slot_arrived()), [0]);
        // Nothing waits any more: the last slot to arrive goes back.
        let a = core.exited(3, status(0), None);
        assert!(a.contains(&Step::Release(1)), "{a:?}");
        assert!(core.hello(3).is_none(), "one launcher per job");
    }

    #[test]
    fn gathering_ends_after_its_time_even_if_launchers_are_missing() {
        let mut core = Core::new(vec![1.0, 2.0], &policy(1, false, 2));
        assert!(runs(&core.hello(0).unwrap()).is_empty());
        assert_eq!(runs(&core.gathered()), [0]);
    }

    #[test]
    fn a_failure_through_the_wrapper_runs_again_locally_on_the_same_slot() {
        let mut p = policy(1, false, 1);
        p.wrapped = true;
        p.fallback = true;
        let mut core = Core::new(vec![1.0], &p);
        let a = core.hello(0).unwrap();
        assert_eq!(
            a,
            [Step::Run {
                index: 0,
                wrapped: true,
                slot: Slot::Own,
                attempt: 0
            }]
        );
        let a = core.exited(0, status(0), Some("it wrote an empty a.o".into()));
        assert_eq!(
            a,
            [Step::Run {
                index: 0,
                wrapped: false,
                slot: Slot::Own,
                attempt: 1
            }]
        );
        let a = core.exited(0, status(2), Some("exit status 2".into()));
        assert_eq!(a, [Step::Finish { index: 0, code: 2 }]);
        assert_eq!(core.records()[0].ran(), Ran::Fallback);
    }

    #[test]
    fn cancelling_finishes_waiting_launchers_and_stops_running_commands() {
        let mut core = Core::new(vec![1.0, 2.0, 3.0], &policy(1, true, 1));
        core.hello(0);
        core.hello(1);
        let a = core.cancel(15);
        assert!(a.contains(&Step::Cancel {
            index: 0,
            signal: 15
        }));
        assert!(a.contains(&Step::Finish {
            index: 1,
            code: 143
        }));
        assert_eq!(
            core.hello(2),
            Some(vec![Step::Finish {
                index: 2,
                code: 143
            }])
        );
        // A slot that arrives now is given straight back.
        assert_eq!(core.slot_arrived(), [Step::Release(1)]);
        core.exited(0, status(143), Some("killed".into()));
        assert_eq!(core.records()[1].ran(), Ran::NotRun);
    }

    #[test]
    fn a_launcher_that_dies_frees_its_slot() {
        let mut core = Core::new(vec![2.0, 1.0], &policy(1, false, 1));
        assert_eq!(runs(&core.hello(0).unwrap()), [0]);
        assert!(runs(&core.hello(1).unwrap()).is_empty());
        assert_eq!(runs(&core.gone(0)), [1]);
        assert_eq!(core.records()[0].ran(), Ran::NotRun);
    }

    fn remote_policy(own: usize, remote_jobs: usize, fallback: bool, n: usize) -> Policy {
        Policy {
            remote: vec![true; n],
            remote_jobs,
            remote_fallback: fallback,
            stop_after_failure: false,
            ..policy(own, false, n)
        }
    }

    fn remote_end(problem: Option<&str>) -> crate::job::outcome::RemoteEnd {
        crate::job::outcome::RemoteEnd {
            status: status(0),
            problem: problem.map(String::from),
            info: Default::default(),
            stderr: Vec::new(),
        }
    }

    fn remotes(steps: &[Step]) -> Vec<usize> {
        steps
            .iter()
            .filter_map(|a| match a {
                Step::Remote { index, .. } => Some(*index),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn remote_jobs_take_no_local_slot_and_are_bounded_by_remote_jobs() {
        let mut core = Core::new(vec![1.0, 4.0, 3.0, 2.0], &remote_policy(1, 2, true, 4));
        let mut all = Vec::new();
        for i in 0..4 {
            all.extend(core.hello(i).unwrap());
        }
        // Costliest first onto the remote lane, at most 2 there; the own slot stays free.
        assert_eq!(remotes(&all), [1, 2]);
        assert!(runs(&all).is_empty(), "the local slot is not used: {all:?}");
        assert!(!all.iter().any(|a| matches!(a, Step::Request(_))));
        let next = core.remote_done(1, remote_end(None));
        assert_eq!(next[0], Step::Finish { index: 1, code: 0 });
        assert_eq!(remotes(&next), [3]);
        assert_eq!(core.records()[1].ran(), Ran::Remote);
    }

    #[test]
    fn a_remote_failure_runs_the_job_here_on_a_slot_unless_fallback_is_off() {
        let mut core = Core::new(vec![1.0], &remote_policy(1, 4, true, 1));
        assert_eq!(remotes(&core.hello(0).unwrap()), [0]);
        let again = core.remote_done(0, remote_end(Some("remote: exit status 3")));
        assert_eq!(
            again,
            [Step::Run {
                index: 0,
                wrapped: false,
                slot: Slot::Own,
                attempt: 1
            }]
        );
        core.exited(0, status(0), None);
        assert_eq!(core.records()[0].ran(), Ran::Fallback);

        let mut core = Core::new(vec![1.0], &remote_policy(1, 4, false, 1));
        core.hello(0);
        let end = core.remote_done(0, remote_end(Some("remote: exit status 3")));
        assert_eq!(end, [Step::Finish { index: 0, code: 1 }]);
    }

    #[test]
    fn cancelling_stops_the_remote_jobs_and_finishes_their_launchers() {
        let mut core = Core::new(vec![1.0, 2.0], &remote_policy(1, 4, true, 2));
        core.hello(0);
        core.hello(1);
        let steps = core.cancel(libc::SIGINT);
        assert_eq!(steps[0], Step::CancelRemote);
        assert!(steps.contains(&Step::Finish {
            index: 0,
            code: 130
        }));
        assert!(steps.contains(&Step::Finish {
            index: 1,
            code: 130
        }));
        // A late answer from the server changes nothing.
        assert!(core.remote_done(0, remote_end(None)).is_empty());
        assert_eq!(core.records()[0].ran(), Ran::NotRun);
    }
}
