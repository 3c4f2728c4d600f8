//! Sched: the link's scheduler, the one place that decides which ready job runs next
//! (costliest first), on which slot, and what happens when it ends (it finishes, or runs again
//! locally when it failed through the wrapper).
//!
//! `Core` is that decision logic alone — events in, steps out — and knows no sockets,
//! processes or files; `server` carries the steps out.

use crate::job::outcome::{Fallback, Ran, Status};
use crate::local::slots::Slot;
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
    /// How many jobs may be on the wrapper's hosts at once, each sent as a bundle without a
    /// local slot (0: jobs through the wrapper take local slots).
    pub hosts: usize,
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
    /// Ready jobs that go to the wrapper's hosts first.
    ready_host: BinaryHeap<Entry>,
    hosts: usize,
    host_running: usize,
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
    /// Whether each job's launcher said hello: a remote job starts before it does.
    launcher: Vec<bool>,
    /// What each job whose launcher had not come yet when it ended is told when it comes.
    owed: Vec<Option<i32>>,
    /// Whether remote jobs were started before their launchers came (`start`).
    early: bool,
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
            ready_host: BinaryHeap::new(),
            hosts: policy.hosts,
            host_running: 0,
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
            launcher: vec![false; n],
            owed: vec![None; n],
            early: false,
        }
    }

    /// Starts the jobs that may run remotely, costliest first, before their launchers come:
    /// a remote job needs no local slot, and its launcher only waits for its end.
    pub fn start(&mut self) -> Vec<Step> {
        if self.remote_jobs == 0 {
            return Vec::new();
        }
        self.early = true;
        for index in 0..self.phase.len() {
            if self.remote.get(index) == Some(&true) && self.phase[index] == Phase::Waiting {
                self.phase[index] = Phase::Ready;
                self.ready_remote.push(Entry {
                    cost: self.cost[index],
                    index,
                });
            }
        }
        self.dispatch()
    }

    /// Tells job `index`'s launcher to finish with `code`, or, when it has not come yet, when
    /// it comes.
    fn finish(&mut self, index: usize, code: i32) -> Option<Step> {
        if self.launcher[index] {
            Some(Step::Finish { index, code })
        } else {
            self.owed[index] = Some(code);
            None
        }
    }

    /// One more launcher came: gathering ends once every launcher expected has.
    fn arrived(&mut self) {
        self.connected += 1;
        if self.connected >= self.expected {
            self.gathering = false;
        }
    }

    /// The launcher of a job started before it came said hello.
    fn late_hello(&mut self, index: usize) -> Vec<Step> {
        self.launcher[index] = true;
        self.arrived();
        match self.phase[index] {
            Phase::Done => {
                let code = self.owed[index].take().unwrap_or(0);
                vec![Step::Finish { index, code }]
            }
            // It failed remotely and runs here: its launcher runs it.
            Phase::Ready if !self.records[index].attempts.is_empty() => {
                self.ready.push(Entry {
                    cost: self.cost[index],
                    index,
                });
                self.dispatch()
            }
            _ => Vec::new(),
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
        let early = self.phase.get(index).is_some_and(|p| *p != Phase::Waiting)
            && self.remote.get(index) == Some(&true)
            && !self.launcher[index];
        if early {
            return Some(self.late_hello(index));
        }
        if self.phase.get(index) != Some(&Phase::Waiting) {
            return None;
        }
        self.launcher[index] = true;
        if let Some(sig) = self.cancelled {
            self.phase[index] = Phase::Done;
            return Some(vec![Step::Finish {
                index,
                code: crate::local::process::exit_code(sig),
            }]);
        }
        self.phase[index] = Phase::Ready;
        let entry = Entry {
            cost: self.cost[index],
            index,
        };
        if self.remote.get(index) == Some(&true) && self.remote_jobs > 0 {
            self.ready_remote.push(entry);
        } else if self.hosts > 0 && self.wrapped {
            self.ready_host.push(entry);
        } else {
            self.ready.push(entry);
        }
        self.arrived();
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
        if slot == Slot::Host {
            self.host_running -= 1;
            if failed && self.fallback && self.cancelled.is_none() {
                // It runs again here, on a local slot when one is free.
                self.phase[index] = Phase::Ready;
                self.running -= 1;
                self.ready.push(Entry {
                    cost: self.cost[index],
                    index,
                });
                return self.dispatch();
            }
        }
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
            // Without its launcher yet, it waits for it (`late_hello`).
            if self.launcher[index] {
                self.ready.push(Entry {
                    cost: self.cost[index],
                    index,
                });
            }
            return self.dispatch();
        }
        record.finished = true;
        self.phase[index] = Phase::Done;
        self.running -= 1;
        self.done += 1;
        let mut steps: Vec<Step> = self.finish(index, i32::from(failed)).into_iter().collect();
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
                if slot == Slot::Host {
                    self.host_running -= 1;
                }
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
                    let code = crate::local::process::exit_code(signal);
                    steps.extend(self.finish(index, code));
                }
                Phase::Running { .. } => steps.push(Step::Cancel { index, signal }),
                _ => {}
            }
        }
        self.ready.clear();
        self.ready_remote.clear();
        self.ready_host.clear();
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
                steps.extend(self.finish(index, code));
            }
        }
        self.ready.clear();
        self.ready_remote.clear();
        self.ready_host.clear();
        steps
    }

    fn end(&mut self, index: usize, slot: Slot) {
        self.phase[index] = Phase::Done;
        self.running -= 1;
        self.done += 1;
        if slot != Slot::Host {
            self.free.push(slot);
        }
    }

    /// Starts the costliest ready jobs on free slots, then asks for the slots still needed or
    /// gives back those no job needs.
    fn dispatch(&mut self) -> Vec<Step> {
        let mut steps = Vec::new();
        let going = self.cancelled.is_none() && !self.stopped;
        // Remote jobs started early are all known: no launcher needs gathering for them.
        if going && (!self.gathering || self.early) {
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
        }
        if going && !self.gathering {
            while self.host_running < self.hosts {
                let Some(Entry { index, .. }) = self.ready_host.pop() else {
                    break;
                };
                if self.phase[index] != Phase::Ready {
                    continue;
                }
                self.phase[index] = Phase::Running {
                    slot: Slot::Host,
                    wrapped: true,
                };
                self.host_running += 1;
                self.running += 1;
                steps.push(Step::Run {
                    index,
                    wrapped: true,
                    slot: Slot::Host,
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
mod tests;
