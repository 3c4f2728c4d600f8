//! Reapi: one gRPC connection to a Remote Execution API v2 server, and the calls a link makes on
//! it — capabilities, blobs in and out of the CAS (batched within the server's limit, ByteStream
//! beyond it), the action cache, Execute/WaitExecution and CancelOperation.
//!
//! It knows the wire (URLs, headers, TLS, resource names, operation results); it does not know
//! jobs, files on disk, retries or what a result means for a link.

use super::blob;
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use bazel_remote_apis::google::bytestream::{self as bs, byte_stream_client::ByteStreamClient};
use bazel_remote_apis::google::longrunning::{self as lr, operations_client::OperationsClient};
use prost::Message;
use re::action_cache_client::ActionCacheClient;
use re::capabilities_client::CapabilitiesClient;
use re::content_addressable_storage_client::ContentAddressableStorageClient;
use re::execution_client::ExecutionClient;
use std::sync::Arc;
use std::time::Duration;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// Where the server is and how to speak to it.
#[derive(Clone)]
pub struct Target {
    /// grpc://HOST:PORT, grpcs://HOST:PORT or unix:PATH.
    pub url: String,
    pub instance: String,
    /// Sent with every call (API keys).
    pub headers: Vec<(String, String)>,
    /// How long a call that moves no blob may take, and a stream that owes a message may be
    /// silent (`--remote-timeout`).
    pub timeout: Duration,
    /// TLS settings (grpcs:// only).
    pub tls: Tls,
}

impl std::fmt::Debug for Target {
    /// The headers' names only: their values may be keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Target")
            .field("url", &self.url)
            .field("instance", &self.instance)
            .field("headers", &names)
            .field("tls", &self.tls)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Target {
    /// A warning when headers (API keys) would go unencrypted to a host that is not this
    /// machine: grpc:// or http:// to a name or address other than loopback.
    pub fn exposed_headers(&self) -> Option<String> {
        let rest = ["grpc://", "http://"]
            .iter()
            .find_map(|p| self.url.strip_prefix(p))?;
        let authority = rest.split('/').next().unwrap_or("");
        let host = match authority.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
        };
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        (!self.headers.is_empty() && !loopback).then(|| {
            format!(
                "remote: the headers of --remote-header(-file) go to {} unencrypted; use \
                 grpcs:// to keep keys off the network",
                self.url
            )
        })
    }
}

/// What a grpcs:// connection presents and trusts beyond the defaults, as PEM text read by the
/// caller (so its errors can name the option the file came from).
#[derive(Clone, Default)]
pub struct Tls {
    /// The authorities that sign the server's certificate, instead of the system's.
    pub ca: Option<Vec<u8>>,
    /// This client's certificate and private key, for servers that require mutual TLS.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for Tls {
    /// Whether each is given, not what it holds: the identity holds a private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("ca", &self.ca.is_some())
            .field("identity", &self.identity.is_some())
            .finish()
    }
}

/// Adds the user's headers to every call.
#[derive(Clone)]
pub struct Headers(Arc<Vec<(AsciiMetadataKey, AsciiMetadataValue)>>);

impl tonic::service::Interceptor for Headers {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        for (k, v) in self.0.iter() {
            req.metadata_mut().insert(k.clone(), v.clone());
        }
        Ok(req)
    }
}

type Svc = InterceptedService<Channel, Headers>;

/// The largest message this client sends or takes (ByteStream chunks are 1 MiB).
const MAX_MESSAGE: usize = 64 << 20;
const CHUNK: usize = 1 << 20;

/// The slowest transfer taken: a call moving blobs may take the target's timeout and a second
/// per this many bytes.
const RATE: usize = 1 << 20;
/// The longest pause between the HTTP/2 keep-alive pings, each answered within as long.
const KEEPALIVE: Duration = Duration::from_secs(10);

/// `message` as a request that fails with DEADLINE_EXCEEDED after `timeout`.
fn timed<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.set_timeout(timeout);
    r
}

/// The deadline of a call that moves `bytes` bytes, when one that moves none has `timeout`.
fn moving(timeout: Duration, bytes: usize) -> Duration {
    timeout + Duration::from_secs((bytes / RATE) as u64)
}

