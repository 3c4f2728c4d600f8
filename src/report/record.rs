//! Record: what each job of a run did, as a summary line, a JSON report and a Chrome trace.
//!
//! It knows the formats (the report's fields, Chrome's trace-event JSON) and how to put jobs on
//! slot lanes; it does not run anything or decide what failed.

use crate::job::outcome::Outcome;
use crate::job::parse::JobFile;
use serde::Serialize;

/// One job as the report shows it.
#[derive(Debug, Serialize)]
pub struct JobRecord {
    pub index: usize,
    pub outputs: Vec<String>,
    /// The command as first run: the wrapper's words, then the job's.
    pub command: Vec<String>,
    /// Seconds since the Unix epoch; absent for a job that did not run to its end.
    pub start: Option<f64>,
    pub end: Option<f64>,
    pub seconds: Option<f64>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub error: Option<String>,
    /// "local", "wrapper", "remote", "remote cache", "fallback" (failed through the wrapper or
    /// remotely, then ran locally) or "not run".
    pub ran: &'static str,
    /// Where and how it ran remotely (its first run), if it went there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<crate::job::outcome::RemoteInfo>,
    pub fallback_reason: Option<String>,
    /// Where its bundle went, if it was sent to the wrapper's hosts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<crate::job::outcome::Sent>,
    pub ok: bool,
    pub input_bytes: u64,
    pub imports: usize,
}

#[derive(Debug, Serialize)]
pub struct Totals {
    pub jobs: usize,
    pub succeeded: usize,
    /// Jobs that ran and failed (those that never ran are `not_run`).
    pub failed: usize,
    pub not_run: usize,
    pub via_wrapper: usize,
    pub local: usize,
    pub remote: usize,
    pub remote_cache: usize,
    pub fell_back: usize,
    pub input_bytes: u64,
    /// The jobs' own time, added up.
    pub job_seconds: f64,
    /// Jobs compiled on each of the wrapper's hosts, by the host's name.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub hosts: std::collections::BTreeMap<String, usize>,
    /// The bytes of the bundles that reached a host, added up (each job's imports are in its
    /// own bundle).
    #[serde(skip_serializing_if = "is_zero")]
    pub bundle_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A whole run: the `--report` file.
#[derive(Debug, Serialize)]
pub struct LinkRecord {
    pub version: u32,
    pub linker_output: String,
    pub backend: &'static str,
    pub start: f64,
    pub end: f64,
    pub wall_seconds: f64,
    pub totals: Totals,
    /// What the remote path sent and fetched, when a server was used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<crate::job::outcome::RemoteTotals>,
    pub jobs: Vec<JobRecord>,
}

pub struct RunInfo<'a> {
    pub file: &'a JobFile<'a>,
    pub wrapper: &'a [String],
    pub outcomes: &'a [Outcome],
    pub input_bytes: &'a [u64],
    pub backend: &'static str,
    pub start: f64,
    pub end: f64,
}

