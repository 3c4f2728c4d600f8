//! Execute: one remote job, from its upload (blobs shared with other jobs sent once) to verified
//! outputs — Execute with the operation's stream resumed where it can be, the result's stderr,
//! its outputs fetched and written whole, then checked like a local run's.
//!
//! It knows one job's calls and their order; it does not decide which job goes remote or what
//! a failure leads to.

use super::action::JobAction;
use super::blob;
use super::health::{retrying, Backoff};
use super::reapi::{self, Client, Executed};
use super::session::{info_of, without_contents, worker_name, Session};
use super::upload::upload_job;
use crate::job::outcome::{self, RemoteEnd as End, RemoteInfo as Info, Status};
use crate::job::util::sync::lock;
use crate::job::util::whole::write_whole;
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use std::sync::atomic::Ordering;

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

/// How many times in a row a job's Execute stream may end cleanly with news and be followed
/// again at once.
const RESUMES: u32 = 100;

/// One job, from upload to verified outputs.
pub(super) async fn run_job(session: &Session, index: usize, rank: u64) -> End {
    let start = outcome::now();
    let Some(job) = session.jobs.get(index).and_then(Option::as_ref) else {
        return failed(
            start,
            Info::default(),
            "remote: this job has no action".into(),
        );
    };
    let mut info = info_of(job);
    if let Some(why) = session.health.down() {
        return failed(start, info, format!("remote: {why}"));
    }
    let t = std::time::Instant::now();
    let uploaded = upload_job(session, index, job, rank).await;
    info.upload_seconds = seconds(t);
    if let Err(e) = uploaded {
        return failed(start, info, format!("remote: {e}"));
    }
    let (end, untaken) = attempt(session, index, job, start, info.clone()).await;
    let evicted = untaken && end.info.cached;
    if !evicted || lock(&session.state)[index].bad_result || session.health.down().is_some() {
        return end;
    }
    // A cached result whose outputs could not be taken (evicted from the CAS, or sent other
    // than their digests): executed once more past the cache, whose entry it then replaces.
    lock(&session.state)[index].bad_result = true;
    attempt(session, index, job, start, info).await.0
}