/// The next message of `stream`, or DEADLINE_EXCEEDED after `silence` without one.
async fn next<T>(
    stream: &mut tonic::Streaming<T>,
    silence: Duration,
    what: &str,
) -> Result<Option<T>, tonic::Status> {
    match tokio::time::timeout(silence, stream.message()).await {
        Ok(got) => got,
        Err(_) => Err(silent(what, silence)),
    }
}

/// A connection to one instance of a server.
#[derive(Clone)]
pub struct Client {
    pub instance: String,
    cas: ContentAddressableStorageClient<Svc>,
    bytestream: ByteStreamClient<Svc>,
    cache: ActionCacheClient<Svc>,
    exec: ExecutionClient<Svc>,
    ops: OperationsClient<Svc>,
    caps: CapabilitiesClient<Svc>,
    /// The most a batch call may carry, from the server's capabilities.
    pub max_batch: usize,
    /// The target's timeout.
    timeout: Duration,
}

/// The bytes of batch calls a link keeps in flight side by side (`Client::calls_in_flight`).
const BYTES_IN_FLIGHT: usize = 8 << 20;

/// What the server says it can do.
#[derive(Debug, Clone)]
pub struct Capabilities {
    pub sha256: bool,
    pub exec_enabled: bool,
    pub cache_updates: bool,
    pub max_batch: usize,
    pub api: String,
}

/// A message or file content, with its digest.
pub fn digest_of(bytes: &[u8]) -> re::Digest {
    re::Digest {
        hash: crate::job::util::digest::sha256_hex(bytes),
        size_bytes: bytes.len() as i64,
    }
}

/// Whether `url` names a TLS server (grpcs:// or https://).
pub fn uses_tls(url: &str) -> bool {
    url.starts_with("grpcs://") || url.starts_with("https://")
}

fn endpoint(target: &Target) -> Result<Endpoint, String> {
    let url = &target.url;
    let (uri, tls) = if let Some(rest) = url.strip_prefix("grpc://") {
        (format!("http://{rest}"), false)
    } else if let Some(rest) = url.strip_prefix("grpcs://") {
        (format!("https://{rest}"), true)
    } else if url.starts_with("http://") {
        (url.clone(), false)
    } else if url.starts_with("https://") {
        (url.clone(), true)
    } else if url.starts_with("unix:") {
        (url.clone(), false)
    } else {
        return Err(format!(
            "{url:?} is not grpc://HOST:PORT, grpcs://HOST:PORT or unix:PATH"
        ));
    };
    let keepalive = (target.timeout / 2).clamp(Duration::from_millis(500), KEEPALIVE);
    let mut e = Endpoint::from_shared(uri)
        .map_err(|e| format!("{url:?}: {e}"))?
        .connect_timeout(Duration::from_secs(5))
        // Each answer's last bytes leave at once, and the flow-control windows grow with the
        // link's bandwidth and round trip (a fixed 64 KiB window caps a 20 ms link at 25 MB/s).
        .tcp_nodelay(true)
        .http2_adaptive_window(true)
        // A server that stops answering (stopped, or behind a dead link) is found within two
        // pauses, even while a call waits on it.
        .http2_keep_alive_interval(keepalive)
        .keep_alive_timeout(keepalive)
        .keep_alive_while_idle(true);
    let settings = &target.tls;
    if tls {
        let mut config = ClientTlsConfig::new();
        config = match &settings.ca {
            Some(pem) => config.ca_certificate(Certificate::from_pem(pem)),
            None => config.with_native_roots(),
        };
        let identity = settings.identity.is_some();
        if let Some((cert, key)) = &settings.identity {
            config = config.identity(Identity::from_pem(cert, key));
        }
        e = e.tls_config(config).map_err(|e| {
            let cause = error_chain(&e);
            if identity {
                format!(
                    "use the client certificate and key (--remote-client-cert, \
                     --remote-client-key): {cause}"
                )
            } else {
                format!("set up TLS for {url:?}: {cause}")
            }
        })?;
    }
    Ok(e)
}

