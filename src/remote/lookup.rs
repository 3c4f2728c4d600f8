//! Lookup: decides a link's cache hits before the scheduler starts any job (only the costliest,
//! `lead`, may be under way: each asked for itself, and its hit is written here). With a disk
//! cache, a job remembered with its last result whose outputs are kept there comes first,
//! copied, the server not asked (each kept file hashed against its digest and checked as an
//! object). Then the link's own entry (`entry`): one action-cache entry, keyed by every job's
//! action, that names every job's outputs. Then the action of each job still unknown, many
//! calls in flight, unless every lead missed (the rest then ask through their Execute). The
//! hits' outputs are fetched in batches and written atomically, and verified like local ones.
//! Once the link is over it remembers each job's result and keeps its outputs on disk (`keep`).
//!
//! It knows the action cache; it does not run jobs (the runner does the misses) or decide what
//! a miss does.

use crate::job::files;
use crate::job::outcome::RemoteEnd as End;
use crate::job::util::sync::lock;
use crate::job::util::whole::write_whole;
use crate::remote::blob;
use crate::remote::reapi;
use crate::remote::session::{info_of, without_contents, Session};
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::io::ErrorKind;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// GetActionResult calls in flight at once: a first link of a thousand jobs asks in a few
/// rounds, however late the server answers each call.
const IN_FLIGHT: usize = 256;
/// The most bytes of outputs held in memory at once, fetched and not yet written.
pub(super) const HELD: i64 = 256 << 20;

/// An output to write: where it goes, and its bytes.
type Output<'a> = (&'a std::path::Path, &'a [u8]);

/// Each job's outputs in a cached result (path inside the action, digest, inline bytes).
type Files = Vec<re::OutputFile>;

/// Looks every job up, fetches the hits' outputs and writes them; each hit's end (None for a
/// miss). Nothing is written once the link is cancelled.
pub(super) async fn look_up(session: Arc<Session>) -> Vec<Option<End>> {
    let n = session.jobs.len();
    let t = std::time::Instant::now();
    let mut ends = from_disk(&session);
    let mut found: Vec<Option<(Files, String)>> = vec![None; n];
    // Each job started ahead of the rest (`lead`) asked for itself as soon as it could: its hit
    // is written with the others'.
    let looked = std::mem::take(&mut *lock(&session.lead_looked));
    let (led, mut led_hits) = (looked.len(), 0);
    for (i, hit) in looked {
        if let (Ok(Some(hit)), None) = (hit.await, &ends[i]) {
            found[i] = Some(hit);
            led_hits += 1;
        }
    }
    let rest = (0..n).any(|i| ends[i].is_none() && session.jobs[i].is_some() && !session.lead[i]);
    let answered = rest && from_entry(&session, &ends, &mut found).await;
    if !answered {
        // The link changed: the last link's objects are no longer read ahead.
        drop(lock(&session.prefetch).take());
    }
    // Leads that all missed, and no entry: the cache does not know this link's actions, and a
    // lookup of each job would most likely miss too. The rest ask through their Execute, which
    // looks the cache up itself (a hit there is as good), instead of one call each before
    // anything starts.
    if led == 0 || led_hits > 0 || answered {
        ask_each(&session, &ends, &mut found).await;
    }
    let lookup_seconds = t.elapsed().as_secs_f64();
    // Fetched and written a part at a time, so that the link holds at most HELD bytes (and
    // nothing read ahead beside them: a part would drop what a later one needs).
    let total: i64 = found
        .iter()
        .flatten()
        .map(|(files, _)| bytes_of(files))
        .sum();
    if total > HELD {
        drop(lock(&session.prefetch).take());
    }
    let mut part: Vec<(usize, Files, String)> = Vec::new();
    let mut bytes = 0;
    for (i, hit) in found.into_iter().enumerate() {
        let Some((files, worker)) = hit else { continue };
        let size = bytes_of(&files);
        if !part.is_empty() && bytes + size > HELD {
            write_part(
                &session,
                std::mem::take(&mut part),
                &mut ends,
                lookup_seconds,
            )
            .await;
            bytes = 0;
        }
        bytes += size;
        part.push((i, files, worker));
    }
    write_part(&session, part, &mut ends, lookup_seconds).await;
    drop(lock(&session.prefetch).take());
    // An entry that answered for every job stands; one that did not (a lead that missed, or
    // whose hit could not be taken, among them) is written again.
    let whole = answered && ends.iter().all(Option::is_some);
    session.entry_found.store(whole, Ordering::Relaxed);
    ends
}