pub fn build(run: &RunInfo<'_>) -> LinkRecord {
    let jobs: Vec<JobRecord> = run
        .outcomes
        .iter()
        .map(|o| {
            let job = &run.file.jobs[o.index];
            let s = o.status.as_ref();
            JobRecord {
                index: o.index,
                outputs: job.outputs.iter().map(|o| o.to_string()).collect(),
                command: run
                    .wrapper
                    .iter()
                    .map(String::as_str)
                    .chain(job.command.words().map(|w| w.as_ref()))
                    .map(str::to_string)
                    .collect(),
                start: s.and(o.start),
                end: s.map(|s| s.end),
                seconds: s.and_then(|s| o.start.map(|start| s.end - start)),
                exit_code: s.and_then(|s| s.code),
                signal: s.and_then(|s| s.signal),
                error: s.and_then(|s| s.spawn_error.clone()),
                ran: o.ran.name(),
                remote: o.remote.clone(),
                fallback_reason: o.fallback.as_ref().map(|f| f.reason.clone()),
                sent: o.sent.clone(),
                ok: o.ok(),
                input_bytes: run.input_bytes[o.index],
                imports: job.imports,
            }
        })
        .collect();
    let count = |ran: &str| jobs.iter().filter(|j| j.ran == ran).count();
    let totals = Totals {
        jobs: jobs.len(),
        succeeded: jobs.iter().filter(|j| j.ok).count(),
        failed: jobs.iter().filter(|j| !j.ok && j.ran != "not run").count(),
        not_run: count("not run"),
        via_wrapper: count("wrapper"),
        local: count("local"),
        remote: count("remote"),
        remote_cache: count("remote cache"),
        fell_back: count("fallback"),
        input_bytes: jobs.iter().map(|j| j.input_bytes).sum(),
        job_seconds: jobs.iter().filter_map(|j| j.seconds).sum(),
        hosts: hosts(&jobs),
        bundle_bytes: (jobs.iter().filter_map(|j| j.sent.as_ref()))
            .filter(|s| s.shipped())
            .map(|s| s.bytes)
            .sum(),
    };
    LinkRecord {
        version: 1,
        linker_output: run.file.linker_output.clone(),
        backend: run.backend,
        start: run.start,
        end: run.end,
        wall_seconds: run.end - run.start,
        totals,
        remote: None,
        jobs,
    }
}

/// Jobs compiled on each host (a job that fell back counts where it finally ran: here).
fn hosts(jobs: &[JobRecord]) -> std::collections::BTreeMap<String, usize> {
    let mut by = std::collections::BTreeMap::new();
    let on_host = jobs.iter().filter(|j| j.ran == "wrapper");
    for host in on_host.filter_map(|j| j.sent.as_ref()?.host.clone()) {
        *by.entry(host).or_insert(0) += 1;
    }
    by
}

/// The line a run appends to `--log FILE`: where, what, how many jobs and where they ran.
pub fn log_line(r: &LinkRecord, dir: &std::path::Path, ok: bool) -> String {
    serde_json::json!({
        "version": 1,
        "time": r.end,
        "dir": dir.to_string_lossy(),
        "linker_output": r.linker_output,
        "ok": ok,
        "totals": r.totals,
    })
    .to_string()
}

/// Appends `line` to `path` in one write (concurrent links may share the file).
pub fn append_line(path: &camino::Utf8Path, line: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(format!("{line}\n").as_bytes())
}

/// A `--report` or `--trace` path with `{output}` replaced by the file name of the link's
/// output, so that one setting serves every link of a build.
pub fn path_for(path: &camino::Utf8Path, linker_output: &str) -> camino::Utf8PathBuf {
    let name = camino::Utf8Path::new(linker_output)
        .file_name()
        .unwrap_or("a.out");
    path.as_str().replace("{output}", name).into()
}

/// The one line printed at the end of a successful run.
pub fn summary(r: &LinkRecord) -> String {
    let t = &r.totals;
    let mut line = match &r.remote {
        Some(remote) => format!(
            "{} job{}: {} remote, {} from the remote cache, {} fell back, {} local; uploaded \
             {:.1} MB; in {:.2}s with {}",
            t.jobs,
            if t.jobs == 1 { "" } else { "s" },
            t.remote,
            t.remote_cache,
            t.fell_back,
            t.local,
            remote.uploaded_bytes as f64 / 1e6,
            r.wall_seconds,
            r.backend
        ),
        None => format!(
            "{} job{} ({} local, {} via wrapper, {} fell back) in {:.2}s with {}",
            t.jobs,
            if t.jobs == 1 { "" } else { "s" },
            t.local,
            t.via_wrapper,
            t.fell_back,
            r.wall_seconds,
            r.backend
        ),
    };
    if r.jobs.iter().any(|j| j.sent.is_some()) {
        let hosts: Vec<String> = (t.hosts.iter()).map(|(h, n)| format!("{h} {n}")).collect();
        let bytes = match t.bundle_bytes {
            b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
            b => format!("{:.1} kB", b as f64 / 1e3),
        };
        let hosts = match hosts.is_empty() {
            true => "none".to_string(),
            false => hosts.join(", "),
        };
        line.push_str(&format!("; on hosts: {hosts}; {bytes} of bundles shipped"));
    }
    if let Some(slow) = r
        .jobs
        .iter()
        .filter(|j| j.seconds.is_some())
        .max_by(|a, b| {
            a.seconds
                .partial_cmp(&b.seconds)
                .unwrap_or(std::cmp::Ordering::Equal)
        })
    {
        line.push_str(&format!(
            "; slowest: job {} ({}) {:.2}s",
            slow.index,
            slow.outputs[0],
            slow.seconds.unwrap_or_default()
        ));
    }
    if let Some(misses) = misses(r) {
        line.push_str(&misses);
    }
    if !r.jobs.is_empty() {
        let max = r.jobs.iter().map(|j| j.imports).max().unwrap_or(0);
        let avg = r.jobs.iter().map(|j| j.imports).sum::<usize>() as f64 / r.jobs.len() as f64;
        line.push_str(&format!("; imports per job: avg {avg:.1}, max {max}"));
    }
    line
}

