//! Prepare: the first step of a run — the job file read and checked, its inputs looked at,
//! `--save`, the history and each job's expected cost, and where job slots come from.
//!
//! It knows what must hold before anything runs; it starts nothing and talks to no server.

use super::tool::Tool;
use super::Options;
use crate::job::outcome;
use crate::job::parse::{self, JobFile};
use crate::job::store::{CacheDir, LinkFiles};
use crate::job::validate;
use crate::local::rundir;
use crate::local::slots;
use crate::report::history::History;
use crate::report::record;
use crate::report::{self, Fail};
use camino::{Utf8Path, Utf8PathBuf};
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

/// Reads a job file; its text stays for the life of the process (the jobs borrow from it, and
/// a run's threads use them to the end).
fn read(path: &Utf8Path) -> Result<&'static str, Fail> {
    let text = fs::read_to_string(path)
        .map_err(|e| Fail::bad_input(format!("read job file {path}: {e}")))?;
    Ok(Box::leak(text.into_boxed_str()))
}

/// Reads and parses a job file.
pub(crate) fn parse_file(path: &Utf8Path) -> Result<JobFile<'static>, Fail> {
    let text = read(path)?;
    parse::parse(text).map_err(|e| Fail::bad_input(format!("parse job file {path}: {e}")))
}

pub(crate) fn cwd() -> Result<(PathBuf, String), Fail> {
    let dir = std::env::current_dir()
        .map_err(|e| Fail::environment(format!("find the current directory: {e}")))?;
    let text = dir.to_string_lossy().into_owned();
    Ok((dir, text))
}

/// The missing inputs of a job file, `count` of them, the `shown` ones one line each, or None
/// when all exist.
pub(crate) fn missing_list(
    file: &JobFile<'_>,
    count: usize,
    shown: &[(usize, String)],
) -> Option<String> {
    if count == 0 {
        return None;
    }
    let mut list: Vec<String> = shown
        .iter()
        .map(|(i, p)| format!("  jobs[{i}] ({}): {p:?}", file.jobs[*i].outputs[0]))
        .collect();
    if count > shown.len() {
        list.push(format!("  ... and {} more", count - shown.len()));
    }
    Some(format!(
        "{count} input file(s) do not exist:\n{}",
        list.join("\n")
    ))
}

/// Everything a link needs before anything runs.
pub(super) struct Prepared<'a> {
    pub options: &'a Options,
    /// The job file.
    pub path: &'a Utf8Path,
    pub file: Arc<JobFile<'static>>,
    pub wrapper: Vec<String>,
    pub input_bytes: Vec<u64>,
    /// What the look at the inputs found (remote links only).
    pub seen: validate::Seen,
    pub cost: Vec<f64>,
    pub history: Option<History>,
    /// The build tool and its file, once written (never, when no job is left to run).
    pub tool: Option<Tool>,
    pub cwd: PathBuf,
    pub decision: slots::Decision,
    pub pool_base: Utf8PathBuf,
    pub parallelism: usize,
    pub remote: Option<crate::remote::Options>,
    /// The compiler's identity, asked early (remote links only).
    pub identity: Option<crate::remote::AskedCompiler>,
}