/// The bytes a hit's outputs declare.
fn bytes_of(files: &Files) -> i64 {
    files
        .iter()
        .flat_map(|f| &f.digest)
        .map(|d| d.size_bytes)
        .sum()
}

/// Each job's outputs as the link's entry names them, in `found` (the jobs without an end);
/// whether the entry answered.
async fn from_entry(
    session: &Session,
    ends: &[Option<End>],
    found: &mut [Option<(Files, String)>],
) -> bool {
    let Some(entry) = session.entry.as_ref() else {
        return false;
    };
    let mut client = session.client.clone();
    let got = client.cached(&entry.key).await;
    session.health.saw(&got);
    let Ok(Some(result)) = got else {
        return false;
    };
    if result.exit_code != 0 {
        return false;
    }
    for file in result.output_files {
        let Some((i, path)) = file.path.split_once('/') else {
            continue;
        };
        let i = i
            .parse::<usize>()
            .ok()
            .filter(|&i| ends.get(i).is_some_and(Option::is_none) && !session.lead[i]);
        let Some(slot) = i.and_then(|i| found.get_mut(i)) else {
            continue;
        };
        let (files, _) = slot.get_or_insert_with(|| (Vec::new(), String::new()));
        files.push(re::OutputFile {
            path: path.to_string(),
            ..file
        });
    }
    true
}

/// Asks the action cache for job `index`: its outputs and worker when it has them (and the
/// result is a success), None for a miss, or when the server is down or the cache off.
pub(super) async fn ask_one(session: &Session, index: usize) -> Option<(Files, String)> {
    let job = session.jobs[index].as_ref()?;
    if !session.cache || session.health.down().is_some() {
        return None;
    }
    let got = session.client.clone().cached(&job.action_digest).await;
    session.health.saw(&got);
    let result = got.ok().flatten().filter(|r| r.exit_code == 0)?;
    let worker = (result.execution_metadata)
        .map(|m| m.worker)
        .unwrap_or_default();
    Some((result.output_files, worker))
}

/// Asks the action cache for each job still unknown, IN_FLIGHT calls at once, its outputs and
/// worker put in `found`.
async fn ask_each(
    session: &Arc<Session>,
    ends: &[Option<End>],
    found: &mut [Option<(Files, String)>],
) {
    let todo: Vec<usize> = (0..session.jobs.len())
        .filter(|&i| {
            found[i].is_none() && ends[i].is_none() && session.jobs[i].is_some() && !session.lead[i]
        })
        .collect();
    let mut calls = tokio::task::JoinSet::new();
    let mut next = todo.into_iter();
    loop {
        // A server found unreachable is asked nothing more: the jobs left are misses.
        while calls.len() < IN_FLIGHT && session.health.down().is_none() {
            let Some(i) = next.next() else { break };
            let session = session.clone();
            calls.spawn(async move { (i, ask_one(&session, i).await) });
        }
        let Some(done) = calls.join_next().await else {
            break;
        };
        if let Ok((i, Some(hit))) = done {
            found[i] = Some(hit);
        }
    }
}

