//! Gate: the link's upload calls, let through in the order of their jobs — the job the
//! scheduler sent first (the costliest) before the others — with at most `MAX_BYTES` of calls
//! under way, so that the first jobs' inputs get the link's bandwidth first instead of a share of
//! it, and the first wave executes while the rest is still being sent.
//!
//! It knows ranks and bytes; it does not know what a call sends or to whom.

use crate::job::util::sync::lock;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// The bytes of upload calls under way at once: enough to fill a link of 1 Gbit/s with a 40 ms
/// round trip, few enough that at 100 Mbit/s the first job's inputs are sent in a third of a
/// second.
pub(super) const MAX_BYTES: usize = 4 << 20;

/// The gate of one link.
pub(super) struct Gate {
    state: Mutex<State>,
    most: usize,
}

#[derive(Default)]
struct State {
    /// Bytes of the calls under way.
    under_way: usize,
    /// The calls waiting, by (rank, arrival), each with its size and where its pass goes.
    waiting: BTreeMap<(u64, u64), (usize, oneshot::Sender<Pass>)>,
    arrivals: u64,
}

/// A call's leave to go on; dropped, its bytes are no longer under way.
pub(super) struct Pass {
    gate: Option<Arc<Gate>>,
    bytes: usize,
}

impl Gate {
    pub(super) fn new(most: usize) -> Arc<Gate> {
        Arc::new(Gate {
            state: Mutex::default(),
            most,
        })
    }

    /// Waits until a call of `bytes` of the job ranked `rank` (lower first) may go: no call of a
    /// lower rank waits, and its bytes fit (a call larger than the gate goes alone).
    pub(super) async fn pass(self: &Arc<Self>, rank: u64, bytes: usize) -> Pass {
        let (key, waiting) = {
            let mut s = lock(&self.state);
            s.arrivals += 1;
            let (tx, rx) = oneshot::channel();
            let key = (rank, s.arrivals);
            s.waiting.insert(key, (bytes, tx));
            self.let_through(&mut s);
            (key, rx)
        };
        // Dropped while it waits (its job cancelled or failed), the call leaves its place.
        let _leave = Leave { gate: self, key };
        // The gate keeps every waiter until it passes it: the sender is never dropped unsent.
        waiting.await.expect("a waiter is passed")
    }

    /// Passes the first waiters while their bytes fit.
    fn let_through(self: &Arc<Self>, s: &mut State) {
        while let Some(entry) = s.waiting.first_entry() {
            let bytes = entry.get().0;
            if s.under_way > 0 && s.under_way + bytes > self.most {
                return;
            }
            let (_, tx) = entry.remove();
            s.under_way += bytes;
            let pass = Pass {
                gate: Some(self.clone()),
                bytes,
            };
            // A waiter gone (its job cancelled): its bytes are not under way after all.
            if let Err(mut pass) = tx.send(pass) {
                pass.gate = None;
                s.under_way -= bytes;
            }
        }
    }
}

/// A waiting call's place, given up when its future is dropped before it passed.
struct Leave<'a> {
    gate: &'a Arc<Gate>,
    key: (u64, u64),
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut s = lock(&self.gate.state);
        if s.waiting.remove(&self.key).is_some() {
            self.gate.let_through(&mut s);
        }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        if let Some(gate) = self.gate.take() {
            let mut s = lock(&gate.state);
            s.under_way -= self.bytes;
            gate.let_through(&mut s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_pass_by_rank_within_the_bytes_under_way() {
        let gate = Gate::new(100);
        let first = gate.pass(5, 60).await;
        // Waiting: rank 9 came first, rank 1 after it; rank 1 passes first.
        let (g9, g1) = (gate.clone(), gate.clone());
        let late = tokio::spawn(async move { g9.pass(9, 60).await });
        tokio::task::yield_now().await;
        let early = tokio::spawn(async move { g1.pass(1, 60).await });
        tokio::task::yield_now().await;
        assert_eq!(
            lock(&gate.state).waiting.len(),
            2,
            "60 + 60 does not fit in 100"
        );
        drop(first);
        let one = early.await.unwrap();
        assert_eq!(lock(&gate.state).under_way, 60);
        assert!(!late.is_finished());
        drop(one);
        let nine = late.await.unwrap();
        drop(nine);
        assert_eq!(lock(&gate.state).under_way, 0);
        // A call larger than the gate goes alone, when nothing else is under way.
        drop(gate.pass(3, 500).await);
        // A waiter dropped before it passes leaves its place at once, and nothing under way.
        let held = gate.pass(0, 60).await;
        let (gd, gl) = (gate.clone(), gate.clone());
        let dead = tokio::spawn(async move { gd.pass(1, 60).await });
        tokio::task::yield_now().await;
        let live = tokio::spawn(async move { gl.pass(2, 30).await });
        tokio::task::yield_now().await;
        dead.abort();
        let _ = dead.await;
        let passed = tokio::time::timeout(std::time::Duration::from_secs(5), live).await;
        let live = passed
            .expect("the live call passes once the dead one left")
            .unwrap();
        drop((held, live));
        assert_eq!(lock(&gate.state).under_way, 0);
        let held = gate.pass(0, 100).await;
        let g = gate.clone();
        let gone = tokio::spawn(async move { g.pass(2, 10).await });
        tokio::task::yield_now().await;
        gone.abort();
        let _ = gone.await;
        drop(held);
        assert_eq!(lock(&gate.state).under_way, 0);
        assert!(lock(&gate.state).waiting.is_empty());
    }
}