fn headers(target: &Target) -> Result<Headers, String> {
    let mut out = Vec::new();
    for (k, v) in &target.headers {
        let key =
            AsciiMetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes()).map_err(|_| {
                "a header's name is not a valid header name (not shown: it may hold a key)"
                    .to_string()
            })?;
        let value = AsciiMetadataValue::try_from(v.as_str())
            .map_err(|_| format!("the value of header {k} is not printable ASCII"))?;
        out.push((key, value));
    }
    Ok(Headers(Arc::new(out)))
}

/// `error`, with a hint when it looks like a server that wants a client certificate and got
/// none: such a server ends the handshake with an alert (TLS 1.2: HandshakeFailure; TLS 1.3:
/// CertificateRequired) or, as grpc-core does, closes the connection without one, which the
/// first call sees as a missing close_notify, a broken pipe or a cancelled call.
fn with_tls_hint(target: &Target, error: String) -> String {
    let tls = uses_tls(&target.url);
    let signs = [
        "CertificateRequired",
        "HandshakeFailure",
        "close_notify",
        "broken pipe",
        "operation was canceled",
    ];
    if tls && target.tls.identity.is_none() && signs.iter().any(|s| error.contains(s)) {
        format!(
            "{error} (if the server requires client certificates, mutual TLS, give \
             --remote-client-cert and --remote-client-key)"
        )
    } else {
        error
    }
}

/// A gRPC status as one line, with the transport's cause when there is one: "UNAVAILABLE:
/// connection refused", "CANCELLED: operation was canceled: received fatal alert: ...".
pub fn describe(s: &tonic::Status) -> String {
    let code = format!("{:?}", s.code());
    let mut name = String::new();
    for (i, c) in code.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    let message = s.message().lines().next().unwrap_or("");
    let cause = std::error::Error::source(s).map(error_chain);
    // The words after the code: the message, then the cause unless the message holds it; a
    // cause that begins with the message ("transport error: transport error: ...") stands alone.
    let words = match cause {
        Some(cause) if cause.starts_with(message) => cause,
        Some(cause) if !message.contains(&cause) => format!("{message}: {cause}"),
        _ => message.to_string(),
    };
    if words.is_empty() {
        name
    } else {
        format!("{name}: {words}")
    }
}

/// Whether a failed call is worth trying again.
pub fn transient(code: tonic::Code) -> bool {
    use tonic::Code::*;
    matches!(
        code,
        Unavailable | ResourceExhausted | DeadlineExceeded | Aborted | Unknown | Internal
    )
}

/// What an Execute or WaitExecution stream ended with.
pub enum Executed {
    /// The operation finished: the server's response.
    Done(Box<re::ExecuteResponse>),
    /// The stream ended cleanly before the operation did (a proxy's idle or age limit): the
    /// operation lives on under this name; `progressed` when the stream brought a message.
    Ended {
        name: Option<String>,
        progressed: bool,
    },
    /// The stream broke; the operation may live on under this name.
    Broken {
        name: Option<String>,
        status: tonic::Status,
        progressed: bool,
    },
}

/// How long an Execute stream may be silent once the operation is under way: longer than any
/// backend job, so that only a lost operation reaches it (a dead server is found sooner, by
/// the keep-alive).
const RUNNING: Duration = Duration::from_secs(15 * 60);

impl Client {
    /// Connects and asks for the capabilities.
    pub async fn connect(target: &Target) -> Result<(Client, Capabilities), String> {
        let channel = endpoint(target)?.connect().await.map_err(|e| {
            with_tls_hint(
                target,
                format!("connect to {}: {}", target.url, error_chain(&e)),
            )
        })?;
        let h = headers(target)?;
        let wrap = || InterceptedService::new(channel.clone(), h.clone());
        let mut client = Client {
            instance: target.instance.clone(),
            cas: ContentAddressableStorageClient::new(wrap())
                .max_decoding_message_size(MAX_MESSAGE)
                .max_encoding_message_size(MAX_MESSAGE),
            bytestream: ByteStreamClient::new(wrap()).max_decoding_message_size(MAX_MESSAGE),
            cache: ActionCacheClient::new(wrap()).max_decoding_message_size(MAX_MESSAGE),
            exec: ExecutionClient::new(wrap()).max_decoding_message_size(MAX_MESSAGE),
            ops: OperationsClient::new(wrap()),
            caps: CapabilitiesClient::new(wrap()),
            max_batch: 0,
            timeout: target.timeout,
        };
        let caps = client
            .capabilities()
            .await
            .map_err(|e| with_tls_hint(target, e))?;
        client.max_batch = caps.max_batch;
        Ok((client, caps))
    }