/// Each job's end when its outputs came from the disk cache (None for the others): a job
/// remembered with its last result, whose every output is kept there, each placed, or none.
/// A job started ahead of the rest (`lead`, never one remembered) is not looked for.
fn from_disk(session: &Session) -> Vec<Option<End>> {
    let n = session.jobs.len();
    let Some(disk) = &session.disk else {
        return vec![None; n];
    };
    let t = std::time::Instant::now();
    // In the link's directory (as always), outputs are placed by their shorter relative paths.
    let here_is_cwd = std::env::current_dir().is_ok_and(|d| d == session.cwd);
    let ends: Vec<Option<End>> = (0..n)
        .into_par_iter()
        .map(|i| {
            let job = session.jobs[i].as_ref().filter(|_| !session.lead[i])?;
            if job.last.len() != job.outputs.len() || *session.cancelled.borrow() {
                return None;
            }
            let pairs = || job.outputs.iter().zip(&job.last);
            let mut placed = Vec::new();
            for ((_, here), d) in pairs() {
                let near = match here_is_cwd {
                    true => here.strip_prefix(&session.cwd).unwrap_or(here),
                    false => here,
                };
                if let Err(e) = disk.place(&d.hash, d.size_bytes, near) {
                    // Not kept, or kept wrong (replaced when the output comes again): a miss.
                    if !matches!(e.kind(), ErrorKind::NotFound | ErrorKind::InvalidData) {
                        let problem = format!("take {} from the disk cache: {e}", here.display());
                        lock(&session.lookup_problems).push(problem);
                    }
                    for here in placed {
                        let _ = std::fs::remove_file(here);
                    }
                    return None;
                }
                placed.push(here);
            }
            let files = pairs()
                .map(|((inside, _), d)| re::OutputFile {
                    path: inside.clone(),
                    digest: Some(d.clone()),
                    ..Default::default()
                })
                .collect();
            let state = &mut lock(&session.state)[i];
            state.result = Some(files);
            state.from_disk = true;
            let mut info = info_of(job);
            info.download_seconds = t.elapsed().as_secs_f64();
            Some(End::cached(info, "disk cache".into()))
        })
        .collect();
    ends
}

/// Remembers, with each job's action, its outputs' digests in this link's result (`memo::jobs`),
/// and keeps the outputs in the disk cache, when there is one. An error names the first
/// output that could not be kept, and why.
pub(super) fn keep(session: &Session) -> Result<(), String> {
    let state = lock(&session.state);
    let failed: Option<String> = (0..session.jobs.len())
        .into_par_iter()
        .filter_map(|i| {
            let (job, files) = (session.jobs[i].as_ref()?, state[i].result.as_ref()?);
            let digests = job
                .outputs
                .iter()
                .map(|(inside, _)| files.iter().find(|f| &f.path == inside)?.digest.clone())
                .collect::<Option<Vec<_>>>()?;
            // Kept only for a job remembered: no other can take it back.
            if !session
                .later
                .known
                .results(session.keys[i].as_ref()?, &digests)
            {
                return None;
            }
            let disk = session.disk.as_ref().filter(|_| !state[i].from_disk)?;
            job.outputs.iter().zip(&digests).find_map(|((_, here), d)| {
                let e = disk.keep(here, &d.hash).err()?;
                Some(format!("keep {} in the disk cache: {e}", here.display()))
            })
        })
        .min();
    if let Some(disk) = &session.disk {
        disk.trim();
    }
    failed.map_or(Ok(()), Err)
}

/// Fetches the outputs of `part`'s hits, checks them and writes them, setting their `ends`.
/// Each hit is written as soon as its outputs have come, while the rest are fetched.
async fn write_part(
    session: &Arc<Session>,
    part: Vec<(usize, Files, String)>,
    ends: &mut [Option<End>],
    lookup_seconds: f64,
) {
    if part.is_empty() || *session.cancelled.borrow() {
        return;
    }
    let t = std::time::Instant::now();
    let (fetched, arrived) = std::sync::mpsc::channel();
    let writer = tokio::task::spawn_blocking({
        let session = session.clone();
        let part: Vec<(usize, Files)> = part.iter().map(|(i, f, _)| (*i, f.clone())).collect();
        move || write_as_fetched(&session, &part, arrived)
    });
    let wrong = fetch(session, &part, fetched).await;
    let written = writer.await.unwrap_or_default();
    for ((i, files, worker), ok) in part.into_iter().zip(written) {
        let Some(job) = session.jobs[i].as_ref() else {
            continue;
        };
        if !ok {
            refuse(session, i, &files, &wrong);
            continue;
        }
        let mut info = info_of(job);
        info.execute_seconds = lookup_seconds;
        info.download_seconds = t.elapsed().as_secs_f64();
        lock(&session.state)[i].result = Some(files.iter().map(without_contents).collect());
        ends[i] = Some(End::cached(info, worker));
    }
}