/// Why jobs the server executed did not come from its action cache, by kind of reason, the
/// commonest first: `; not from the cache: 3 (an import changed: 2; the module changed: 1)`
/// (the report has each job's own reason).
fn misses(r: &LinkRecord) -> Option<String> {
    let mut reasons: std::collections::BTreeMap<&str, usize> = Default::default();
    for j in &r.jobs {
        if let Some(kind) = j.remote.as_ref().and_then(|r| r.miss_kind.as_deref()) {
            *reasons.entry(kind).or_default() += 1;
        }
    }
    let total: usize = reasons.values().sum();
    if total == 0 {
        return None;
    }
    let mut by_count: Vec<(&str, usize)> = reasons.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let shown: Vec<String> = by_count
        .iter()
        .take(3)
        .map(|(why, n)| format!("{why}: {n}"))
        .collect();
    let more = match by_count.len() {
        n if n > 3 => format!("; {} other reasons", n - 3),
        _ => String::new(),
    };
    Some(format!(
        "; not from the cache: {total} ({}{more})",
        shown.join("; ")
    ))
}

/// Puts each job that ran on the first slot lane free at its start (interval partitioning), so
/// the lanes show how the slots were used. Returns the lane of each job, in job order.
pub fn lanes(r: &LinkRecord) -> Vec<Option<usize>> {
    let mut order: Vec<usize> = (0..r.jobs.len())
        .filter(|&p| r.jobs[p].start.is_some())
        .collect();
    order.sort_by(|&a, &b| {
        let key = |p: usize| (r.jobs[p].start.unwrap_or_default(), r.jobs[p].index);
        key(a)
            .partial_cmp(&key(b))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut lane_end: Vec<f64> = Vec::new();
    let mut lane_of = vec![None; r.jobs.len()];
    for p in order {
        let j = &r.jobs[p];
        let (start, end) = (j.start.unwrap_or_default(), j.end.unwrap_or_default());
        let lane = match lane_end.iter().position(|&e| e <= start) {
            Some(l) => l,
            None => {
                lane_end.push(0.0);
                lane_end.len() - 1
            }
        };
        lane_end[lane] = end;
        lane_of[p] = Some(lane);
    }
    lane_of
}

/// The Chrome trace-event file (`--trace`): one complete event per job, one lane per slot.
pub fn trace(r: &LinkRecord) -> serde_json::Value {
    let lanes = lanes(r);
    let micros = |t: f64| ((t - r.start) * 1e6).round() as i64;
    let mut events: Vec<serde_json::Value> = Vec::new();
    let lane_count = lanes.iter().flatten().max().map_or(0, |m| m + 1);
    events.push(serde_json::json!({
        "name": "process_name", "ph": "M", "pid": 1,
        "args": {"name": format!("dtlto-bridge: {}", r.linker_output)},
    }));
    for lane in 0..lane_count {
        events.push(serde_json::json!({
            "name": "thread_name", "ph": "M", "pid": 1, "tid": lane,
            "args": {"name": format!("slot {lane}")},
        }));
    }
    for (j, lane) in r.jobs.iter().zip(&lanes) {
        let (Some(start), Some(end), Some(lane)) = (j.start, j.end, lane) else {
            continue;
        };
        events.push(serde_json::json!({
            "name": j.outputs[0], "cat": "backend", "ph": "X", "pid": 1, "tid": lane,
            "ts": micros(start), "dur": micros(end) - micros(start),
            "args": {"job": j.index, "ran": j.ran, "exit_code": j.exit_code, "ok": j.ok,
                     "input_bytes": j.input_bytes, "imports": j.imports},
        }));
        // A remote job's steps, nested under it on its lane: the wait for the link's upload,
        // the Execute call (with the server's queue inside it), the download.
        if let Some(rm) = &j.remote {
            let upload_end = start + rm.upload_seconds;
            let execute_end = upload_end + rm.execute_seconds;
            let mut steps = vec![
                ("upload (the link's inputs)", start, rm.upload_seconds),
                ("execute", upload_end, rm.execute_seconds),
                ("download", execute_end, rm.download_seconds),
            ];
            if let Some(q) = rm.queued_seconds {
                steps.push(("queued", upload_end, q));
            }
            for (name, at, seconds) in steps {
                events.push(serde_json::json!({
                    "name": name, "cat": "remote", "ph": "X", "pid": 1, "tid": lane,
                    "ts": micros(at), "dur": micros(at + seconds) - micros(at),
                    "args": {"worker": rm.worker, "cached": rm.cached},
                }));
            }
        }
    }
    serde_json::json!({"traceEvents": events, "displayTimeUnit": "ms"})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_paths_name_the_link() {
        for (path, output, want) in [
            ("r-{output}.json", "vmlinux.o", "r-vmlinux.o.json"),
            ("{output}/{output}.json", "out/prog", "prog/prog.json"),
            ("report.json", "prog", "report.json"),
            ("r-{output}", "", "r-a.out"),
        ] {
            assert_eq!(path_for(path.into(), output), want, "{path} {output}");
        }
    }

    fn job(index: usize, start: f64, end: f64) -> JobRecord {
        JobRecord {
            index,
            outputs: vec![format!("o{index}")],
            command: vec![],
            start: Some(start),
            end: Some(end),
            seconds: Some(end - start),
            exit_code: Some(0),
            signal: None,
            error: None,
            ran: "local",
            remote: None,
            fallback_reason: None,
            sent: None,
            ok: true,
            input_bytes: 0,
            imports: index,
        }
    }

    fn record(jobs: Vec<JobRecord>) -> LinkRecord {
        LinkRecord {
            version: 1,
            linker_output: "p".into(),
            backend: "ninja",
            start: 0.0,
            end: 3.0,
            wall_seconds: 3.0,
            totals: Totals {
                jobs: jobs.len(),
                succeeded: jobs.len(),
                failed: 0,
                not_run: 0,
                via_wrapper: 0,
                local: jobs.len(),
                remote: 0,
                remote_cache: 0,
                fell_back: 0,
                input_bytes: 0,
                job_seconds: 0.0,
                hosts: Default::default(),
                bundle_bytes: 0,
            },
            remote: None,
            jobs,
        }
    }

    #[test]
    fn jobs_share_lanes_only_when_they_do_not_overlap() {
        let r = record(vec![
            job(0, 0.0, 2.0),
            job(1, 0.5, 1.0),
            job(2, 1.0, 3.0),
            job(3, 2.0, 2.5),
        ]);
        assert_eq!(lanes(&r), [Some(0), Some(1), Some(1), Some(0)]);
    }

    #[test]
    fn summary_names_the_slowest_job_and_the_imports() {
        let r = record(vec![job(0, 0.0, 2.0), job(1, 0.5, 1.0), job(2, 1.0, 1.5)]);
        let line = summary(&r);
        assert!(
            line.starts_with("3 jobs (3 local, 0 via wrapper, 0 fell back) in 3.00s with ninja"),
            "{line}"
        );
        assert!(line.contains("slowest: job 0 (o0) 2.00s"), "{line}");
        assert!(line.contains("imports per job: avg 1.0, max 2"), "{line}");
    }
}
