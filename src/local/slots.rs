//! Slots: decides where a link's local job slots come from, and supplies them to the scheduler.
//!
//! It knows the GNU make jobserver (pipe or fifo, through the `jobserver` crate's blocking helper
//! thread; a process under a jobserver already holds one implicit slot), the host-wide pool, and
//! an explicit `-j`. It does not know jobs or which one runs next: the scheduler asks for slots
//! and hands them out.

use crate::local::pool::{self, Pool};
use camino::Utf8Path;
use jobserver::{Client, FromEnvErrorKind};
use std::io;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

/// Where slots come from.
pub enum Source {
    /// N slots from the start and never more: `-j N`, or no pool.
    Fixed(usize),
    /// The parent's jobserver: the implicit slot, then tokens.
    Jobserver(Client),
    /// The host-wide pool: every slot is taken from it.
    Pool(Arc<Pool>),
}

/// What `decide` chose, and what to tell the user.
pub struct Decision {
    pub source: Source,
    /// Warnings for every link.
    pub warnings: Vec<String>,
    /// Advice worth giving once per build (it is the same for every link of the build).
    pub advice: Vec<String>,
}

/// What the run asks of `decide`.
pub struct Request<'a> {
    /// `-j` as given, with where it came from ("-j 3", "DTLTO_BRIDGE_JOBS=3").
    pub explicit_jobs: Option<(usize, String)>,
    pub parallelism: usize,
    /// Size of the host-wide pool; 0 turns it off.
    pub host_slots: usize,
    /// Where the pool's per-user directory goes (see `pool::base_dir`).
    pub pool_base: &'a Utf8Path,
}

/// Looks for a parent's jobserver. Call it first thing, before the process opens files of its
/// own: a closed jobserver descriptor's number may otherwise be reused and mistaken for it.
pub fn probe() -> jobserver::FromEnv {
    // SAFETY: called at start-up, before other descriptors are opened, as the crate asks.
    unsafe { Client::from_env_ext(true) }
}

/// The variable that advertised a jobserver, as `NAME=value`, if any did.
pub fn advertised(from_env: &jobserver::FromEnv) -> Option<String> {
    from_env
        .var
        .as_ref()
        .map(|(name, value)| format!("{name}={}", value.to_string_lossy()))
}

/// Whether a jobserver was advertised but cannot be used (closed or reused descriptors, a fifo
/// that cannot be opened), as opposed to none being advertised at all.
pub fn unusable(e: &jobserver::FromEnvError) -> bool {
    !matches!(
        e.kind(),
        FromEnvErrorKind::NoEnvVar | FromEnvErrorKind::NoJobserver
    )
}

/// Decides where one link's slots come from, from what `probe` found.
pub fn decide(from_env: jobserver::FromEnv, req: &Request<'_>) -> Decision {
    let advertised = advertised(&from_env);
    let mut warnings = Vec::new();
    let mut advice = Vec::new();
    if let Some((n, origin)) = &req.explicit_jobs {
        if let (Ok(_), Some(var)) = (&from_env.client, &advertised) {
            warnings.push(format!(
                "{origin} overrides the jobserver of the parent build ({var})"
            ));
        }
        return Decision {
            source: Source::Fixed(*n),
            warnings,
            advice,
        };
    }
    match from_env.client {
        Ok(client) => {
            return Decision {
                source: Source::Jobserver(client),
                warnings,
                advice,
            }
        }
        Err(e) if unusable(&e) => advice.push(format!(
            "the parent build's jobserver ({}) cannot be used: {e}; its slots are shared through \
             the host pool instead. Mark the link recipe with '+' so make passes its jobserver \
             to the linker, or use make 4.4, which passes it to every recipe (CMake's Makefile \
             generator cannot mark its recipes: use make 4.4 or the Ninja generator)",
            advertised.unwrap_or_default()
        )),
        Err(_) => {}
    }
    if req.host_slots == 0 {
        return Decision {
            source: Source::Fixed(req.parallelism),
            warnings,
            advice,
        };
    }
    match Pool::open(req.pool_base, req.host_slots) {
        Ok(pool) => Decision {
            source: Source::Pool(Arc::new(pool)),
            warnings,
            advice,
        },
        Err(e) => {
            warnings.push(format!(
                "{e}; running up to {} jobs at once (the available parallelism)",
                req.parallelism
            ));
            Decision {
                source: Source::Fixed(req.parallelism),
                warnings,
                advice,
            }
        }
    }
}