pub(super) fn prepare<'a>(
    options: &'a Options,
    path: &'a Utf8Path,
    cwd: PathBuf,
    mut file: JobFile<'static>,
    jobserver: jobserver::FromEnv,
) -> Result<Option<Prepared<'a>>, Fail> {
    validate::check(&file, &cwd.to_string_lossy())
        .map_err(|e| Fail::bad_input(format!("check job file {path}: {e}")))?;
    let wrapper = options.wrapper.clone();
    let mut remote = options.remote.clone();
    let cache = cache_dir(options);
    let files = (cache.as_ref()).map(|c| c.link(&cwd, &file.linker_output));
    if let Some(remote) = &mut remote {
        remote.memo = files.clone();
    }
    let identity = (remote.is_some() && !file.jobs.is_empty()).then(|| {
        crate::remote::AskedCompiler::start(&file, cache.as_ref().map(CacheDir::compilers))
    });
    if let Some(why) = remote.as_ref().and_then(|o| o.disk_unused()) {
        report::warning(&format!("--remote-disk-cache is not used: {why}"));
    }
    let inputs = validate::stat_inputs(&file, &cwd, remote.is_some());
    if let Some(list) = missing_list(&file, inputs.missing.len(), &inputs.missing) {
        return Err(Fail::bad_input(format!("check inputs of {path}: {list}")));
    }
    if let Some(line) = crate::job::relocation::follow_modules(&mut file, &cwd) {
        report::note(&line);
    }
    if let Some(dir) = &options.save {
        save(dir, path, &file, &cwd)?;
    }
    if file.jobs.is_empty() {
        // Every job came from lld's ThinLTO cache: a link through dtlto-bridge all the same.
        log_empty(options, &file, &wrapper);
        return Ok(None);
    }
    rundir::remove_dead(&std::env::temp_dir());
    let (history, cost) = costs(options, files.as_ref(), &file, &inputs.module_bytes);
    let parallelism = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1);
    let pool_base = crate::local::pool::base_dir(options.host_pool.as_deref());
    let decision = slots::decide(
        jobserver,
        &slots::Request {
            explicit_jobs: options.jobs.map(|j| {
                (
                    j as usize,
                    options.origins.describe("jobs", "-j", &j.to_string()),
                )
            }),
            parallelism,
            host_slots: options.host_slots.unwrap_or(parallelism),
            pool_base: &pool_base,
        },
    );
    Ok(Some(Prepared {
        options,
        path,
        file: Arc::new(file),
        wrapper,
        input_bytes: inputs.bytes,
        seen: inputs.seen,
        cost,
        history,
        tool: None,
        cwd,
        decision,
        pool_base,
        parallelism,
        remote,
        identity,
    }))
}

/// `--save DIR`: the job file and every input its jobs read, to run them again later.
fn save(
    dir: &Utf8Path,
    path: &Utf8Path,
    file: &JobFile<'_>,
    cwd: &std::path::Path,
) -> Result<(), Fail> {
    let saved = super::save::save(dir, path, file, cwd)
        .map_err(|e| Fail::environment(format!("save the link in {dir}: {e}")))?;
    let how = if saved.copied > 0 {
        format!("{} copied", saved.copied)
    } else {
        "hard links".to_string()
    };
    report::note(&format!(
        "saved {} and its jobs' {} input file(s) ({:.1} MB, {how}) in {}; run the jobs again \
         from there: dtlto-bridge emit --format ninja {} -o jobs.ninja && ninja -f jobs.ninja",
        path,
        saved.files - 1,
        saved.bytes as f64 / 1e6,
        saved.run_dir,
        crate::render::escape::shell_word(saved.job_file.file_name().unwrap_or("")),
    ));
    Ok(())
}

/// The record of a link whose every job came from lld's cache.
fn log_empty(options: &Options, file: &JobFile<'_>, wrapper: &[String]) {
    let empty = record::build(&record::RunInfo {
        file,
        wrapper,
        outcomes: &[],
        input_bytes: &[],
        backend: "none",
        start: outcome::now(),
        end: outcome::now(),
    });
    super::records::log(options, &empty, true);
}

/// The cache directory where links are remembered (`--history`), unless that is turned off
/// or it may not be trusted (then said once per build).
fn cache_dir(options: &Options) -> Option<CacheDir> {
    let path = options.history.clone()?;
    CacheDir::open(path)
        .map_err(|why| {
            let base = crate::local::pool::base_dir(options.host_pool.as_deref());
            let dir = crate::local::pool::user_dir(&base).ok();
            let message = format!("remember links: {why}; nothing is remembered (--history)");
            report::advice::once(dir.as_deref(), &message)
        })
        .ok()
}

/// The remembered history (in the link's `files`, unless nothing is remembered) and each job's
/// expected cost, by `--order`; `bytes` is each job's own module's size.
fn costs(
    options: &Options,
    files: Option<&LinkFiles>,
    file: &JobFile<'_>,
    bytes: &[u64],
) -> (Option<History>, Vec<f64>) {
    let history = files.map(History::load);
    let cost = match options.order {
        super::Order::Longest => match &history {
            Some(h) => h.estimate(file, bytes),
            None => bytes.iter().map(|&b| b as f64).collect(),
        },
        // Earlier jobs cost more, so they go first.
        super::Order::File => (0..file.jobs.len()).map(|i| -(i as f64)).collect(),
    };
    (history, cost)
}
