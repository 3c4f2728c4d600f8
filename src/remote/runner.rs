//! Remote: runs a link's jobs on a Remote Execution API server — one connection per link, every
//! distinct input uploaded once, the action cache asked first, transient failures retried, outputs
//! written atomically and verified like local ones.
//!
//! It knows how one remote job goes, from upload to verified output, and reports each job's end
//! to a callback. It does not decide which job goes remote or what happens after a failure (the
//! scheduler does), and it starts no local processes.

use crate::fsutil::{lock, write_whole};
use crate::job::outcome::{self, RemoteInfo as Info, RemoteTotals as Totals, Status};
use crate::job::parse::JobFile;
use crate::remote::action::{Common, JobAction};
use crate::remote::actions::Actions;
use crate::remote::digests::Memo;
use crate::remote::known::Known;
use crate::remote::reapi::{self, Client, Executed, Target};
use crate::report::history::ACTIONS;
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the user asked of the remote path.
#[derive(Debug, Clone)]
pub struct Options {
    pub target: Target,
    /// Jobs in flight on the server at once.
    pub jobs: usize,
    /// Whether the action cache is read and written.
    pub cache: bool,
    pub platform: Vec<(String, String)>,
    /// Whether the workers mount the input root at `/`.
    pub root_is_slash: bool,
    /// Whether jobs are keyed by content where they can be (`--remote-key`).
    pub by_content: bool,
    /// Where input files' digests are remembered between links (digests.rs), if anywhere.
    pub memo: Option<PathBuf>,
    /// Where outputs are kept on this machine by digest (disk.rs), if anywhere; used only
    /// with the action cache and `memo` (the remembered actions are beside it).
    pub disk: Option<PathBuf>,
}

impl Options {
    /// Why `disk`, given, is not used.
    pub fn disk_unused(&self) -> Option<&'static str> {
        match (self.disk.is_some(), self.cache, self.memo.is_some()) {
            (false, _, _) | (true, true, true) => None,
            (true, false, _) => Some("the action cache is off (--remote-no-cache)"),
            (true, true, false) => Some("it needs the history (--no-history is set)"),
        }
    }
}

/// How a remote job ended.
#[derive(Debug, Clone)]
pub struct End {
    pub status: Status,
    /// What was wrong, if anything: the job then falls back (or fails).
    pub problem: Option<String>,
    pub info: Info,
    /// What the command wrote to stderr on the worker (the caller puts it where it belongs).
    pub stderr: Vec<u8>,
}

impl End {
    /// A job that never reached the server, for `problem`.
    pub fn failed_here(problem: String) -> End {
        End {
            status: Status::default(),
            problem: Some(problem),
            info: Info::default(),
            stderr: Vec::new(),
        }
    }

    /// A job taken from a cache (`worker` held its outputs), with no time of its own: a lookup
    /// answers every job at once.
    pub(super) fn cached(mut info: Info, worker: String) -> End {
        info.cached = true;
        info.worker = worker;
        let now = outcome::now();
        End {
            status: Status {
                code: Some(0),
                start: now,
                end: now,
                ..Default::default()
            },
            problem: None,
            info,
            stderr: Vec::new(),
        }
    }
}

#[derive(Default)]
pub(super) struct Counters {
    distinct_blobs: AtomicU64,
    uploaded_bytes: AtomicU64,
    uploaded_blobs: AtomicU64,
    pub(super) downloaded_bytes: AtomicU64,
}

/// How many times a transient failure is tried again, and the first pause (then ×4).
const RETRIES: u32 = 3;
const BACKOFF: Duration = Duration::from_millis(250);

/// The pauses between the tries of one call that failed transiently.
struct Backoff {
    tries: u32,
    pause: Duration,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff {
            tries: 0,
            pause: BACKOFF,
        }
    }

    /// Waits before the next try; false, at once, when every retry is spent.
    async fn wait(&mut self) -> bool {
        if self.tries >= RETRIES {
            return false;
        }
        self.tries += 1;
        tokio::time::sleep(self.pause).await;
        self.pause *= 4;
        true
    }
}