    pub async fn capabilities(&mut self) -> Result<Capabilities, String> {
        let caps = self
            .caps
            .get_capabilities(timed(
                re::GetCapabilitiesRequest {
                    instance_name: self.instance.clone(),
                },
                self.timeout,
            ))
            .await
            .map_err(expired)
            .map_err(|s| format!("ask for the server's capabilities: {}", describe(&s)))?
            .into_inner();
        let sha = re::digest_function::Value::Sha256 as i32;
        let cache = caps.cache_capabilities.unwrap_or_default();
        let exec = caps.execution_capabilities.unwrap_or_default();
        let max = usize::try_from(cache.max_batch_total_size_bytes).unwrap_or(0);
        let api = caps
            .high_api_version
            .map(|v| format!("{}.{}", v.major, v.minor))
            .unwrap_or_else(|| "?".into());
        Ok(Capabilities {
            sha256: cache.digest_functions.is_empty() || cache.digest_functions.contains(&sha),
            exec_enabled: exec.exec_enabled,
            cache_updates: cache
                .action_cache_update_capabilities
                .is_some_and(|c| c.update_enabled),
            // 0 means no limit of the server's own; gRPC's default message size still applies.
            max_batch: if max == 0 {
                4 << 20
            } else {
                max.min(MAX_MESSAGE)
            },
            api,
        })
    }

    /// The digests among `digests` that the CAS does not have.
    pub async fn find_missing(
        &mut self,
        digests: &[re::Digest],
    ) -> Result<Vec<re::Digest>, tonic::Status> {
        let mut missing = Vec::new();
        // A digest is ~80 bytes on the wire: stay far below the batch limit.
        for chunk in digests.chunks(10_000) {
            let r = self
                .cas
                .find_missing_blobs(timed(
                    re::FindMissingBlobsRequest {
                        instance_name: self.instance.clone(),
                        blob_digests: chunk.to_vec(),
                        ..Default::default()
                    },
                    self.timeout,
                ))
                .await
                .map_err(expired)?
                .into_inner();
            missing.extend(r.missing_blob_digests);
        }
        Ok(missing)
    }

    /// Batch calls to keep in flight side by side, within `least..=most`: as many as carry
    /// `BYTES_IN_FLIGHT` together. A server with small batches needs more calls at once for
    /// the same bytes (64 KiB batches: 128, where 4 MiB ones need 2), and an engine that
    /// answers each call late costs that wait once per round of calls, not once per call.
    pub fn calls_in_flight(&self, least: usize, most: usize) -> usize {
        (BYTES_IN_FLIGHT / self.max_batch.max(1)).clamp(least, most)
    }

    /// Reads `digests` in read calls (`calls::read_calls`: batches, and each blob too large for
    /// one through ByteStream), several in flight (at least 8, more when the server's batches
    /// are small), each blob checked; `go` and `each` as `calls::each_call` takes them.
    pub async fn read_each(
        &self,
        digests: Vec<re::Digest>,
        go: impl Fn() -> bool,
        each: impl FnMut(Vec<re::Digest>, ReadAnswer) -> bool,
    ) {
        let start = |call: Vec<re::Digest>| {
            let mut client = self.clone();
            async move {
                let got = match call.as_slice() {
                    [one] => Ok(vec![client.read(one).await]),
                    _ => client.batch_read(&call).await,
                };
                (call, got)
            }
        };
        let calls = calls::read_calls(digests, self.max_batch);
        calls::each_call(calls, self.calls_in_flight(8, 64), start, go, each).await;
    }

