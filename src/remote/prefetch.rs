//! Prefetch: a relink's objects read from the server while the link is still planned. The last
//! link of the same output left each job's outputs' digests (`memo::jobs`); a relink most often
//! takes those same objects back from the action cache, so they are read, in batches, several
//! calls in flight, as soon as the connection is made, and the lookup takes the ones its hits
//! name as they come (`lookup`) instead of reading them after the link's entry has answered.
//!
//! It knows which blobs to read early and how many bytes at most; the reading checks each blob
//! against its digest (`reapi`), and it trusts nothing more: a blob it read that no hit names is
//! dropped, and one it could not read is read again by the lookup. When the link's entry does
//! not answer (the link changed), the prefetch stops. It writes nothing.

use super::reapi::Client;
use super::session::{Counters, Shared};
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use futures_util::StreamExt;
use std::sync::atomic::Ordering;
use tokio::sync::mpsc;

/// Blobs read, by hash.
pub(super) type Blobs = Vec<(String, Vec<u8>)>;

/// The most bytes read ahead: what a lookup holds in memory at once.
const MOST: u64 = 256 << 20;
/// Batch reads in flight at once: at least this many, more when the server's batches are small.
const READS: (usize, usize) = (8, 64);

/// The reads under way: their blobs as each call brings them.
pub(super) struct Prefetch {
    task: tokio::task::JoinHandle<()>,
    arrived: mpsc::UnboundedReceiver<Blobs>,
}

impl Prefetch {
    /// The last link's objects read on `connection` (`known` remembers them): a relink most
    /// likely takes them back. Not without the action cache, nor with a disk cache (it has
    /// them).
    pub(super) fn for_relink(
        options: &super::options::Options,
        connection: &super::connect::Connection,
        known: &super::memo::jobs::RememberedJobs,
    ) -> Option<Prefetch> {
        let disk = options.disk.is_some() && options.disk_unused().is_none();
        if !options.cache || disk {
            return None;
        }
        let c = connection;
        Prefetch::start(&c.rt, &c.client, known.last_outputs(), &c.shared)
    }

    /// Starts reading `digests` (the last link's outputs) on `rt`, unless there are none or
    /// more than MOST bytes; `shared` holds the link's cancel and byte counters.
    fn start(
        rt: &tokio::runtime::Runtime,
        client: &Client,
        digests: Vec<re::Digest>,
        shared: &Shared,
    ) -> Option<Prefetch> {
        let bytes: u64 = digests
            .iter()
            .map(|d| u64::try_from(d.size_bytes).unwrap_or(u64::MAX))
            .fold(0, u64::saturating_add);
        if digests.is_empty() || bytes > MOST {
            return None;
        }
        let (tell, arrived) = mpsc::unbounded_channel();
        let (client, counters) = (client.clone(), shared.counters.clone());
        let mut cancelled = shared.cancelled.clone();
        let task = rt.spawn(async move {
            let read = read(client, digests, &counters, tell);
            tokio::select! {
                () = read => {}
                _ = cancelled.wait_for(|c| *c) => {}
            }
        });
        Some(Prefetch { task, arrived })
    }

    /// The next blobs read, as they come; None once every read has ended.
    pub(super) async fn next(&mut self) -> Option<Blobs> {
        self.arrived.recv().await
    }
}

impl Drop for Prefetch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads `digests`: small blobs in batches filled to the server's limit, each larger one alone,
/// several calls in flight; each call's blobs read whole and checked go to `tell`. A call that
/// fails leaves its blobs to the lookup.
async fn read(
    client: Client,
    digests: Vec<re::Digest>,
    counters: &Counters,
    tell: mpsc::UnboundedSender<Blobs>,
) {
    let size = |d: &re::Digest| usize::try_from(d.size_bytes).unwrap_or(usize::MAX);
    let (small, large): (Vec<_>, Vec<_>) =
        digests.into_iter().partition(|d| client.batchable(size(d)));
    let mut calls = super::upload::pack(small, client.max_batch.max(1), size);
    calls.extend(large.into_iter().map(|d| vec![d]));
    let in_flight = client.calls_in_flight(READS.0, READS.1);
    let mut reads = futures_util::stream::iter(calls)
        .map(|call| {
            let mut client = client.clone();
            async move {
                let got = match call.as_slice() {
                    [one] => Ok(vec![client.read(one).await]),
                    _ => client.batch_read(&call).await,
                };
                (call, got)
            }
        })
        .buffer_unordered(in_flight);
    while let Some((call, got)) = reads.next().await {
        let Ok(got) = got else { continue };
        let blobs: Blobs = (call.into_iter().zip(got))
            .filter_map(|(d, got)| Some((d.hash, got.ok()?)))
            .collect();
        let bytes: usize = blobs.iter().map(|(_, b)| b.len()).sum();
        (counters.downloaded_bytes).fetch_add(bytes as u64, Ordering::Relaxed);
        if tell.send(blobs).is_err() {
            return;
        }
    }
}