pub(super) struct Ctx {
    pub(super) client: Client,
    pub(super) jobs: Vec<Option<JobAction>>,
    /// Each input file's digest, and where it is.
    files: HashMap<String, (re::Digest, PathBuf)>,
    /// Each job's input files, by digest.
    inputs: Vec<Vec<String>>,
    /// What building the jobs remembered (not whole) takes, should they execute.
    pub(super) later: super::actions::Later,
    uploaded: tokio::sync::OnceCell<Result<(), String>>,
    pub(super) cache: bool,
    /// Whether the server takes action-cache updates (for the link's entry).
    pub(super) cache_updates: bool,
    pub(super) cwd: PathBuf,
    pub(super) outputs: Vec<Vec<String>>,
    pub(super) cancelled: tokio::sync::watch::Receiver<bool>,
    operations: Mutex<HashMap<usize, String>>,
    pub(super) counters: Counters,
    /// The link's entry in the action cache (`lookup`): its key and its messages.
    pub(super) entry: Option<super::lookup::Entry>,
    /// Whether the link's entry answered this link.
    pub(super) entry_found: AtomicBool,
    /// Jobs whose cached result was no good: they execute, never from the cache.
    pub(super) bad_results: Mutex<HashSet<usize>>,
    /// Jobs remembered from the last link that could not be built whole again, and why.
    unbuilt: Mutex<HashMap<usize, String>>,
    /// Jobs that came from the lookup: their inputs need not be uploaded.
    hits: Mutex<HashSet<usize>>,
    /// Each job's outputs as the server holds them, once it has them (for the link's entry).
    pub(super) results: Mutex<Vec<Option<Vec<re::OutputFile>>>>,
    /// Where outputs are kept on this machine (`--remote-disk-cache`), if anywhere.
    pub(super) disk: Option<super::disk::Disk>,
    /// Each job's key among the remembered actions, when it has one.
    pub(super) keys: Vec<Option<String>>,
    /// Jobs whose outputs came from the disk cache: they are kept there already.
    pub(super) from_disk: Mutex<HashSet<usize>>,
    /// Why kept outputs could not be taken from the disk cache (not a miss: an error).
    pub(super) disk_problems: Mutex<Vec<String>>,
}

/// A link's connection to the server, and the jobs it can run there.
pub struct Remote {
    rt: tokio::runtime::Runtime,
    ctx: Arc<Ctx>,
    cancel: Arc<tokio::sync::watch::Sender<bool>>,
    /// The CancelOperation calls under way, waited for by `finish`.
    cancelling: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    server: String,
    /// What went wrong on the side (a cancel the server refused), for the caller to print.
    warnings: Arc<Mutex<Vec<String>>>,
}

