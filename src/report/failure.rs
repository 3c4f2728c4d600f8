//! Failure: turns failures and job outcomes into the text the user reads, and exit codes.
//!
//! It knows how messages look ("dtlto-bridge: error: verb object: cause") and which exit code
//! each kind of failure gets; it does not decide what failed.

use crate::job::outcome::Outcome;
use crate::job::parse::JobFile;
use crate::render::escape::shell_line;
use std::fmt::Write;

/// A job or the build tool failed.
pub const EXIT_FAILED: i32 = 1;
/// Bad usage, or a job file that is malformed or names missing inputs.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Something the run needs is missing from the environment.
pub const EXIT_ENVIRONMENT: i32 = 3;

/// An error on its way to the user: the message and the exit code it ends with.
#[derive(Debug)]
pub struct Fail {
    pub code: i32,
    pub message: String,
}

impl Fail {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Fail {
            code,
            message: message.into(),
        }
    }

    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::new(EXIT_BAD_INPUT, message)
    }

    pub fn environment(message: impl Into<String>) -> Self {
        Self::new(EXIT_ENVIRONMENT, message)
    }

    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(EXIT_FAILED, message)
    }
}

/// Writes to stderr, every line prefixed with `dtlto-bridge: ` (the linker mixes our lines
/// into its own log), never failing: a closed or full stderr must not turn a link into a crash.
pub fn say(kind: &str, message: &str) {
    use std::io::Write;
    let mut text = String::with_capacity(message.len() + 32);
    for (i, line) in message.lines().enumerate() {
        if i == 0 {
            let _ = writeln!(text, "dtlto-bridge: {kind}{line}");
        } else {
            let _ = writeln!(text, "dtlto-bridge: {line}");
        }
    }
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Prints an error the way every error of this program is printed.
pub fn error(message: &str) {
    say("error: ", message);
}

pub fn warning(message: &str) {
    say("warning: ", message);
}

/// A line of information (the summary, where a kept directory is).
pub fn note(message: &str) {
    say("", message);
}

/// Writes to stdout (doctor's report), never failing.
pub fn print(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn indent(text: &str, out: &mut String) {
    for line in text.trim_end().lines() {
        let _ = writeln!(out, "    {line}");
    }
}

/// Describes one failed job: what went wrong, its outputs, its command and its stderr.
pub fn failed_job(file: &JobFile, wrapper: &[String], o: &Outcome) -> String {
    let job = &file.jobs[o.index];
    let what = match (&o.status, &o.problem) {
        (None, _) => "did not finish".to_string(),
        (Some(_), Some(problem)) => problem.clone(),
        (Some(s), None) => s.describe(),
    };
    let mut out = format!(
        "run job {} ({}): {what}\n",
        o.index,
        shell_line(&job.outputs)
    );
    if let Some(fb) = &o.fallback {
        let (how, who) = first_run(o);
        let _ = writeln!(out, "  {how}: {}; then locally:", fb.reason);
        if !fb.stderr.trim().is_empty() {
            let _ = writeln!(out, "  {who} stderr:");
            indent(&fb.stderr, &mut out);
        }
    }
    let command: Vec<&str> = wrapper
        .iter()
        .map(String::as_str)
        .chain(job.command.words().map(|w| w.as_ref()))
        .collect();
    let _ = writeln!(out, "  command: {}", shell_line(&command));
    if o.stderr.trim().is_empty() {
        out.push_str("  stderr: (empty)\n");
    } else {
        out.push_str("  stderr:\n");
        indent(&o.stderr, &mut out);
    }
    out.trim_end().to_string()
}

/// The report of a run with failures: each failed job in full, then one line that sums up.
/// `tool_status` is None when the build tool itself succeeded.
pub fn failures(
    file: &JobFile,
    wrapper: &[String],
    outcomes: &[Outcome],
    tool: &str,
    tool_status: Option<String>,
    tool_log: &str,
) -> Fail {
    let failed: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| !o.ok() && o.status.is_some())
        .collect();
    let not_run = outcomes.iter().filter(|o| o.status.is_none()).count();
    if failed.is_empty() {
        let mut text = match tool_status.as_deref() {
            Some(status) => format!("run {tool}: {status} before any job failed; its output:\n"),
            None => {
                format!("run {tool}: it exited 0, but {not_run} job(s) did not run; its output:\n")
            }
        };
        indent(tool_log, &mut text);
        return Fail::failed(text.trim_end());
    }
    for o in &failed {
        error(&failed_job(file, wrapper, o));
    }
    let mut summary = format!(
        "run backend jobs: {} of {} failed",
        failed.len(),
        outcomes.len()
    );
    if not_run > 0 {
        let _ = write!(summary, ", {not_run} not run");
    }
    if let Some(status) = tool_status {
        let _ = write!(summary, " ({tool}: {status})");
    }
    Fail::failed(summary)
}

/// Passes on what successful jobs wrote to stderr (compiler warnings).
pub fn job_warnings(file: &JobFile, outcomes: &[Outcome]) {
    for o in outcomes
        .iter()
        .filter(|o| o.ok() && !o.stderr.trim().is_empty())
    {
        let mut text = format!(
            "job {} ({}) wrote to stderr:\n",
            o.index,
            shell_line(&file.jobs[o.index].outputs)
        );
        indent(&o.stderr, &mut text);
        warning(text.trim_end());
    }
}

/// How a job that fell back first ran, and who wrote that run's stderr.
fn first_run(o: &Outcome) -> (&'static str, &'static str) {
    if o.remote.is_some() {
        ("remotely", "remote command")
    } else {
        ("through the wrapper", "wrapper")
    }
}

/// Tells which jobs fell back to a local run, and why.
pub fn fallbacks(file: &JobFile, outcomes: &[Outcome]) {
    // Jobs that fell back for one reason, with nothing on stderr (a server found down fails
    // every job left alike), are one warning.
    let mut alike: Vec<(&str, &str, Vec<usize>)> = Vec::new();
    for o in outcomes {
        let Some(fb) = &o.fallback else {
            continue;
        };
        let (how, who) = first_run(o);
        if fb.stderr.trim().is_empty() {
            match alike
                .iter_mut()
                .find(|(r, h, _)| *r == fb.reason && *h == how)
            {
                Some((_, _, jobs)) => jobs.push(o.index),
                None => alike.push((&fb.reason, how, vec![o.index])),
            }
            continue;
        }
        let mut text = format!(
            "job {} ({}) failed {how} ({}) and was run again locally; the {who} said:\n",
            o.index,
            shell_line(&file.jobs[o.index].outputs),
            fb.reason
        );
        indent(&fb.stderr, &mut text);
        warning(text.trim_end());
    }
    for (reason, how, jobs) in alike {
        let named = |i: &usize| format!("job {i} ({})", shell_line(&file.jobs[*i].outputs));
        let text = match jobs.as_slice() {
            [one] => format!(
                "{} failed {how} ({reason}) and was run again locally",
                named(one)
            ),
            _ => {
                let mut list: Vec<String> = jobs.iter().take(3).map(named).collect();
                if jobs.len() > 3 {
                    list.push(format!("{} more", jobs.len() - 3));
                }
                format!(
                    "{} jobs ({}) failed {how} ({reason}) and were run again locally",
                    jobs.len(),
                    list.join(", ")
                )
            }
        };
        warning(&text);
    }
}
