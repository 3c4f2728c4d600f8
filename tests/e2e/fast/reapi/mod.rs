//! Reapi: a Remote Execution API v2 server inside the test process, so the fast tests drive
//! dtlto-bridge's remote path in seconds, with no BuildGrid and no LLVM. Each test starts its
//! own on 127.0.0.1:0, on a tokio runtime of its own (background threads), stopped with every
//! command it runs when the handle drops; nothing outlives the test.
//!
//! It has the services the client calls — Capabilities, ContentAddressableStorage, ByteStream,
//! ActionCache, Execution, Operations — and a local executor (`sh` commands run in a scratch
//! directory); it counts calls per method, lists what it executed, and misbehaves on the
//! switches of `Faults`. It knows only what the protocol says: not jobs, links or
//! dtlto-bridge's layout of actions.

// Switches and accessors the tests of this tier do not use yet are kept for the fault tests
// written against this server next (hashing every downloaded blob, deadlines).
#![allow(dead_code)]

mod cas;
mod exec;
mod executor;
mod faults;
mod relay;
mod state;

pub use faults::{Faults, Method, Outputs};
pub use state::{digest_of, Config, Executed, Seen};

use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use bazel_remote_apis::google::{bytestream as bs, longrunning as lr};
use state::{lock, State};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The largest message either side may send: as the client's own limit.
const MAX_MESSAGE: usize = 64 << 20;

/// A running server; stopped, with its commands, when dropped.
pub struct Server {
    rt: Option<tokio::runtime::Runtime>,
    /// Where clients connect: the relay in front of the server.
    addr: std::net::SocketAddr,
    state: Arc<State>,
    /// Whether the relay holds everything, as a stopped server would.
    frozen: Arc<std::sync::atomic::AtomicBool>,
}

impl Server {
    /// A server with the default configuration (instance "main", 4 MiB batches).
    pub fn start() -> Server {
        Server::with(Config::default())
    }

    pub fn with(config: Config) -> Server {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("reapi-server")
            .enable_all()
            .build()
            .expect("start the server's runtime");
        let state = State::new(config);
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind the server to 127.0.0.1:0");
        let back = listener.local_addr().expect("the server's address");
        let front = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind the relay to 127.0.0.1:0");
        let addr = front.local_addr().expect("the relay's address");
        let frozen = Arc::new(std::sync::atomic::AtomicBool::new(false));
        rt.spawn(relay::run(front, back, frozen.clone()));
        let exec = exec::Exec::new(state.clone());
        let cas = cas::Cas {
            state: state.clone(),
            writes: Arc::default(),
        };

        macro_rules! sized {
            ($server:expr) => {
                $server
                    .max_decoding_message_size(MAX_MESSAGE)
                    .max_encoding_message_size(MAX_MESSAGE)
            };
        }
        let router = tonic::transport::Server::builder()
            .add_service(sized!(re::capabilities_server::CapabilitiesServer::new(
                cas.clone()
            )))
            .add_service(sized!(
                re::content_addressable_storage_server::ContentAddressableStorageServer::new(
                    cas.clone()
                )
            ))
            .add_service(sized!(bs::byte_stream_server::ByteStreamServer::new(cas)))
            .add_service(sized!(re::action_cache_server::ActionCacheServer::new(
                exec.clone()
            )))
            .add_service(sized!(re::execution_server::ExecutionServer::new(
                exec.clone()
            )))
            .add_service(sized!(lr::operations_server::OperationsServer::new(exec)));
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        rt.spawn(router.serve_with_incoming(incoming));
        Server {
            rt: Some(rt),
            addr,
            state,
            frozen,
        }
    }

    /// grpc://127.0.0.1:PORT
    pub fn url(&self) -> String {
        format!("grpc://{}", self.addr)
    }

    /// The options that send a link here: the URL and the instance.
    pub fn args(&self) -> Vec<String> {
        vec![
            format!("--remote={}", self.url()),
            format!("--remote-instance={}", self.state.config.instance),
        ]
    }

    /// How many calls of `method` came (answered or not).
    pub fn calls(&self, method: Method) -> usize {
        self.state.calls(method)
    }

    /// Every method called, and how often: for messages.
    pub fn all_calls(&self) -> std::collections::BTreeMap<Method, usize> {
        self.state.all_calls()
    }

    /// The actions executed (their commands run, or faked under `Faults::exit`), in order.
    pub fn executed(&self) -> Vec<Executed> {
        lock(&self.state.executed).clone()
    }

    /// What reached the CAS, in order: FindMissingBlobs calls as they came, blobs stored.
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.state.seen).clone()
    }

    /// The operations the client asked to cancel.
    pub fn cancelled(&self) -> Vec<String> {
        lock(&self.state.cancelled).clone()
    }

    /// The process groups of the commands running now.
    pub fn running(&self) -> Vec<i32> {
        lock(&self.state.running).iter().copied().collect()
    }

    /// The action cache's entries (the server's own and the client's).
    pub fn cache_entries(&self) -> usize {
        self.state.cache_entries()
    }

    /// The action cache's result for an action, by its hash.
    pub fn cached(&self, action: &str) -> Option<re::ActionResult> {
        self.state.cached(action)
    }

    /// A blob of the CAS by digest, as stored.
    pub fn blob(&self, digest: &re::Digest) -> Option<Vec<u8>> {
        self.state.blob(digest)
    }

    /// Changes the switches, from now on: `server.set(|f| f.refuse_cache_writes = true)`.
    pub fn set(&self, change: impl FnOnce(&mut Faults)) {
        change(&mut lock(&self.state.faults));
    }

    /// Answers each call of `method` `ms` milliseconds late, from now on.
    pub fn slow(&self, method: Method, ms: u64) {
        self.set(|f| {
            f.slow.insert(method, Duration::from_millis(ms));
        });
    }

    /// Stops the server as `kill -STOP` would: its connections stay open and new ones are
    /// taken, but nothing is answered from now on, not even HTTP/2 pings.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// Removes a blob from the CAS, as a server evicting it would (its action-cache entries
    /// stay).
    pub fn evict(&self, digest: &re::Digest) {
        self.state.evict(digest);
    }

    /// Stops the server as a crash would: every connection dropped, every command killed.
    /// The counters and lists stay readable.
    pub fn kill(&mut self) {
        self.state.stopping.store(true, Ordering::SeqCst);
        for pgid in lock(&self.state.running).iter() {
            executor::kill_group(*pgid);
        }
        if let Some(rt) = self.rt.take() {
            // The executors' blocking threads end with their killed commands.
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}