impl Remote {
    /// Connects, checks the server, and turns each job into an action. Returns, for each job,
    /// why it runs here instead (None: it can run remotely).
    pub fn start(
        options: &Options,
        file: &Arc<JobFile<'static>>,
        cwd: &Path,
        identity: super::identity::Asked,
        seen: &crate::job::check::Seen,
    ) -> Result<(Remote, Vec<Option<String>>), String> {
        // The connection is made while the remembered digests and actions load.
        let load = || {
            let memo = Memo::load(options.memo.clone());
            // Only with the action cache: a job remembered is built again to execute.
            let known = match options.cache {
                true => Known::load(options.memo.as_ref().map(|p| p.with_extension(ACTIONS))),
                false => Known::default(),
            };
            (memo, known)
        };
        let (connected, (memo, known)) = rayon::join(|| connect(options), load);
        let (rt, client, cache_updates) = match connected {
            Ok(connected) => connected,
            Err(e) => {
                // No server: no input is read; the compiler's answer is waited for, not left.
                let _ = identity.answer();
                return Err(e);
            }
        };
        let read = super::actions::read(file, cwd, &memo, seen);
        let identity = identity.answer();
        let common = Common {
            cwd: cwd.to_path_buf(),
            root_is_slash: options.root_is_slash,
            identity: identity?,
            platform: options.platform.clone(),
            cache: options.cache,
            by_content: options.by_content,
        };
        let (actions, why) = Actions::build(&common, known, file, cwd, read);
        let mut warnings = Vec::new();
        if let Err(e) = memo.save() {
            warnings.push(format!("remember the inputs' digests: {e}"));
        }
        let (cancel, cancelled) = tokio::sync::watch::channel(false);
        let n = actions.jobs.len();
        let ctx = Arc::new(Ctx {
            client,
            entry: super::lookup::entry_key(&actions.jobs),
            jobs: actions.jobs,
            files: actions.files,
            inputs: actions.inputs,
            later: actions.later,
            uploaded: tokio::sync::OnceCell::new(),
            cache: options.cache,
            cache_updates,
            entry_found: AtomicBool::new(false),
            bad_results: Mutex::default(),
            unbuilt: Mutex::default(),
            hits: Mutex::default(),
            results: Mutex::new(vec![None; n]),
            disk: (options.disk_unused().is_none())
                .then(|| options.disk.clone().map(super::disk::Disk::new))
                .flatten(),
            keys: actions.keys,
            from_disk: Mutex::default(),
            disk_problems: Mutex::default(),
            cwd: cwd.to_path_buf(),
            outputs: file
                .jobs
                .iter()
                .map(|j| j.outputs.iter().map(|o| o.to_string()).collect())
                .collect(),
            cancelled,
            operations: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        });
        Ok((
            Remote {
                rt,
                ctx,
                cancel: Arc::new(cancel),
                cancelling: Mutex::new(Vec::new()),
                server: options.target.url.clone(),
                warnings: Arc::new(Mutex::new(warnings)),
            },
            why,
        ))
    }
    /// Looks every job up in the action cache before any runs, and writes the hits' outputs:
    /// each hit's end, None for the jobs still to run. Nothing when the cache is off.
    pub fn look_up(&self) -> Vec<Option<End>> {
        if !self.ctx.cache {
            return vec![None; self.ctx.jobs.len()];
        }
        let ctx = self.ctx.clone();
        let mut cancelled = self.ctx.cancelled.clone();
        let n = self.ctx.jobs.len();
        // A cancel stops the lookup where it is: the hits written so far count for nothing (the
        // run removes the outputs of jobs that did not end well).
        let ends = self.rt.block_on(async move {
            tokio::select! {
                ends = super::lookup::look_up(ctx) => ends,
                _ = cancelled.wait_for(|c| *c) => vec![None; n],
            }
        });
        // The first, and how many: each job meets the same cause.
        let problems = std::mem::take(&mut *lock(&self.ctx.disk_problems));
        if let Some(first) = problems.iter().min() {
            let more = match problems.len() {
                1 => String::new(),
                n => format!(" ({} more jobs alike)", n - 1),
            };
            lock(&self.warnings).push(format!("remote: {first}{more}"));
        }
        lock(&self.ctx.hits).extend(
            ends.iter()
                .enumerate()
                .filter_map(|(i, e)| e.as_ref().map(|_| i)),
        );
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
        let ctx = self.ctx.clone();
        self.rt.spawn(async move {
            let mut cancelled = ctx.cancelled.clone();
            let end = tokio::select! {
                end = run_job(&ctx, index) => end,
                _ = cancelled.wait_for(|c| *c) => return,
            };
            if !*ctx.cancelled.borrow() {
                reply(end);
            }
        });
    }