/// What arrives from a source that was asked for slots.
pub enum Arrival {
    Slot,
    /// The source failed; no more slots will come from it.
    Failed(String),
}

/// A slot the scheduler holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Held from the start (the implicit slot, or a fixed one): never given back early.
    Own,
    /// Taken from the jobserver or the pool: given back when no job needs it.
    Taken,
    /// One of the hosts' (a bundle sent through distcc or icecc): no slot of this machine.
    Host,
}

/// The running side of a `Source`: asks for slots (they arrive on a channel) and gives them back.
pub struct Supply {
    kind: Kind,
}

enum Kind {
    Fixed,
    Jobserver {
        helper: jobserver::HelperThread,
        tokens: Arc<Mutex<Vec<jobserver::Acquired>>>,
    },
    Pool {
        helper: pool::Helper,
        pool: Arc<Pool>,
    },
}

impl Supply {
    /// Starts the source's helper thread; returns the supply and how many `Own` slots it holds
    /// from the start.
    pub fn start(source: Source, arrivals: Sender<Arrival>) -> io::Result<(Supply, usize)> {
        Ok(match source {
            Source::Fixed(n) => (Supply { kind: Kind::Fixed }, n),
            Source::Jobserver(client) => {
                let tokens = Arc::new(Mutex::new(Vec::new()));
                let t = tokens.clone();
                let helper = client.into_helper_thread(move |acquired| {
                    let event = match acquired {
                        Ok(token) => {
                            crate::job::util::sync::lock(&t).push(token);
                            Arrival::Slot
                        }
                        Err(e) => Arrival::Failed(format!("take a jobserver token: {e}")),
                    };
                    let _ = arrivals.send(event);
                })?;
                (
                    Supply {
                        kind: Kind::Jobserver { helper, tokens },
                    },
                    1,
                )
            }
            Source::Pool(pool) => {
                let p = pool.clone();
                let helper = pool::Helper::start(pool.clone(), move |taken| {
                    let event = match taken {
                        Ok(()) => Arrival::Slot,
                        Err(e) => Arrival::Failed(format!("take a host pool slot: {e}")),
                    };
                    let slot = matches!(event, Arrival::Slot);
                    if arrivals.send(event).is_err() && slot {
                        let _ = p.release();
                    }
                })?;
                (
                    Supply {
                        kind: Kind::Pool { helper, pool },
                    },
                    0,
                )
            }
        })
    }

    /// Whether more slots can be asked for.
    pub fn can_grow(&self) -> bool {
        !matches!(self.kind, Kind::Fixed)
    }

    /// Whether slots taken from this source are jobserver tokens (which a job's launcher must
    /// give back itself if this process dies).
    pub fn tokens(&self) -> bool {
        matches!(self.kind, Kind::Jobserver { .. })
    }

    /// Asks for `n` more slots; each arrives as an `Arrival::Slot`.
    pub fn request(&self, n: usize) {
        for _ in 0..n {
            match &self.kind {
                Kind::Fixed => {}
                Kind::Jobserver { helper, .. } => helper.request_token(),
                Kind::Pool { helper, .. } => helper.request(),
            }
        }
    }

    /// Gives one taken slot back.
    pub fn release(&self) {
        match &self.kind {
            Kind::Fixed => {}
            Kind::Jobserver { tokens, .. } => {
                drop(crate::job::util::sync::lock(tokens).pop());
            }
            Kind::Pool { pool, .. } => {
                let _ = pool.release();
            }
        }
    }

    /// Forgets one taken slot without giving it back: its job's launcher gives it back.
    pub fn hand_over(&self) {
        if let Kind::Jobserver { tokens, .. } = &self.kind {
            if let Some(t) = crate::job::util::sync::lock(tokens).pop() {
                t.drop_without_releasing();
            }
        }
    }

    /// Stops the helper thread (a slot that arrives meanwhile is given back) and leaves the pool.
    pub fn stop(self) {
        match self.kind {
            Kind::Fixed => {}
            Kind::Jobserver { helper, tokens } => {
                drop(helper);
                crate::job::util::sync::lock(&tokens).clear();
            }
            Kind::Pool { helper, pool } => {
                drop(helper);
                drop(pool);
            }
        }
    }
}
