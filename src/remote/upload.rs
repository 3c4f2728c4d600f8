//! Upload: puts in the CAS what the server lacks of every input and action message of the
//! jobs still to run, once per link — the jobs remembered from the last link built whole
//! first, one FindMissingBlobs, then batches filled to the server's limit and large blobs
//! through ByteStream.
//!
//! It knows which blobs each job needs and how they are sent; it does not execute anything.

use super::action::JobAction;
use super::reapi::{self, digest_of};
use super::session::{retrying, Session};
use crate::util::fsutil::lock;
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// Uploads what the server lacks of every input and every action message of the link, once.
pub(super) async fn upload_all(ctx: &Session) -> Result<(), String> {
    let mut blobs: HashMap<String, &[u8]> = HashMap::new();
    let mut all: Vec<re::Digest> = Vec::new();
    let mut seen = HashSet::new();
    let to_run: Vec<usize> = {
        let state = lock(&ctx.state);
        (0..ctx.jobs.len()).filter(|&i| !state[i].hit).collect()
    };
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
    {
        let mut state = lock(&ctx.state);
        for (i, why) in unbuilt {
            state[i].unbuilt = Some(why);
        }
    }
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
                if digest_of(&data) != digest {
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

async fn send_batch(ctx: &Session, batch: Vec<(re::Digest, Vec<u8>)>) -> Result<(), String> {
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