/// One Execute of the job's action, to its checked outputs; and whether it failed because the
/// result's outputs could not be taken (not fetched, not whole, or not objects).
async fn attempt(
    session: &Session,
    index: usize,
    job: &JobAction,
    start: f64,
    mut info: Info,
) -> (End, bool) {
    let mut client = session.client.clone();
    let t = std::time::Instant::now();
    let executed = execute(session, &mut client, index, job).await;
    info.execute_seconds = seconds(t);
    let response = match executed {
        Ok(response) => response,
        Err(status) => {
            let problem = format!("remote execution failed: {}", reapi::describe(&status));
            return (failed(start, info, problem), false);
        }
    };
    let Some(result) = response.result else {
        let problem = "remote: the server sent no result".into();
        return (failed(start, info, problem), false);
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
    let stderr = stderr_of(&mut client, &result).await;
    if result.exit_code != 0 {
        let worker = worker_name(&result);
        let mut end = failed(
            start,
            info,
            format!("remote: exit status {} on {worker}", result.exit_code),
        );
        end.status.code = Some(result.exit_code);
        end.status.spawn_error = None;
        end.stderr = stderr;
        return (end, false);
    }
    let t = std::time::Instant::now();
    let fetched = fetch_outputs(session, &mut client, index, job, &result).await;
    info.download_seconds = seconds(t);
    let mut end = match fetched {
        Ok(problem) => held(
            session,
            index,
            verified(session, index, problem, start, info),
            &result,
        ),
        Err(e) => failed(start, info, format!("remote: {e}")),
    };
    end.stderr = stderr;
    let untaken = end.problem.is_some();
    (end, untaken)
}

/// Executes job `index`'s action to its response: a stream that broke is re-attached, an
/// operation the server forgot started again, transient failures retried.
async fn execute(
    session: &Session,
    client: &mut Client,
    index: usize,
    job: &JobAction,
) -> Result<Box<re::ExecuteResponse>, tonic::Status> {
    // The lookup before the run asked the action cache already: this job missed it (or its
    // result was no good, and the cache is skipped). When it was not asked (the link's leads
    // all missed), Execute asks.
    let skip_cache = !session.cache || lock(&session.state)[index].bad_result;
    let mut resume: Option<String> = None;
    let mut backoff = Backoff::new();
    // Clean ends of a stream that brought news: resumed at once, but not forever.
    let mut ends = 0;
    let ended = loop {
        let ended = client
            .execute(&job.action_digest, skip_cache, resume.clone(), |name| {
                lock(&session.state)[index].operation = Some(name.to_string());
            })
            .await;
        let (status, progressed) = match ended {
            Executed::Done(r) => {
                session.health.up();
                match &r.status {
                    Some(s) if s.code != 0 => (
                        tonic::Status::new(tonic::Code::from(s.code), s.message.clone()),
                        true,
                    ),
                    _ => break Ok(r),
                }
            }
            Executed::Ended { name, progressed } => {
                // A proxy's idle or age limit: the operation goes on; follow it again.
                resume = name;
                if progressed && ends < RESUMES {
                    ends += 1;
                    backoff.reset();
                    continue;
                }
                let status = tonic::Status::unavailable("the operation stream ended early");
                (status, progressed)
            }
            Executed::Broken {
                name,
                status,
                progressed,
            } => {
                // A stream that broke may be re-attached; an operation the server forgot is
                // started again.
                resume = if status.code() == tonic::Code::NotFound {
                    None
                } else {
                    name
                };
                (status, progressed)
            }
        };
        if progressed {
            backoff.reset();
        }
        session.health.retried(&status);
        let again = reapi::transient(status.code()) || status.code() == tonic::Code::NotFound;
        if !again || !backoff.wait(&session.health).await {
            session.health.gave_up(&status);
            break Err(status);
        }
    };
    lock(&session.state)[index].operation = None;
    ended
}

/// What the command wrote to stderr on the worker, inline or read from the CAS.
async fn stderr_of(client: &mut Client, result: &re::ActionResult) -> Vec<u8> {
    if !result.stderr_raw.is_empty() {
        result.stderr_raw.clone()
    } else if let Some(d) = &result.stderr_digest {
        client.read(d).await.unwrap_or_default()
    } else {
        Vec::new()
    }
}

/// `end`, after noting that the server holds job `index`'s outputs (as `result` names them)
/// when they were good.
fn held(session: &Session, index: usize, end: End, result: &re::ActionResult) -> End {
    if end.problem.is_none() {
        lock(&session.state)[index].result =
            Some(result.output_files.iter().map(without_contents).collect());
    }
    end
}

/// The job's end once its outputs are in place, `problem` the first found in them (checked like
/// those of a local run); outputs with a problem are removed.
fn verified(
    session: &Session,
    index: usize,
    problem: Option<String>,
    start: f64,
    info: Info,
) -> End {
    if problem.is_some() {
        crate::job::files::remove(&session.cwd, &session.outputs[index]);
    }
    End {
        status: Status {
            code: Some(0),
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
/// never once the link is cancelled; the first problem its bytes have as an output (empty, not
/// a whole object), described.
async fn fetch_outputs(
    session: &Session,
    client: &mut Client,
    index: usize,
    job: &JobAction,
    result: &re::ActionResult,
) -> Result<Option<String>, String> {
    let mut problem = None;
    for ((inside, here), out) in job.outputs.iter().zip(&session.outputs[index]) {
        let Some(file) = result.output_files.iter().find(|f| &f.path == inside) else {
            return Err(format!("the result has no output {inside}"));
        };
        let digest = file.digest.clone().unwrap_or_default();
        let data = if !file.contents.is_empty() || digest.size_bytes == 0 {
            blob::check(&digest, &file.contents).map_err(|s| {
                format!(
                    "take output {inside} from {}: {}",
                    session.server,
                    reapi::describe(&s)
                )
            })?;
            file.contents.clone()
        } else {
            retrying(&session.health, || {
                let mut c = client.clone();
                let d = digest.clone();
                async move { c.read(&d).await }
            })
            .await
            .map_err(|s| {
                format!(
                    "fetch output {inside} from {}: {}",
                    session.server,
                    reapi::describe(&s)
                )
            })?
        };
        session
            .counters
            .downloaded_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        write_whole(here, &data, 0o666, || session.not_cancelled())
            .map_err(|e| format!("write {}: {e}", here.display()))?;
        if problem.is_none() {
            problem = crate::job::files::bytes_problem(&data).map(|p| p.describe(out));
        }
    }
    Ok(problem)
}