    /// Whether a blob of `size` bytes fits in a batch call.
    pub fn batchable(&self, size: usize) -> bool {
        calls::fits(size, self.max_batch)
    }

    /// Uploads blobs that fit in batch calls, as few calls as the limit allows.
    pub async fn batch_upload(
        &mut self,
        blobs: Vec<(re::Digest, Vec<u8>)>,
    ) -> Result<(), tonic::Status> {
        let mut batch: Vec<re::batch_update_blobs_request::Request> = Vec::new();
        let mut size = 0;
        let mut pending = blobs.into_iter().peekable();
        while let Some((digest, data)) = pending.next() {
            size += data.len() + 1024;
            batch.push(re::batch_update_blobs_request::Request {
                digest: Some(digest),
                data,
                ..Default::default()
            });
            let next_fits = pending
                .peek()
                .is_some_and(|(_, d)| size + d.len() + 1024 <= self.max_batch);
            if !next_fits {
                let r = self
                    .cas
                    .batch_update_blobs(timed(
                        re::BatchUpdateBlobsRequest {
                            instance_name: self.instance.clone(),
                            requests: std::mem::take(&mut batch),
                            ..Default::default()
                        },
                        moving(self.timeout, size),
                    ))
                    .await
                    .map_err(expired)?
                    .into_inner();
                for resp in r.responses {
                    let status = resp.status.unwrap_or_default();
                    if status.code != 0 {
                        let hash = resp.digest.map(|d| d.hash).unwrap_or_default();
                        return Err(tonic::Status::new(
                            tonic::Code::from(status.code),
                            format!("upload blob {hash}: {}", status.message),
                        ));
                    }
                }
                size = 0;
            }
        }
        Ok(())
    }

    /// Uploads one blob through ByteStream, in chunks.
    pub async fn stream_upload(
        &mut self,
        digest: &re::Digest,
        data: &[u8],
    ) -> Result<(), tonic::Status> {
        let uuid = uuid_like();
        let resource = format!(
            "{}uploads/{uuid}/blobs/{}/{}",
            prefix(&self.instance),
            digest.hash,
            digest.size_bytes
        );
        let total = data.len();
        let mut requests = Vec::new();
        let mut offset = 0;
        loop {
            let end = (offset + CHUNK).min(total);
            requests.push(bs::WriteRequest {
                resource_name: if offset == 0 {
                    resource.clone()
                } else {
                    String::new()
                },
                write_offset: offset as i64,
                finish_write: end == total,
                data: data[offset..end].to_vec(),
            });
            offset = end;
            if offset == total {
                break;
            }
        }
        self.bytestream
            .write(timed(
                tokio_stream_iter(requests),
                moving(self.timeout, total),
            ))
            .await
            .map_err(expired)
            .map(|_| ())
    }

    /// Reads one blob, checked against its digest: a batch call when it fits, else
    /// ByteStream. A declared size is never allocated before the bytes come.
    pub async fn read(&mut self, digest: &re::Digest) -> Result<Vec<u8>, tonic::Status> {
        let size = blob::declared(digest)?;
        if size == 0 {
            blob::check(digest, &[])?;
            return Ok(Vec::new());
        }
        if self.batchable(size) {
            let got = self.batch_read(std::slice::from_ref(digest)).await?;
            return got.into_iter().next().unwrap_or_else(|| Ok(Vec::new()));
        }
        let resource = format!(
            "{}blobs/{}/{}",
            prefix(&self.instance),
            digest.hash,
            digest.size_bytes
        );
        let mut stream = self
            .bytestream
            .read(timed(
                bs::ReadRequest {
                    resource_name: resource,
                    ..Default::default()
                },
                moving(self.timeout, size),
            ))
            .await
            .map_err(expired)?
            .into_inner();
        let mut data = Vec::new();
        while let Some(chunk) = next(&mut stream, self.timeout, "read a blob").await? {
            if data.len() + chunk.data.len() > size {
                return Err(tonic::Status::data_loss(format!(
                    "blob {}: the server sent more than its {size} bytes",
                    digest.hash
                )));
            }
            data.extend_from_slice(&chunk.data);
        }
        blob::check(digest, &data)?;
        Ok(data)
    }

