//! Health: whether the server answers, as the whole link sees it — retries of a call that failed
//! transiently (with jitter, so that many jobs do not come back at once), and the breaker: once a
//! call finds the server unreachable or silent, the jobs still to go run here at once instead of
//! each waiting out its own retries, the server is tried again by one job after a while, and the
//! user is told once.
//!
//! It knows gRPC codes and time; it does not know jobs, blobs or what a call does.

use super::reapi;
use crate::job::util::sync::lock;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many times a transient failure is tried again, and the first pause (then ×4, each
/// pause between half and all of it).
const RETRIES: u32 = 3;
const BACKOFF: Duration = Duration::from_millis(250);
/// How long the link keeps the server for down before one job tries it again.
const RETRY_AFTER: Duration = Duration::from_secs(30);

/// The pauses between the tries of one call that failed transiently.
pub(super) struct Backoff {
    tries: u32,
    pause: Duration,
}

impl Backoff {
    pub(super) fn new() -> Backoff {
        Backoff {
            tries: 0,
            pause: BACKOFF,
        }
    }

    /// Waits before the next try; false, at once, when every retry is spent or the server is
    /// down.
    pub(super) async fn wait(&mut self, health: &Health) -> bool {
        if self.tries >= RETRIES || health.down().is_some() {
            return false;
        }
        self.tries += 1;
        tokio::time::sleep(self.pause.mul_f64(0.5 + 0.5 * jitter())).await;
        self.pause *= 4;
        health.down().is_none()
    }

    /// The call made progress: its next failure starts the count again.
    pub(super) fn reset(&mut self) {
        *self = Backoff::new();
    }
}

/// A number in [0, 1), different in each call (std's per-map random keys; no generator is
/// needed for spreading pauses).
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether a failure says the server cannot be reached or did not answer in time.
pub(super) fn unreachable(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
    )
}

/// The server's health for one link.
pub(super) struct Health {
    /// The server, as messages name it.
    server: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Since when, and why, the server is taken for down.
    down: Option<(Instant, String)>,
    /// Since when one caller may be trying the server again (it may also make no call: the
    /// next try is given out after RETRY_AFTER more).
    probing: Option<Instant>,
    /// What the user is told, once.
    told: Option<String>,
}

impl Health {
    /// The health of `server` (its URL, as messages name it), up until a call says otherwise.
    pub(super) fn new(server: &str) -> Health {
        Health {
            server: server.to_string(),
            state: Mutex::default(),
        }
    }

    /// Why the server is taken for down (None: it may be called). After RETRY_AFTER, the first
    /// caller gets None and tries it; the others see it down until an answer comes, or until
    /// RETRY_AFTER more has passed without one (that caller made no call, or no answer came).
    pub(super) fn down(&self) -> Option<String> {
        let mut s = lock(&self.state);
        let (since, why) = s.down.as_ref()?;
        let lapsed = |t: &Instant| t.elapsed() >= RETRY_AFTER;
        if lapsed(since) && s.probing.as_ref().is_none_or(lapsed) {
            s.probing = Some(Instant::now());
            return None;
        }
        Some(why.clone())
    }

    /// A call that is not tried again ended: it failed as unreachable (the server is down
    /// from now), or the server answered, if only with an error (it is up).
    pub(super) fn saw<T>(&self, result: &Result<T, tonic::Status>) {
        match result {
            Err(s) if unreachable(s.code()) => self.fail(&reapi::describe(s)),
            _ => self.up(),
        }
    }

    /// A call that is tried again failed with `s`: a timeout is the server's silence, and
    /// costs every job too much to wait out again; a refused connection may be a blip.
    pub(super) fn retried(&self, s: &tonic::Status) {
        if s.code() == tonic::Code::DeadlineExceeded {
            self.fail(&reapi::describe(s));
        }
    }

    /// A call failed with `s` after its retries: the server is down if `s` says so.
    pub(super) fn gave_up(&self, s: &tonic::Status) {
        if unreachable(s.code()) {
            self.fail(&reapi::describe(s));
        }
    }

    /// The server answered.
    pub(super) fn up(&self) {
        let mut s = lock(&self.state);
        s.down = None;
        s.probing = None;
    }

    /// The server is down from now, for `cause`.
    pub(super) fn fail(&self, cause: &str) {
        let mut s = lock(&self.state);
        let why = format!("{} is unreachable ({cause})", self.server);
        if s.told.is_none() {
            s.told = Some(format!(
                "remote: {why}: the jobs still to go run here; it is tried again every {} s",
                RETRY_AFTER.as_secs()
            ));
        }
        s.down = Some((Instant::now(), why));
        s.probing = None;
    }

    /// What the user is told of the server's health, once per link.
    pub(super) fn warning(&self) -> Option<String> {
        lock(&self.state).told.take()
    }
}

/// Runs `f` again after transient failures, with backoff, unless the server is down; what it
/// finds is the link's `health`: the server is down after a timeout, or once the retries of a
/// refused call are spent.
pub(super) async fn retrying<T, F, Fut>(health: &Health, mut f: F) -> Result<T, tonic::Status>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    if let Some(why) = health.down() {
        return Err(tonic::Status::unavailable(why));
    }
    let mut backoff = Backoff::new();
    loop {
        let result = f().await;
        match result {
            Err(s) if reapi::transient(s.code()) => {
                health.retried(&s);
                if !backoff.wait(health).await {
                    health.gave_up(&s);
                    return Err(s);
                }
            }
            other => {
                health.saw(&other);
                return other;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_its_range_and_varies() {
        let all: Vec<f64> = (0..64).map(|_| jitter()).collect();
        assert!(all.iter().all(|j| (0.0..1.0).contains(j)), "{all:?}");
        assert!(all.iter().any(|j| *j != all[0]), "{all:?}");
    }

    #[test]
    fn an_unreachable_server_is_down_for_every_caller_and_told_once() {
        let h = Health::new("grpc://farm");
        assert_eq!(h.down(), None);
        h.saw::<()>(&Err(tonic::Status::internal("a bug")));
        assert_eq!(
            h.down(),
            None,
            "an answer, if an error, is no unreachability"
        );
        h.saw::<()>(&Err(tonic::Status::unavailable("refused")));
        let why = h.down().expect("down");
        assert!(why.contains("grpc://farm is unreachable"), "{why}");
        h.fail("again");
        let told = h.warning().expect("told");
        assert!(told.contains("UNAVAILABLE: refused"), "{told}");
        assert_eq!(h.warning(), None, "once");
        h.saw(&Ok(()));
        assert_eq!(h.down(), None);
    }

    #[test]
    fn after_a_while_one_caller_tries_the_server_again() {
        let h = Health::new("s");
        h.fail("timed out");
        lock(&h.state).down.as_mut().unwrap().0 = Instant::now().checked_sub(RETRY_AFTER).unwrap();
        assert_eq!(h.down(), None, "the first caller tries");
        assert!(h.down().is_some(), "the others still see it down");
        // That caller made no call: after a while more, another gets the try.
        lock(&h.state).probing = Some(Instant::now().checked_sub(RETRY_AFTER).unwrap());
        assert_eq!(h.down(), None, "the try is given out again");
        // Any answer ends it.
        h.saw::<()>(&Err(tonic::Status::permission_denied("no")));
        assert_eq!(h.down(), None);
        assert_eq!(h.down(), None, "up for every caller");
    }
}
