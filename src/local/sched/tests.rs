//! The scheduler's decisions, event by event, with no process, socket or file.

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
        hosts: 0,
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
            a.iter()
                .any(|x| matches!(x, Step::Finish { index: i, code } if *i == index && *code != 0)),
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

#[test]
fn remote_jobs_start_before_their_launchers_and_launchers_learn_the_end_when_they_come() {
    // Four jobs, three launchers expected: gathering holds local jobs, not remote ones.
    let policy = Policy {
        expected: 4,
        ..remote_policy(1, 2, true, 4)
    };
    let mut core = Core::new(vec![1.0, 4.0, 3.0, 2.0], &policy);
    let started = core.start();
    assert_eq!(remotes(&started), [1, 2], "costliest first, at most 2");
    // Job 1 ends well before its launcher comes: nothing to tell yet.
    let ended = core.remote_done(1, remote_end(None));
    assert!(
        !ended.iter().any(|s| matches!(s, Step::Finish { .. })),
        "{ended:?}"
    );
    assert_eq!(remotes(&ended), [3]);
    // Its launcher comes: it finishes at once, well.
    assert_eq!(core.hello(1).unwrap(), [Step::Finish { index: 1, code: 0 }]);
    assert!(core.hello(1).is_none(), "one launcher per job");
    // Job 2 fails remotely before its launcher comes: it runs here once the launcher does.
    let failed = core.remote_done(2, remote_end(Some("remote: exit status 3")));
    assert!(
        runs(&failed).is_empty(),
        "no launcher to run it yet: {failed:?}"
    );
    let mut steps = core.hello(2).unwrap();
    // Local jobs wait for the launchers to gather (or their time to pass).
    steps.extend(core.gathered());
    assert_eq!(runs(&steps), [2]);
    // Job 3's launcher comes while it runs remotely: it waits for the end.
    assert!(core.hello(3).unwrap().is_empty());
    let ended = core.remote_done(3, remote_end(None));
    assert!(
        ended.contains(&Step::Finish { index: 3, code: 0 }),
        "{ended:?}"
    );
}

#[test]
fn a_cancel_before_a_remote_job_launcher_comes_is_told_when_it_comes() {
    let mut core = Core::new(vec![1.0, 2.0], &remote_policy(1, 1, true, 2));
    assert_eq!(remotes(&core.start()), [1]);
    let steps = core.cancel(libc::SIGINT);
    assert!(steps.contains(&Step::CancelRemote), "{steps:?}");
    assert!(
        !steps.iter().any(|s| matches!(s, Step::Finish { .. })),
        "{steps:?}"
    );
    let code = crate::local::process::exit_code(libc::SIGINT);
    assert_eq!(core.hello(1).unwrap(), [Step::Finish { index: 1, code }]);
    assert_eq!(core.hello(0).unwrap(), [Step::Finish { index: 0, code }]);
}

/// Jobs through a wrapper that sends them to hosts take host slots, not local ones: as many
/// run at once as the hosts take, with one local slot; one that fails on a host runs again
/// here on the local slot, unwrapped, and a host slot it frees goes to the next job.
#[test]
fn host_jobs_take_host_slots_and_fall_back_onto_local_ones() {
    let mut p = policy(1, false, 4);
    p.wrapped = true;
    p.fallback = true;
    p.hosts = 3;
    let mut core = Core::new(vec![4.0, 3.0, 2.0, 1.0], &p);
    let mut steps = Vec::new();
    for i in 0..4 {
        steps.extend(core.hello(i).unwrap());
    }
    let hosted = |steps: &[Step]| -> Vec<(usize, bool, Slot)> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Run {
                    index,
                    wrapped,
                    slot,
                    ..
                } => Some((*index, *wrapped, *slot)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        hosted(&steps),
        [
            (0, true, Slot::Host),
            (1, true, Slot::Host),
            (2, true, Slot::Host)
        ],
        "the costliest three on the hosts, none on the local slot"
    );
    let failed = core.exited(0, status(1), Some("exit status 1".into()));
    assert_eq!(
        hosted(&failed),
        [(3, true, Slot::Host), (0, false, Slot::Own)],
        "the next job takes the freed host slot; the failed one runs here"
    );
    let done = core.exited(1, status(0), None);
    assert_eq!(done, [Step::Finish { index: 1, code: 0 }]);
    let here = core.exited(0, status(0), None);
    assert_eq!(here, [Step::Finish { index: 0, code: 0 }]);
    assert_eq!(core.records()[0].ran(), crate::job::outcome::Ran::Fallback);
    assert_eq!(core.records()[1].ran(), crate::job::outcome::Ran::Wrapper);
}
