//! Upload: puts in the CAS what one job needs and the server lacks, as soon as the job is sent
//! — its action's messages and its input files (a job remembered from the last link is built
//! whole first) — so that each job executes once its own inputs are there, not once the whole
//! link's are. A blob is sent once per link: the first job that needs it sends it, the others
//! wait for that. What the server lacks is asked once per job (FindMissingBlobs), and the
//! missing blobs go in batches filled to the server's limit and, when too large for one,
//! through ByteStream, several calls in flight.
//!
//! It knows which blobs a job needs and how they are sent; it does not execute anything.

use super::action::JobAction;
use super::health::retrying;
use super::reapi::{self, digest_of};
use super::session::{Sent, Session};
use crate::job::util::sync::lock;
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use futures_util::{StreamExt, TryStreamExt};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use tokio::sync::watch;

/// Upload calls one job has in flight at once: at least the first, more when the server's
/// batches are small (`reapi::Client::calls_in_flight`).
const IN_FLIGHT: (usize, usize) = (4, 32);

/// Where a blob's upload's end is told.
type Tell = watch::Sender<Option<Result<(), String>>>;
/// A job's action built whole again: itself, and the files it uses by digest.
type Rebuilt = (JobAction, Vec<(re::Digest, PathBuf)>);

/// Where a blob this job sends comes from.
enum Source<'a> {
    Message(&'a [u8]),
    File(&'a std::path::Path),
}

/// The blobs this job sends (each with the sender the jobs that wait for it watch), and the
/// blobs other jobs send for it (each with what to watch).
struct Claimed<'a> {
    mine: Vec<(re::Digest, Source<'a>, Tell)>,
    others: Vec<(re::Digest, Source<'a>, Sent)>,
}

/// The job's action built whole when it was remembered from the last link (its blobs and the
/// files it uses); None when it is whole already.
fn rebuilt(session: &Session, index: usize, job: &JobAction) -> Result<Option<Rebuilt>, String> {
    if job.whole {
        return Ok(None);
    }
    let built = match &session.keys[index] {
        Some(key) => {
            tokio::task::block_in_place(|| session.later.build(index, key, &job.action_digest))
        }
        None => Err("it was not remembered".into()),
    };
    built
        .map(Some)
        .map_err(|e| format!("build the action of job {index}: {e}"))
}

/// Takes the blobs of the job no other job sends yet (or one sent and failed, or given up by
/// a job that went away); the rest are waited for.
fn claim<'a>(session: &Session, blobs: Vec<(re::Digest, Source<'a>)>) -> Claimed<'a> {
    let mut sent = lock(&session.sent);
    let mut c = Claimed {
        mine: Vec::new(),
        others: Vec::new(),
    };
    for (digest, source) in blobs {
        let abandoned = |rx: &Sent| rx.borrow().is_none() && rx.has_changed().is_err();
        match sent.get(&digest.hash) {
            Some(rx) if !abandoned(rx) => c.others.push((digest, source, rx.clone())),
            _ => {
                let (tx, rx) = watch::channel(None);
                sent.insert(digest.hash.clone(), rx);
                c.mine.push((digest, source, tx));
            }
        }
    }
    session
        .counters
        .distinct_blobs
        .fetch_add(c.mine.len() as u64, Ordering::Relaxed);
    c
}

