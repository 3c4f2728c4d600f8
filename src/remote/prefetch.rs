//! Prefetch: a relink's objects read from the server while the link is still planned. The last
//! link of the same output left each job's outputs' digests (`memo::jobs`); a relink most often
//! takes those same objects back from the action cache, so as soon as the connection is made
//! and no job leads (`connect`) they are read, in batches, several calls in flight, while the
//! other inputs and the shards' summaries are read and the actions built, and the lookup takes
//! the ones its hits name as they come (`lookup`) instead of reading them after the link's
//! entry has answered.
//!
//! It knows which blobs to read early and how many bytes at most; the reading checks each blob
//! against its digest (`reapi`), and it trusts nothing more: a blob it read that no hit names is
//! dropped, and one it could not read is read again by the lookup. It does not start when a job
//! leads (one of the costliest is not remembered: the link changed), and stops when the link's
//! entry does not answer, at the first call that fails, and once the lookup is over. It writes
//! nothing.

use super::health::Health;
use super::reapi::{Client, ReadAnswer};
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Blobs read, by hash.
pub(super) type Blobs = Vec<(String, Vec<u8>)>;

/// The reads under way: their blobs as each call brings them.
pub(super) struct Prefetch {
    task: tokio::task::JoinHandle<()>,
    arrived: mpsc::UnboundedReceiver<Blobs>,
}

impl Prefetch {
    /// Starts reading `digests` (the last link's outputs) on `rt`, unless there are none or
    /// more than `most` bytes (what the lookup holds in memory at once); `cancelled` is the
    /// link's cancel, `count` told the bytes each call brought.
    pub(super) fn start(
        rt: &tokio::runtime::Runtime,
        client: &Client,
        digests: Vec<re::Digest>,
        most: u64,
        mut cancelled: tokio::sync::watch::Receiver<bool>,
        health: Arc<Health>,
        count: impl Fn(u64) + Send + 'static,
    ) -> Option<Prefetch> {
        let bytes: u64 = digests
            .iter()
            .map(|d| u64::try_from(d.size_bytes).unwrap_or(u64::MAX))
            .fold(0, u64::saturating_add);
        if digests.is_empty() || bytes > most {
            return None;
        }
        let (tell, arrived) = mpsc::unbounded_channel();
        let client = client.clone();
        let task = rt.spawn(async move {
            let read = read(client, digests, &health, count, tell);
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

/// Reads `digests` in the client's read calls (`Client::read_each`); each call's blobs read
/// whole and checked go to `tell`. The first call that fails ends it, and leaves what is left
/// to the lookup.
async fn read(
    client: Client,
    digests: Vec<re::Digest>,
    health: &Health,
    count: impl Fn(u64),
    tell: mpsc::UnboundedSender<Blobs>,
) {
    let each = move |call: Vec<re::Digest>, got: ReadAnswer| {
        // A call that failed ends the reading ahead (the server told of it): the lookup reads
        // what is left itself, and waits for no more of these.
        health.saw(&got);
        let Ok(got) = got else { return false };
        let blobs: Blobs = (call.into_iter().zip(got))
            .filter_map(|(d, got)| Some((d.hash, got.ok()?)))
            .collect();
        let bytes: usize = blobs.iter().map(|(_, b)| b.len()).sum();
        count(bytes as u64);
        tell.send(blobs).is_ok()
    };
    client.read_each(digests, || true, each).await;
}