    /// Stops every remote job: nothing more is written, and the server is asked to cancel the
    /// operations in flight.
    pub fn cancel(&self) {
        let _ = self.cancel.send(true);
        let names: Vec<String> = lock(&self.ctx.operations).drain().map(|(_, n)| n).collect();
        // Spawned, not waited for: this may run on one of the runtime's own threads.
        let mut cancelling = lock(&self.cancelling);
        for name in names {
            let mut client = self.ctx.client.clone();
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
    pub fn finish(self) -> (Totals, Vec<String>) {
        let c = &self.ctx.counters;
        let totals = Totals {
            server: self.server.clone(),
            distinct_blobs: c.distinct_blobs.load(Ordering::Relaxed),
            uploaded_bytes: c.uploaded_bytes.load(Ordering::Relaxed),
            uploaded_blobs: c.uploaded_blobs.load(Ordering::Relaxed),
            downloaded_bytes: c.downloaded_bytes.load(Ordering::Relaxed),
        };
        if !*self.ctx.cancelled.borrow() {
            if let Err(e) = super::lookup::keep(&self.ctx) {
                lock(&self.warnings).push(format!("remote: {e}"));
            }
        }
        if let Err(e) = self.ctx.later.known.save() {
            lock(&self.warnings).push(format!("remote: remember the jobs' actions: {e}"));
        }
        if !*self.ctx.cancelled.borrow() {
            let ctx = self.ctx.clone();
            let remembered = self.rt.block_on(async move {
                tokio::time::timeout(Duration::from_secs(3), super::lookup::remember(&ctx))
                    .await
                    .unwrap_or_else(|_| Err("write the link's cache entry: timed out".into()))
            });
            if let Err(e) = remembered {
                lock(&self.warnings).push(format!("remote: {e}"));
            }
        }
        let _ = self.cancel.send(true);
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
        let ctx = self.ctx;
        let _ = std::thread::Builder::new().spawn(move || drop(ctx));
        (totals, warnings)
    }
}

/// Starts the client's runtime and connects to the server, which must take SHA-256 digests and
/// execute actions.
fn connect(options: &Options) -> Result<(tokio::runtime::Runtime, Client, bool), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("remote")
        .enable_all()
        .build()
        .map_err(|e| format!("start the remote client: {e}"))?;
    let target = options.target.clone();
    let (client, caps) = rt.block_on(async move {
        tokio::time::timeout(Duration::from_secs(15), Client::connect(&target))
            .await
            .unwrap_or_else(|_| Err(format!("connect to {}: timed out", target.url)))
    })?;
    if !caps.sha256 {
        return Err(format!(
            "{} does not take SHA-256 digests, the only ones dtlto-bridge makes",
            options.target.url
        ));
    }
    if !caps.exec_enabled {
        return Err(format!(
            "{} (instance {:?}) does not execute actions",
            options.target.url, options.target.instance
        ));
    }
    Ok((rt, client, caps.cache_updates))
}

/// Runs `f` again after transient failures, with backoff.
async fn retrying<T, F, Fut>(mut f: F) -> Result<T, tonic::Status>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let mut backoff = Backoff::new();
    loop {
        match f().await {
            Err(s) if reapi::transient(s.code()) => {
                if !backoff.wait().await {
                    return Err(s);
                }
            }
            other => return other,
        }
    }
}