/// Puts in the CAS what job `index` (`job`) needs and the server lacks, and waits for the
/// blobs other jobs send for it. A blob another job failed to send (or gave up) is sent by
/// this one, once.
pub(super) async fn upload_job(
    session: &Session,
    index: usize,
    job: &JobAction,
    rank: u64,
) -> Result<(), String> {
    let rebuilt = rebuilt(session, index, job)?;
    let (messages, files): (_, Vec<&(re::Digest, PathBuf)>) = match &rebuilt {
        Some((whole, uses)) => (&whole.blobs, uses.iter().collect()),
        None => {
            let files = session.inputs[index].iter();
            (
                &job.blobs,
                files.filter_map(|hash| session.files.get(hash)).collect(),
            )
        }
    };
    let mut todo: Vec<(re::Digest, Source<'_>)> = (messages.iter())
        .map(|(d, b)| (d.clone(), Source::Message(b)))
        .chain(files.into_iter().map(|(d, p)| (d.clone(), Source::File(p))))
        .collect();
    let mut failed = None;
    for _round in 0..2 {
        let Claimed { mine, others } = claim(session, todo);
        let result = send(session, &mine, rank).await;
        if result.is_err() {
            // Not this link's for good: the next job that needs them sends them.
            let mut sent = lock(&session.sent);
            for (d, _, _) in &mine {
                sent.remove(&d.hash);
            }
        }
        for (_, _, tx) in &mine {
            let _ = tx.send(Some(result.clone()));
        }
        result?;
        todo = Vec::new();
        for (digest, source, mut rx) in others {
            let outcome = rx.wait_for(Option::is_some).await.map(|v| v.clone());
            match outcome {
                Ok(Some(Ok(()))) => {}
                Ok(Some(Err(e))) => {
                    failed = Some(e);
                    todo.push((digest, source));
                }
                // The job sending it went away before it was sent.
                _ => todo.push((digest, source)),
            }
        }
        if todo.is_empty() {
            return Ok(());
        }
    }
    Err(failed.unwrap_or_else(|| "upload: another job gave up sending a blob".into()))
}

/// Sends what the server lacks of `mine`, each call through the link's gate at the job's
/// `rank`.
async fn send(
    session: &Session,
    mine: &[(re::Digest, Source<'_>, Tell)],
    rank: u64,
) -> Result<(), String> {
    if mine.is_empty() {
        return Ok(());
    }
    let all: Vec<re::Digest> = mine.iter().map(|(d, _, _)| d.clone()).collect();
    let missing = retrying(&session.health, || {
        let mut c = session.client.clone();
        let all = all.clone();
        async move { c.find_missing(&all).await }
    })
    .await
    .map_err(|s| format!("ask the CAS which inputs it lacks: {}", reapi::describe(&s)))?;
    let sources: HashMap<&str, &Source<'_>> =
        mine.iter().map(|(d, s, _)| (d.hash.as_str(), s)).collect();
    let mut blobs = Vec::new();
    for digest in missing {
        if let Some(source) = sources.get(digest.hash.as_str()) {
            let data = bytes_of(source, &digest)?;
            blobs.push((digest, data));
        }
    }
    let calls = reapi::pack(blobs, session.client.max_batch, |(_, data)| data.len());
    futures_util::stream::iter(calls.into_iter().map(|call| send_call(session, call, rank)))
        .buffer_unordered(session.client.calls_in_flight(IN_FLIGHT.0, IN_FLIGHT.1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The bytes of a blob the server lacks, checked against its digest when read from a file.
fn bytes_of(source: &Source<'_>, digest: &re::Digest) -> Result<Vec<u8>, String> {
    let path = match source {
        Source::Message(bytes) => return Ok(bytes.to_vec()),
        Source::File(path) => path,
    };
    let data = tokio::task::block_in_place(|| std::fs::read(path))
        .map_err(|e| format!("read {}: {e}", path.display()))?;
    if digest_of(&data) != *digest {
        return Err(format!("{} changed while the link ran", path.display()));
    }
    Ok(data)
}

/// One upload call: a batch, or one blob too large for a batch through ByteStream.
async fn send_call(
    session: &Session,
    call: Vec<(re::Digest, Vec<u8>)>,
    rank: u64,
) -> Result<(), String> {
    let n = call.len();
    let bytes: usize = call.iter().map(|(_, d)| d.len()).sum();
    let stream = n == 1 && !session.client.batchable(bytes);
    retrying(&session.health, || {
        let mut c = session.client.clone();
        let call = &call;
        async move {
            // Through the gate for each attempt: none holds it while it waits to try again.
            let _pass = session.gate.pass(rank, bytes).await;
            match stream {
                true => {
                    let (digest, data) = &call[0];
                    c.stream_upload(digest, data).await
                }
                false => c.batch_upload(call.clone()).await,
            }
        }
    })
    .await
    .map_err(|s| format!("upload {n} blob(s): {}", reapi::describe(&s)))?;
    session
        .counters
        .uploaded_blobs
        .fetch_add(n as u64, Ordering::Relaxed);
    session
        .counters
        .uploaded_bytes
        .fetch_add(bytes as u64, Ordering::Relaxed);
    Ok(())
}