    /// Reads blobs that each fit in a batch call, as few calls as the limit allows; each blob's
    /// bytes, checked against its digest, or why the server could not give it (or gave other
    /// bytes). A failed call fails them all.
    pub async fn batch_read(
        &mut self,
        digests: &[re::Digest],
    ) -> Result<Vec<Result<Vec<u8>, tonic::Status>>, tonic::Status> {
        let mut out = Vec::with_capacity(digests.len());
        let mut start = 0;
        while start < digests.len() {
            let mut end = start;
            let mut size = 0;
            while end < digests.len() {
                let next = usize::try_from(digests[end].size_bytes).unwrap_or(usize::MAX) + 1024;
                if end > start && size + next > self.max_batch {
                    break;
                }
                size = size.saturating_add(next);
                end += 1;
            }
            let r = self
                .cas
                .batch_read_blobs(timed(
                    re::BatchReadBlobsRequest {
                        instance_name: self.instance.clone(),
                        digests: digests[start..end].to_vec(),
                        ..Default::default()
                    },
                    moving(self.timeout, size),
                ))
                .await
                .map_err(expired)?
                .into_inner();
            let by_hash: std::collections::HashMap<String, Result<Vec<u8>, tonic::Status>> = r
                .responses
                .into_iter()
                .map(|resp| {
                    let hash = resp.digest.map(|d| d.hash).unwrap_or_default();
                    let status = resp.status.unwrap_or_default();
                    let got = match status.code {
                        0 => Ok(resp.data),
                        code => Err(tonic::Status::new(
                            tonic::Code::from(code),
                            format!("read blob {hash}: {}", status.message),
                        )),
                    };
                    (hash, got)
                })
                .collect();
            for d in &digests[start..end] {
                out.push(match by_hash.get(&d.hash) {
                    Some(Ok(data)) => blob::check(d, data).map(|()| data.clone()),
                    Some(Err(e)) => Err(e.clone()),
                    None if d.size_bytes == 0 => Ok(Vec::new()),
                    None => Err(tonic::Status::not_found(format!(
                        "read blob {}: the server did not answer for it",
                        d.hash
                    ))),
                });
            }
            start = end;
        }
        Ok(out)
    }

    /// Stores `result` in the action cache as the result of `action`.
    pub async fn update_result(
        &mut self,
        action: &re::Digest,
        result: re::ActionResult,
    ) -> Result<(), tonic::Status> {
        self.cache
            .update_action_result(timed(
                re::UpdateActionResultRequest {
                    instance_name: self.instance.clone(),
                    action_digest: Some(action.clone()),
                    action_result: Some(result),
                    ..Default::default()
                },
                self.timeout,
            ))
            .await
            .map_err(expired)
            .map(|_| ())
    }

    /// The action cache's result for an action; None when it has none.
    pub async fn cached(
        &mut self,
        action: &re::Digest,
    ) -> Result<Option<re::ActionResult>, tonic::Status> {
        match self
            .cache
            .get_action_result(timed(
                re::GetActionResultRequest {
                    instance_name: self.instance.clone(),
                    action_digest: Some(action.clone()),
                    inline_stderr: true,
                    ..Default::default()
                },
                self.timeout,
            ))
            .await
            .map_err(expired)
        {
            Ok(r) => Ok(Some(r.into_inner())),
            Err(s) if s.code() == tonic::Code::NotFound => Ok(None),
            Err(s) => Err(s),
        }
    }

