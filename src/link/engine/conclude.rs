//! Conclude: the last step — warnings, failures worded once, the report, trace, log and
//! history written, the summary line.
//!
//! It knows what a finished link tells the user and remembers; it runs nothing.

use super::prepare::Prepared;
use super::records::{log, write_records};
use super::settle::Settled;
use super::tool::Tool;
use super::Options;
use crate::job::outcome::{Outcome, Ran};
use crate::job::parse::JobFile;
use crate::local::process::{self, Watch};
use crate::report::history::History;
use crate::report::record;
use crate::report::{self, Fail};
use std::fs;
use std::io::IsTerminal;

/// Says, for each job that the server executed (not from its action cache), why
/// (`RemoteInfo::miss`).
fn explain_misses(
    options: &Options,
    history: Option<&History>,
    file: &JobFile<'_>,
    outcomes: &mut [Outcome],
) {
    for o in outcomes.iter_mut().filter(|o| o.ran == Ran::Remote) {
        let Some(r) = o.remote.as_mut() else { continue };
        let plain = |why: &str| (why.to_string(), why.to_string());
        let (why, kind) = match history {
            _ if options.remote.as_ref().is_some_and(|r| !r.cache) => {
                plain("the action cache is off (--remote-no-cache)")
            }
            Some(h) => {
                let miss = h.why_missed(file, o.index, &r.ingredients);
                (miss.reason, miss.kind)
            }
            None => plain("no history to compare with"),
        };
        (r.miss, r.miss_kind) = match r.key.strip_prefix("names: ") {
            Some(names) => (
                Some(format!("keyed by names ({names}); {why}")),
                Some(format!("keyed by names; {kind}")),
            ),
            None => (Some(why), Some(kind)),
        };
    }
}

pub(super) fn conclude(p: Prepared<'_>, mut s: Settled, watch: &Watch) -> Result<(), Fail> {
    let Prepared {
        options,
        file,
        wrapper,
        input_bytes,
        mut history,
        tool,
        ..
    } = p;
    for w in &s.warnings {
        report::warning(w);
    }
    explain_misses(options, history.as_ref(), &file, &mut s.outcomes);
    let record = record::build(&record::RunInfo {
        file: &file,
        wrapper: &wrapper,
        outcomes: &s.outcomes,
        input_bytes: &input_bytes,
        backend: tool.as_ref().map_or("none", Tool::name),
        start: s.start,
        end: s.end,
    });
    let record = record::LinkRecord {
        remote: s.remote.clone(),
        ..record
    };
    let tool_ok = match &s.tool {
        Some(Ok(status)) => status.success(),
        Some(Err(_)) => false,
        None => true,
    };
    let all_ok = s.outcomes.iter().all(Outcome::ok);
    let signal = s.signal.or_else(|| watch.received());
    let result = if let Some(sig) = signal {
        Err(Fail::new(
            process::exit_code(sig),
            format!("run backend jobs: interrupted by signal {sig}"),
        ))
    } else if tool_ok && all_ok {
        succeeded(options, &file, &s.outcomes, &record, history.as_mut());
        Ok(())
    } else {
        Err(failed(&file, &wrapper, &s, tool.as_ref()))
    };
    // Records come after the failures are printed, and never fail the link.
    write_records(options, &record);
    log(options, &record, result.is_ok());
    match tool {
        Some(tool) if options.keep => report::note(&format!("kept {}", tool.state.keep())),
        None if options.keep && signal.is_none() => {
            report::note("kept nothing: every job came from the action cache, no build file")
        }
        _ => {}
    }
    result
}

/// A link whose every job ended well: the jobs' warnings and fallbacks, the history, the summary.
fn succeeded(
    options: &Options,
    file: &JobFile<'_>,
    outcomes: &[Outcome],
    record: &record::LinkRecord,
    history: Option<&mut History>,
) {
    report::job_warnings(file, outcomes);
    report::fallbacks(file, outcomes);
    if let Some(h) = history {
        // A job from the action cache took no time of its own to remember.
        let seconds: Vec<Option<f64>> = (record.jobs.iter().zip(outcomes))
            .map(|(j, o)| j.seconds.filter(|_| o.ran != Ran::RemoteCache))
            .collect();
        // What went into each action the server now holds (ran there with the cache on, or
        // came from it).
        let cached = options.remote.as_ref().is_none_or(|r| r.cache);
        let actions: Vec<_> = outcomes
            .iter()
            .map(|o| match o.ran {
                Ran::Remote if cached => o.remote.as_ref().map(|r| &*r.ingredients),
                Ran::RemoteCache => o.remote.as_ref().map(|r| &*r.ingredients),
                _ => None,
            })
            .collect();
        if let Err(e) = h.record(file, &seconds, &actions) {
            report::warning(&format!("write the history: {e}"));
        }
    }
    let show = options.summary || (!options.quiet && std::io::stderr().is_terminal());
    if show && !options.quiet {
        report::note(&record::summary(record));
    }
}

/// The failure of a link whose build tool or some job did not end well, worded once.
fn failed(file: &JobFile<'_>, wrapper: &[String], s: &Settled, tool: Option<&Tool>) -> Fail {
    let tool_log = tool
        .and_then(|t| fs::read_to_string(t.state.tool_log()).ok())
        .unwrap_or_default();
    let tool_status = match &s.tool {
        Some(Ok(status)) if !status.success() => Some(process::describe(status)),
        Some(Err(e)) => Some(e.clone()),
        _ => None,
    };
    report::failures(
        file,
        wrapper,
        &s.outcomes,
        tool.map_or("none", Tool::name),
        tool_status,
        &tool_log,
    )
}
