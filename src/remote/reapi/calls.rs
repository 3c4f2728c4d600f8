//! Calls: how blobs are grouped into calls — batches filled to the server's limit, each blob
//! too large for a batch alone (through ByteStream) — for uploads and reads, and the reads of
//! many blobs made of them, several calls in flight.
//!
//! It knows sizes and the server's limit; what a call sends and checks is the client's, and
//! what the blobs read are for, the caller's.

use bazel_remote_apis::build::bazel::remote::execution::v2 as re;

/// A read call's answer: each blob read whole and checked against its digest, or why not; or
/// why the call failed as a whole.
pub type ReadAnswer = Result<Vec<Result<Vec<u8>, tonic::Status>>, tonic::Status>;

/// Runs `calls`, `in_flight` at once, each on a task of its own (`start` makes each one);
/// `each` is given every call's digests and answer as the call ends, and says whether to go
/// on. No call starts once `go` says no (those under way still end and are told); dropped,
/// or once `each` says no, every call under way stops.
pub async fn each_call<F>(
    calls: Vec<Vec<re::Digest>>,
    in_flight: usize,
    start: impl Fn(Vec<re::Digest>) -> F,
    go: impl Fn() -> bool,
    mut each: impl FnMut(Vec<re::Digest>, ReadAnswer) -> bool,
) where
    F: std::future::Future<Output = (Vec<re::Digest>, ReadAnswer)> + Send + 'static,
{
    let mut calls = calls.into_iter();
    let mut running = tokio::task::JoinSet::new();
    loop {
        while running.len() < in_flight && go() {
            let Some(call) = calls.next() else { break };
            running.spawn(start(call));
        }
        let Some(Ok((call, got))) = running.join_next().await else {
            break;
        };
        if !each(call, got) {
            break;
        }
    }
}

/// Whether a blob of `size` bytes fits in a batch of `max_batch` bytes (with room for its
/// digest and framing).
pub fn fits(size: usize, max_batch: usize) -> bool {
    size.saturating_add(1024) <= max_batch
}

/// The read calls of `digests` on a server whose batches hold `max_batch` bytes: batches of at
/// most READ_BATCH (or that limit, when smaller), the largest blobs placed first, each in the
/// batch with the least room left that holds it (fewer calls than filling them in the order
/// given: on a server of small batches, each call is a round trip and the server's work); then
/// each blob too large for a batch alone.
pub fn read_calls(mut digests: Vec<re::Digest>, max_batch: usize) -> Vec<Vec<re::Digest>> {
    let size = |d: &re::Digest| usize::try_from(d.size_bytes).unwrap_or(usize::MAX);
    digests.sort_by_key(|d| std::cmp::Reverse(size(d)));
    let (small, large): (Vec<_>, Vec<_>) =
        (digests.into_iter()).partition(|d| fits(size(d), max_batch));
    let max = max_batch.clamp(1, READ_BATCH);
    let mut batches: Vec<Vec<re::Digest>> = Vec::new();
    // Each batch's room left, and its index: the least room that holds a blob is found in
    // log time, for links of any number of blobs.
    let mut room: std::collections::BTreeSet<(usize, usize)> = Default::default();
    for d in small {
        let cost = size(&d).saturating_add(1024);
        let k = match room.range((cost, 0)..).next().copied() {
            Some((left, k)) => {
                room.remove(&(left, k));
                room.insert((left - cost, k));
                k
            }
            None => {
                room.insert((max.saturating_sub(cost), batches.len()));
                batches.push(Vec::new());
                batches.len() - 1
            }
        };
        batches[k].push(d);
    }
    batches.extend(large.into_iter().map(|d| vec![d]));
    batches
}

/// The most bytes asked in one batch read: smaller batches let the first objects be written
/// while the rest come.
const READ_BATCH: usize = 1 << 20;

/// The upload calls of `blobs`, in their order: batches filled to `max` bytes (each blob
/// counted as its `size` and 1 KiB of framing), and each blob too large for a batch alone, for
/// ByteStream.
pub fn pack<T>(blobs: Vec<T>, max: usize, size: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let mut calls: Vec<Vec<T>> = Vec::new();
    let mut filled = usize::MAX;
    for blob in blobs {
        let cost = size(&blob).saturating_add(1024);
        if cost > max {
            calls.push(vec![blob]);
            // Alone in its call: the next blob starts a batch.
            filled = usize::MAX;
        } else if filled.saturating_add(cost) > max {
            calls.push(vec![blob]);
            filled = cost;
        } else {
            filled += cost;
            calls.last_mut().expect("a batch").push(blob);
        }
    }
    calls
}