    /// Executes an action (or re-attaches to operation `resume`) and follows it to its end;
    /// `started` learns the operation's name as soon as the server gives it.
    pub async fn execute(
        &mut self,
        action: &re::Digest,
        skip_cache: bool,
        resume: Option<String>,
        mut started: impl FnMut(&str),
    ) -> Executed {
        let call = async {
            match &resume {
                Some(name) => {
                    let request = re::WaitExecutionRequest { name: name.clone() };
                    self.exec.wait_execution(request).await
                }
                None => {
                    let request = re::ExecuteRequest {
                        instance_name: self.instance.clone(),
                        skip_cache_lookup: skip_cache,
                        action_digest: Some(action.clone()),
                        inline_stderr: true,
                        inline_stdout: true,
                        ..Default::default()
                    };
                    self.exec.execute(request).await
                }
            }
        };
        let timeout = self.timeout;
        let stream = tokio::time::timeout(timeout, call)
            .await
            .unwrap_or_else(|_| Err(silent("execute the action", timeout)));
        let mut name = resume.clone();
        let mut stream = match stream {
            Ok(s) => s.into_inner(),
            Err(status) => {
                return Executed::Broken {
                    name,
                    status,
                    progressed: false,
                }
            }
        };
        let mut progressed = false;
        loop {
            // The first Operation comes at once from a server that took the call.
            let silence = if progressed { RUNNING } else { timeout };
            let op = match next(&mut stream, silence, "follow the operation").await {
                Ok(Some(op)) => op,
                Ok(None) => return Executed::Ended { name, progressed },
                Err(status) => {
                    return Executed::Broken {
                        name,
                        status,
                        progressed,
                    }
                }
            };
            progressed = true;
            if name.as_deref() != Some(op.name.as_str()) && !op.name.is_empty() {
                started(&op.name);
                name = Some(op.name.clone());
            }
            if op.done {
                return finished(op.result);
            }
        }
    }

    /// Asks the server to cancel an operation, waiting at most 2 s.
    pub async fn cancel(&mut self, name: &str) -> Result<(), String> {
        match tokio::time::timeout(
            Duration::from_secs(2),
            self.ops.cancel_operation(lr::CancelOperationRequest {
                name: name.to_string(),
            }),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(s)) => Err(describe(&s)),
            Err(_) => Err("no answer in 2 s".into()),
        }
    }
}

/// A call the client's own deadline ended as DEADLINE_EXCEEDED, which it is (tonic's channel
/// calls it CANCELLED: "Timeout expired").
fn expired(s: tonic::Status) -> tonic::Status {
    if s.code() == tonic::Code::Cancelled && s.message() == "Timeout expired" {
        tonic::Status::deadline_exceeded("no answer before the call's deadline")
    } else {
        s
    }
}

/// DEADLINE_EXCEEDED for `what`, silent for `silence`.
fn silent(what: &str, silence: Duration) -> tonic::Status {
    tonic::Status::deadline_exceeded(format!("{what}: no answer in {} s", silence.as_secs()))
}

/// What a finished operation's result says.
fn finished(result: Option<lr::operation::Result>) -> Executed {
    let status = match result {
        Some(lr::operation::Result::Response(any)) => {
            match re::ExecuteResponse::decode(any.value.as_slice()) {
                Ok(r) => return Executed::Done(Box::new(r)),
                Err(e) => tonic::Status::internal(format!("decode the ExecuteResponse: {e}")),
            }
        }
        Some(lr::operation::Result::Error(s)) => {
            tonic::Status::new(tonic::Code::from(s.code), s.message)
        }
        None => tonic::Status::internal("the operation ended without a result"),
    };
    Executed::Broken {
        name: None,
        status,
        progressed: true,
    }
}

fn prefix(instance: &str) -> String {
    if instance.is_empty() {
        String::new()
    } else {
        format!("{instance}/")
    }
}

/// A random UUID-shaped name for an upload (the server only needs it unique).
fn uuid_like() -> String {
    let seed = format!(
        "{:?}{}{:?}",
        std::time::SystemTime::now(),
        std::process::id(),
        std::thread::current().id()
    );
    let h = crate::job::util::digest::sha256_hex(seed.as_bytes());
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// A stream of the given messages, for a client-streaming call.
fn tokio_stream_iter<T: Send + 'static>(
    items: Vec<T>,
) -> impl tokio_stream::Stream<Item = T> + Send {
    tokio_stream::iter(items)
}

/// An error and its sources, on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = inner.source();
    }
    s
}

mod calls;
pub use calls::{pack, ReadAnswer};

#[cfg(test)]
mod tests;