/// Uploads what the server lacks of every input and every action message of the link, once.
async fn upload_all(ctx: &Ctx) -> Result<(), String> {
    let mut blobs: HashMap<String, &[u8]> = HashMap::new();
    let mut all: Vec<re::Digest> = Vec::new();
    let mut seen = HashSet::new();
    let hits = lock(&ctx.hits).clone();
    let to_run: Vec<usize> = (0..ctx.jobs.len()).filter(|i| !hits.contains(i)).collect();
    // The jobs remembered from the last link are built whole now, on every core; one that
    // cannot be (it is not what was remembered) fails alone, and runs here.
    let rebuilt: Vec<(usize, super::actions::Built)> = tokio::task::block_in_place(|| {
        use rayon::prelude::*;
        to_run
            .par_iter()
            .filter_map(|&i| Some((i, ctx.jobs[i].as_ref().filter(|j| !j.whole)?)))
            .map(|(i, job)| {
                let built = match &ctx.keys[i] {
                    Some(key) => ctx.later.build(i, key, &job.action_digest),
                    None => Err("it was not remembered".into()),
                };
                (i, built)
            })
            .collect()
    });
    let mut unbuilt = HashMap::new();
    let rebuilt: Vec<(JobAction, Vec<(re::Digest, PathBuf)>)> = rebuilt
        .into_iter()
        .filter_map(|(i, built)| {
            built
                .map_err(|e| unbuilt.insert(i, format!("remote: build the action of job {i}: {e}")))
                .ok()
        })
        .collect();
    lock(&ctx.unbuilt).extend(unbuilt);
    let mut files: HashMap<&String, &(re::Digest, PathBuf)> = ctx.files.iter().collect();
    let mut used: HashSet<&String> = to_run.iter().flat_map(|&i| &ctx.inputs[i]).collect();
    for (_, uses) in &rebuilt {
        for found in uses {
            files.insert(&found.0.hash, found);
            used.insert(&found.0.hash);
        }
    }
    let whole = to_run
        .iter()
        .filter_map(|&i| ctx.jobs[i].as_ref())
        .filter(|j| j.whole)
        .chain(rebuilt.iter().map(|(j, _)| j));
    for (digest, bytes) in whole.flat_map(|j| j.blobs.iter()) {
        if seen.insert(digest.hash.clone()) {
            blobs.insert(digest.hash.clone(), bytes);
            all.push(digest.clone());
        }
    }
    for (digest, _) in files.values() {
        if used.contains(&digest.hash) && seen.insert(digest.hash.clone()) {
            all.push(digest.clone());
        }
    }
    ctx.counters
        .distinct_blobs
        .store(all.len() as u64, Ordering::Relaxed);
    let missing = retrying(|| {
        let mut c = ctx.client.clone();
        let all = all.clone();
        async move { c.find_missing(&all).await }
    })
    .await
    .map_err(|s| format!("ask the CAS which inputs it lacks: {}", reapi::describe(&s)))?;

    let mut batch: Vec<(re::Digest, Vec<u8>)> = Vec::new();
    let mut batch_size = 0;
    let max = ctx.client.max_batch;
    for digest in missing {
        let data = match blobs.get(&digest.hash) {
            Some(b) => b.to_vec(),
            None => {
                let Some((_, path)) = files.get(&digest.hash) else {
                    continue;
                };
                let data =
                    std::fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?;
                if super::action::digest_of(&data) != digest {
                    return Err(format!("{} changed while the link ran", path.display()));
                }
                data
            }
        };
        if !ctx.client.batchable(data.len()) {
            retrying(|| {
                let mut c = ctx.client.clone();
                let (d, data) = (digest.clone(), data.clone());
                async move { c.stream_upload(&d, data).await }
            })
            .await
            .map_err(|s| format!("upload {}: {}", digest.hash, reapi::describe(&s)))?;
            ctx.counters.uploaded_blobs.fetch_add(1, Ordering::Relaxed);
            ctx.counters
                .uploaded_bytes
                .fetch_add(data.len() as u64, Ordering::Relaxed);
            continue;
        }
        if batch_size + data.len() + 1024 > max {
            send_batch(ctx, std::mem::take(&mut batch)).await?;
            batch_size = 0;
        }
        batch_size += data.len() + 1024;
        batch.push((digest, data));
    }
    if !batch.is_empty() {
        send_batch(ctx, batch).await?;
    }
    Ok(())
}

async fn send_batch(ctx: &Ctx, batch: Vec<(re::Digest, Vec<u8>)>) -> Result<(), String> {
    let n = batch.len();
    let bytes: usize = batch.iter().map(|(_, d)| d.len()).sum();
    retrying(|| {
        let mut c = ctx.client.clone();
        let batch = batch.clone();
        async move { c.batch_upload(batch).await }
    })
    .await
    .map_err(|s| format!("upload {n} blob(s): {}", reapi::describe(&s)))?;
    ctx.counters
        .uploaded_blobs
        .fetch_add(n as u64, Ordering::Relaxed);
    ctx.counters
        .uploaded_bytes
        .fetch_add(bytes as u64, Ordering::Relaxed);
    Ok(())
}

