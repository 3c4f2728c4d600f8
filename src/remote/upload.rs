//! Upload: puts in the CAS what the server lacks of every input and action message of the
//! jobs still to run, once per link — the jobs remembered from the last link built whole
//! first, one FindMissingBlobs, then batches filled to the server's limit and large blobs
//! through ByteStream.
//!
//! It knows which blobs each job needs and how they are sent; it does not execute anything.

use super::action::JobAction;
use super::health::retrying;
use super::reapi::{self, digest_of};
use super::session::Session;
use crate::util::fsutil::lock;
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// The blobs of a link's upload: the action messages by digest (held in memory), the input
/// files by digest (read when sent), and every digest once.
#[derive(Default)]
struct Needed<'a> {
    messages: HashMap<String, &'a [u8]>,
    files: HashMap<&'a String, &'a (re::Digest, PathBuf)>,
    all: Vec<re::Digest>,
}

/// The actions of the jobs to run, remembered from the last link, built whole now on every
/// core; one that cannot be (it is not what was remembered) fails alone, and runs here.
fn rebuild(ctx: &Session, to_run: &[usize]) -> Vec<(JobAction, Vec<(re::Digest, PathBuf)>)> {
    let rebuilt: Vec<(usize, super::plan::Built)> = tokio::task::block_in_place(|| {
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
    let mut state = lock(&ctx.state);
    rebuilt
        .into_iter()
        .filter_map(|(i, built)| match built {
            Ok(built) => Some(built),
            Err(e) => {
                state[i].unbuilt = Some(format!("remote: build the action of job {i}: {e}"));
                None
            }
        })
        .collect()
}

/// Every blob the jobs of `to_run` need, each once.
fn needed<'a>(
    ctx: &'a Session,
    to_run: &[usize],
    rebuilt: &'a [(JobAction, Vec<(re::Digest, PathBuf)>)],
) -> Needed<'a> {
    let mut n = Needed {
        files: ctx.files.iter().collect(),
        ..Needed::default()
    };
    let mut seen = HashSet::new();
    let mut used: HashSet<&String> = to_run.iter().flat_map(|&i| &ctx.inputs[i]).collect();
    for (_, uses) in rebuilt {
        for found in uses {
            n.files.insert(&found.0.hash, found);
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
            n.messages.insert(digest.hash.clone(), bytes);
            n.all.push(digest.clone());
        }
    }
    for (digest, _) in n.files.values() {
        if used.contains(&digest.hash) && seen.insert(digest.hash.clone()) {
            n.all.push(digest.clone());
        }
    }
    n
}

/// Uploads what the server lacks of every input and every action message of the link, once.
pub(super) async fn upload_all(ctx: &Session) -> Result<(), String> {
    let to_run: Vec<usize> = {
        let state = lock(&ctx.state);
        (0..ctx.jobs.len()).filter(|&i| !state[i].hit).collect()
    };
    let rebuilt = rebuild(ctx, &to_run);
    let needed = needed(ctx, &to_run, &rebuilt);
    ctx.counters
        .distinct_blobs
        .store(needed.all.len() as u64, Ordering::Relaxed);
    let missing = retrying(&ctx.health, &ctx.server, || {
        let mut c = ctx.client.clone();
        let all = needed.all.clone();
        async move { c.find_missing(&all).await }
    })
    .await
    .map_err(|s| format!("ask the CAS which inputs it lacks: {}", reapi::describe(&s)))?;

    let mut batch: Vec<(re::Digest, Vec<u8>)> = Vec::new();
    let mut batch_size = 0;
    let max = ctx.client.max_batch;
    for digest in missing {
        let Some(data) = bytes_of(&needed, &digest)? else {
            continue;
        };
        if !ctx.client.batchable(data.len()) {
            send_stream(ctx, digest, data).await?;
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

/// The bytes of a blob the server lacks (None: not one of the link's), checked against its
/// digest when read from a file.
fn bytes_of(needed: &Needed<'_>, digest: &re::Digest) -> Result<Option<Vec<u8>>, String> {
    if let Some(b) = needed.messages.get(&digest.hash) {
        return Ok(Some(b.to_vec()));
    }
    let Some((_, path)) = needed.files.get(&digest.hash) else {
        return Ok(None);
    };
    let data = std::fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    if digest_of(&data) != *digest {
        return Err(format!("{} changed while the link ran", path.display()));
    }
    Ok(Some(data))
}

/// Uploads one blob too large for a batch through ByteStream.
async fn send_stream(ctx: &Session, digest: re::Digest, data: Vec<u8>) -> Result<(), String> {
    retrying(&ctx.health, &ctx.server, || {
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
    Ok(())
}

async fn send_batch(ctx: &Session, batch: Vec<(re::Digest, Vec<u8>)>) -> Result<(), String> {
    let n = batch.len();
    let bytes: usize = batch.iter().map(|(_, d)| d.len()).sum();
    retrying(&ctx.health, &ctx.server, || {
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