/// A hit whose outputs could not all be taken (evicted from the CAS, sent wrong, not objects):
/// the job executes past the cache, whose entry it then replaces. One the server sent wrong is
/// told to the user, with the blob and the server.
fn refuse(session: &Session, i: usize, files: &Files, wrong: &[(String, String)]) {
    lock(&session.state)[i].bad_result = true;
    let hashes: Vec<&str> = files
        .iter()
        .filter_map(|f| f.digest.as_ref())
        .map(|d| d.hash.as_str())
        .collect();
    if let Some((_, why)) = wrong.iter().find(|(h, _)| hashes.contains(&h.as_str())) {
        let problem = format!(
            "take job {i}'s cached output from {}: {why}",
            session.server
        );
        lock(&session.lookup_problems).push(problem);
    }
}

/// Writes each hit of `part` once every output it has came through `arrived` (blobs by
/// digest), each whole or not at all, on every core; whether each hit's were all written. A
/// hit whose outputs did not all come, or that came once the link was cancelled, is not
/// written; one whose output is no object is not written, and executes, never from the cache.
fn write_as_fetched(
    session: &Session,
    part: &[(usize, Files)],
    arrived: std::sync::mpsc::Receiver<Vec<(String, Vec<u8>)>>,
) -> Vec<bool> {
    // Each hit's outputs: where each goes, and the digest it must have.
    let outputs: Vec<Option<Vec<(&std::path::Path, &str)>>> = part
        .iter()
        .map(|(i, files)| {
            let job = session.jobs[*i].as_ref()?;
            job.outputs
                .iter()
                .map(|(inside, here)| {
                    let file = files.iter().find(|f| &f.path == inside)?;
                    Some((here.as_path(), file.digest.as_ref()?.hash.as_str()))
                })
                .collect()
        })
        .collect();
    let mut waiting: HashMap<&str, Vec<usize>> = HashMap::new();
    for (k, outs) in outputs.iter().enumerate() {
        for (_, hash) in outs.iter().flatten() {
            waiting.entry(hash).or_default().push(k);
        }
    }
    let mut have: HashMap<String, Vec<u8>> = HashMap::new();
    let mut written = vec![false; part.len()];
    for blobs in arrived {
        let mut ready = Vec::new();
        for (hash, bytes) in blobs {
            for &k in waiting.get(hash.as_str()).into_iter().flatten() {
                ready.push(k);
            }
            have.insert(hash, bytes);
        }
        ready.sort_unstable();
        ready.dedup();
        let ready: Vec<(usize, Vec<Output<'_>>)> = ready
            .into_iter()
            .filter_map(|k| {
                let outs = outputs[k].as_ref()?;
                let data = outs
                    .iter()
                    .map(|(here, hash)| Some((*here, have.get(*hash)?.as_slice())))
                    .collect::<Option<Vec<_>>>()?;
                Some((k, data))
            })
            .collect();
        let done: Vec<(usize, bool)> = ready
            .par_iter()
            .filter_map(|(k, data)| {
                if data.iter().any(|(_, d)| files::bytes_problem(d).is_some()) {
                    // A cached result that is no object: the job executes, never from the cache.
                    lock(&session.state)[part[*k].0].bad_result = true;
                    return None;
                }
                let ok = data.iter().all(|(here, bytes)| {
                    write_whole(here, bytes, 0o666, || session.not_cancelled()).is_ok()
                });
                if !ok {
                    files::remove(&session.cwd, &session.outputs[part[*k].0]);
                }
                Some((*k, ok))
            })
            .collect();
        for (k, ok) in done {
            written[k] = ok;
        }
    }
    written
}

/// Every output the hits need, by digest, sent through `fetched` as it comes: inline ones as
/// given, the rest read in batches (and one by one beyond the batch limit), several calls in
/// flight, each checked against its digest. A blob that cannot be read is left out: its job is
/// then a miss. Returns the blobs the server sent wrong (another size or other bytes than their
/// digest's, or declared too large), each with what was wrong.
async fn fetch(
    session: &Session,
    part: &[(usize, Files, String)],
    fetched: std::sync::mpsc::Sender<Vec<(String, Vec<u8>)>>,
) -> Vec<(String, String)> {
    let mut asked = HashSet::new();
    let mut reads: Vec<re::Digest> = Vec::new();
    let mut inline = Vec::new();
    let mut wrong = Vec::new();
    for file in part.iter().flat_map(|(_, files, _)| files) {
        let Some(d) = &file.digest else { continue };
        if !asked.insert(d.hash.clone()) {
            continue;
        }
        if !file.contents.is_empty() || d.size_bytes == 0 {
            match blob::check(d, &file.contents) {
                Ok(()) => inline.push((d.hash.clone(), file.contents.clone())),
                Err(e) => wrong.push((d.hash.clone(), reapi::describe(&e))),
            }
            continue;
        }
        match blob::declared(d) {
            Ok(_) => reads.push(d.clone()),
            Err(e) => wrong.push((d.hash.clone(), reapi::describe(&e))),
        }
    }
    let mut downloaded: u64 = inline.iter().map(|(_, d)| d.len() as u64).sum();
    let _ = fetched.send(inline);
    // The blobs read ahead (counted there) come first, as they arrive; the rest are read here.
    read_ahead(session, &mut reads, &fetched).await;
    // A server found unreachable is asked nothing more: the jobs left are misses.
    let up = || session.health.down().is_none();
    let each = |call: Vec<re::Digest>, got: reapi::ReadAnswer| {
        session.health.saw(&got);
        let mut blobs = Vec::new();
        for (d, got) in call.into_iter().zip(got.unwrap_or_default()) {
            match got {
                Ok(data) => blobs.push((d.hash, data)),
                Err(e) if wrong_blob(e.code()) => wrong.push((d.hash, reapi::describe(&e))),
                Err(_) => {}
            }
        }
        downloaded += blobs.iter().map(|(_, d)| d.len() as u64).sum::<u64>();
        let _ = fetched.send(blobs);
        true
    };
    session.client.read_each(reads, up, each).await;
    session
        .counters
        .downloaded_bytes
        .fetch_add(downloaded, Ordering::Relaxed);
    wrong
}

/// Sends through `fetched` the blobs of `reads` the prefetch brings, as they come, and leaves
/// in `reads` only those it did not bring.
async fn read_ahead(
    session: &Session,
    reads: &mut Vec<re::Digest>,
    fetched: &std::sync::mpsc::Sender<Vec<(String, Vec<u8>)>>,
) {
    let Some(mut prefetch) = lock(&session.prefetch).take() else {
        return;
    };
    let mut wanted: HashSet<String> = reads.iter().map(|d| d.hash.clone()).collect();
    while !wanted.is_empty() {
        let Some(blobs) = prefetch.next().await else {
            break;
        };
        let blobs: Vec<_> = (blobs.into_iter())
            .filter(|(hash, _)| wanted.remove(hash))
            .collect();
        let _ = fetched.send(blobs);
    }
    reads.retain(|d| wanted.contains(&d.hash));
    // A later part may take what this one did not.
    *lock(&session.prefetch) = Some(prefetch);
}

/// Whether a read failed because the server sent a blob other than the one asked for.
fn wrong_blob(code: tonic::Code) -> bool {
    matches!(code, tonic::Code::DataLoss | tonic::Code::OutOfRange)
}