fn seconds(from: std::time::Instant) -> f64 {
    from.elapsed().as_secs_f64()
}

fn failed(start: f64, info: Info, problem: String) -> End {
    End {
        status: Status {
            code: None,
            signal: None,
            spawn_error: Some(problem.clone()),
            start,
            end: outcome::now(),
        },
        problem: Some(problem),
        info,
        stderr: Vec::new(),
    }
}

fn timestamp(t: &Option<bazel_remote_apis::google::protobuf::Timestamp>) -> Option<f64> {
    t.as_ref()
        .map(|t| t.seconds as f64 + f64::from(t.nanos) / 1e9)
}

/// One job, from upload to verified outputs.
async fn run_job(ctx: &Ctx, index: usize) -> End {
    let start = outcome::now();
    let Some(job) = ctx.jobs.get(index).and_then(Option::as_ref) else {
        return failed(
            start,
            Info::default(),
            "remote: this job has no action".into(),
        );
    };
    let mut info = info_of(job);
    let t = std::time::Instant::now();
    let uploaded = ctx.uploaded.get_or_init(|| upload_all(ctx)).await;
    info.upload_seconds = seconds(t);
    if let Err(e) = uploaded {
        return failed(start, info, format!("remote: {e}"));
    }
    if let Some(e) = lock(&ctx.unbuilt).get(&index) {
        return failed(start, info, e.clone());
    }
    let mut client = ctx.client.clone();

    // The lookup before the run asked the action cache already: this job missed it (or its
    // result was no good, and the cache is skipped).
    let skip_cache = !ctx.cache || lock(&ctx.bad_results).contains(&index);

    let t = std::time::Instant::now();
    let mut resume: Option<String> = None;
    let mut backoff = Backoff::new();
    let response = loop {
        let ended = client
            .execute(&job.action_digest, skip_cache, resume.clone(), |name| {
                lock(&ctx.operations).insert(index, name.to_string());
            })
            .await;
        let status = match ended {
            Executed::Done(r) => match &r.status {
                Some(s) if s.code != 0 => {
                    tonic::Status::new(tonic::Code::from(s.code), s.message.clone())
                }
                _ => break r,
            },
            Executed::Broken { name, status } => {
                // A stream that broke may be re-attached; an operation the server forgot is
                // started again.
                resume = if status.code() == tonic::Code::NotFound {
                    None
                } else {
                    name
                };
                status
            }
        };
        let again = reapi::transient(status.code()) || status.code() == tonic::Code::NotFound;
        if !again || !backoff.wait().await {
            lock(&ctx.operations).remove(&index);
            info.execute_seconds = seconds(t);
            return failed(
                start,
                info,
                format!("remote execution failed: {}", reapi::describe(&status)),
            );
        }
    };
    lock(&ctx.operations).remove(&index);
    info.execute_seconds = seconds(t);
    let Some(result) = response.result else {
        return failed(start, info, "remote: the server sent no result".into());
    };
    info.cached = response.cached_result;
    if let Some(m) = &result.execution_metadata {
        info.worker = m.worker.clone();
        if let (Some(q), Some(w)) = (
            timestamp(&m.queued_timestamp),
            timestamp(&m.worker_start_timestamp),
        ) {
            info.queued_seconds = Some((w - q).max(0.0));
        }
    }
    let stderr = if !result.stderr_raw.is_empty() {
        result.stderr_raw.clone()
    } else if let Some(d) = &result.stderr_digest {
        client.read(d).await.unwrap_or_default()
    } else {
        Vec::new()
    };
    if result.exit_code != 0 {
        let mut end = failed(
            start,
            info,
            format!(
                "remote: exit status {} on {}",
                result.exit_code,
                worker_name(&result)
            ),
        );
        end.status.code = Some(result.exit_code);
        end.status.spawn_error = None;
        end.stderr = stderr;
        return end;
    }
    let t = std::time::Instant::now();
    let fetched = fetch_outputs(ctx, &mut client, job, &result).await;
    info.download_seconds = seconds(t);
    let mut end = match fetched {
        Ok(()) => held(ctx, index, verified(ctx, index, start, info, 0), &result),
        Err(e) => failed(start, info, format!("remote: {e}")),
    };
    end.stderr = stderr;
    end
}

/// What a job's report says of its action, before it runs.
pub(super) fn info_of(job: &JobAction) -> Info {
    Info {
        key: match (&job.by_name, &job.summaries_kept) {
            (None, None) => "content".into(),
            (None, Some(why)) => {
                format!("content, the index shard's summaries as lld wrote them: {why}")
            }
            (Some(why), _) => format!("names: {why}"),
        },
        ingredients: job.ingredients.clone(),
        ..Info::default()
    }
}

/// `end`, after noting that the server holds job `index`'s outputs (as `result` names them)
/// when they were good.
fn held(ctx: &Ctx, index: usize, end: End, result: &re::ActionResult) -> End {
    if end.problem.is_none() {
        lock(&ctx.results)[index] = Some(
            result
                .output_files
                .iter()
                .map(|f| re::OutputFile {
                    contents: Vec::new(),
                    ..f.clone()
                })
                .collect(),
        );
    }
    end
}

pub(super) fn worker_name(result: &re::ActionResult) -> String {
    match result
        .execution_metadata
        .as_ref()
        .map(|m| m.worker.as_str())
    {
        Some(w) if !w.is_empty() => format!("worker {w}"),
        _ => "the worker".into(),
    }
}

/// The job's outputs checked here like those of a local run.
pub(super) fn verified(ctx: &Ctx, index: usize, start: f64, info: Info, code: i32) -> End {
    let problem = crate::job::output::first_problem(&ctx.cwd, &ctx.outputs[index]);
    if problem.is_some() {
        crate::job::output::remove(&ctx.cwd, &ctx.outputs[index]);
    }
    End {
        status: Status {
            code: Some(code),
            signal: None,
            spawn_error: None,
            start,
            end: outcome::now(),
        },
        problem: problem.map(|p| format!("remote: {p}")),
        info,
        stderr: Vec::new(),
    }
}

/// Fetches each output of the result and puts it in place: a temporary name, then a rename,
/// never once the link is cancelled.
async fn fetch_outputs(
    ctx: &Ctx,
    client: &mut Client,
    job: &JobAction,
    result: &re::ActionResult,
) -> Result<(), String> {
    for (inside, here) in &job.outputs {
        let Some(file) = result.output_files.iter().find(|f| &f.path == inside) else {
            return Err(format!("the result has no output {inside}"));
        };
        let digest = file.digest.clone().unwrap_or_default();
        let data = if !file.contents.is_empty() || digest.size_bytes == 0 {
            file.contents.clone()
        } else {
            retrying(|| {
                let mut c = client.clone();
                let d = digest.clone();
                async move { c.read(&d).await }
            })
            .await
            .map_err(|s| format!("fetch output {inside}: {}", reapi::describe(&s)))?
        };
        if data.len() as i64 != digest.size_bytes {
            return Err(format!(
                "output {inside} came back with {} of its {} bytes",
                data.len(),
                digest.size_bytes
            ));
        }
        ctx.counters
            .downloaded_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        let not_cancelled = || match *ctx.cancelled.borrow() {
            true => Err(std::io::Error::other("cancelled")),
            false => Ok(()),
        };
        write_whole(here, &data, 0o666, not_cancelled)
            .map_err(|e| format!("write {}: {e}", here.display()))?;
    }
    Ok(())
}
