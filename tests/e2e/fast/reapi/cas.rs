//! Cas: the in-process server's Capabilities, ContentAddressableStorage and ByteStream
//! services — blobs in and out, batched within the advertised limit or streamed by resource
//! name, every upload checked against its digest.
//!
//! It knows the wire shapes of blobs (resource names, batch limits); it does not know actions
//! or what the blobs mean.

use super::faults::Method;
use super::state::{digest_of, lock, Seen, State};
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use bazel_remote_apis::build::bazel::semver::SemVer;
use bazel_remote_apis::google::bytestream as bs;
use bazel_remote_apis::google::rpc;
use re::content_addressable_storage_server::ContentAddressableStorage;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio_stream::{Stream, StreamExt};
use tonic::{Code, Request, Response, Status, Streaming};

pub type Boxed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// A stream of these messages, then its end.
pub fn stream_of<T: Send + 'static>(items: Vec<Result<T, Status>>) -> Boxed<T> {
    Box::pin(tokio_stream::iter(items))
}

/// ByteStream reads are sent in pieces of this size.
const PIECE: usize = 64 << 10;

fn ok_status() -> Option<rpc::Status> {
    Some(rpc::Status::default())
}

fn status(code: Code, message: String) -> Option<rpc::Status> {
    Some(rpc::Status {
        code: code as i32,
        message,
        details: Vec::new(),
    })
}

#[derive(Clone)]
pub struct Cas {
    pub state: Arc<State>,
    /// Each ByteStream upload's resource name and the bytes committed so far, for
    /// QueryWriteStatus; removed once complete.
    pub writes: Arc<Mutex<HashMap<String, (i64, bool)>>>,
}

#[tonic::async_trait]
impl re::capabilities_server::Capabilities for Cas {
    async fn get_capabilities(
        &self,
        request: Request<re::GetCapabilitiesRequest>,
    ) -> Result<Response<re::ServerCapabilities>, Status> {
        let state = &self.state;
        state.gate(Method::GetCapabilities).await?;
        state.instance(&request.get_ref().instance_name)?;
        let sha256 = re::digest_function::Value::Sha256 as i32;
        let version = |minor| SemVer {
            major: 2,
            minor,
            ..Default::default()
        };
        Ok(Response::new(re::ServerCapabilities {
            cache_capabilities: Some(re::CacheCapabilities {
                digest_functions: vec![sha256],
                action_cache_update_capabilities: Some(re::ActionCacheUpdateCapabilities {
                    update_enabled: state.config.cache_updates,
                }),
                max_batch_total_size_bytes: state.config.max_batch,
                ..Default::default()
            }),
            execution_capabilities: Some(re::ExecutionCapabilities {
                digest_function: sha256,
                exec_enabled: state.config.exec_enabled,
                digest_functions: vec![sha256],
                ..Default::default()
            }),
            low_api_version: Some(version(0)),
            high_api_version: Some(version(2)),
            ..Default::default()
        }))
    }
}

impl Cas {
    /// Refuses a batch call that carries more than the advertised limit, as servers do.
    fn within_batch(&self, bytes: i64) -> Result<(), Status> {
        if bytes > self.state.config.max_batch {
            return Err(Status::invalid_argument(format!(
                "a batch of {bytes} bytes is over the limit of {}",
                self.state.config.max_batch
            )));
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl ContentAddressableStorage for Cas {
    async fn find_missing_blobs(
        &self,
        request: Request<re::FindMissingBlobsRequest>,
    ) -> Result<Response<re::FindMissingBlobsResponse>, Status> {
        let state = &self.state;
        let request = request.into_inner();
        let hashes = request
            .blob_digests
            .iter()
            .map(|d| d.hash.clone())
            .collect();
        lock(&state.seen).push(Seen::Asked(hashes));
        state.gate(Method::FindMissingBlobs).await?;
        state.instance(&request.instance_name)?;
        let missing_blob_digests = (request.blob_digests.into_iter())
            .filter(|d| !state.has(d))
            .collect();
        Ok(Response::new(re::FindMissingBlobsResponse {
            missing_blob_digests,
        }))
    }

    async fn batch_update_blobs(
        &self,
        request: Request<re::BatchUpdateBlobsRequest>,
    ) -> Result<Response<re::BatchUpdateBlobsResponse>, Status> {
        let state = &self.state;
        state.gate(Method::BatchUpdateBlobs).await?;
        let request = request.into_inner();
        state.instance(&request.instance_name)?;
        self.within_batch(request.requests.iter().map(|r| r.data.len() as i64).sum())?;
        let responses = (request.requests.into_iter())
            .map(|r| {
                let digest = r.digest.unwrap_or_default();
                let status = if digest_of(&r.data) == digest {
                    state.put(r.data);
                    ok_status()
                } else {
                    status(
                        Code::InvalidArgument,
                        format!("the data does not match the digest {}", digest.hash),
                    )
                };
                re::batch_update_blobs_response::Response {
                    digest: Some(digest),
                    status,
                }
            })
            .collect();
        Ok(Response::new(re::BatchUpdateBlobsResponse { responses }))
    }

    async fn batch_read_blobs(
        &self,
        request: Request<re::BatchReadBlobsRequest>,
    ) -> Result<Response<re::BatchReadBlobsResponse>, Status> {
        let state = &self.state;
        state.gate(Method::BatchReadBlobs).await?;
        let request = request.into_inner();
        state.instance(&request.instance_name)?;
        self.within_batch(request.digests.iter().map(|d| d.size_bytes).sum())?;
        let responses = (request.digests.into_iter())
            .map(|digest| {
                let (data, status) = match state.read_blob(&digest) {
                    Some(data) => (data, ok_status()),
                    None => (
                        Vec::new(),
                        status(Code::NotFound, format!("no blob {}", digest.hash)),
                    ),
                };
                re::batch_read_blobs_response::Response {
                    digest: Some(digest),
                    data,
                    status,
                    ..Default::default()
                }
            })
            .collect();
        Ok(Response::new(re::BatchReadBlobsResponse { responses }))
    }

    type GetTreeStream = Boxed<re::GetTreeResponse>;

    /// Every directory under the root, in one page.
    async fn get_tree(
        &self,
        request: Request<re::GetTreeRequest>,
    ) -> Result<Response<Self::GetTreeStream>, Status> {
        let state = &self.state;
        state.gate(Method::GetTree).await?;
        let request = request.into_inner();
        state.instance(&request.instance_name)?;
        let mut directories = Vec::new();
        let mut todo = vec![request.root_digest.unwrap_or_default()];
        while let Some(digest) = todo.pop() {
            let Some(bytes) = state.blob(&digest) else {
                return Err(Status::not_found(format!("no directory {}", digest.hash)));
            };
            let dir: re::Directory = prost::Message::decode(bytes.as_slice())
                .map_err(|e| Status::invalid_argument(format!("decode a Directory: {e}")))?;
            todo.extend(dir.directories.iter().filter_map(|d| d.digest.clone()));
            directories.push(dir);
        }
        let page = re::GetTreeResponse {
            directories,
            next_page_token: String::new(),
        };
        Ok(Response::new(stream_of(vec![Ok(page)])))
    }

    async fn split_blob(
        &self,
        _: Request<re::SplitBlobRequest>,
    ) -> Result<Response<re::SplitBlobResponse>, Status> {
        Err(Status::unimplemented("SplitBlob"))
    }

    type GetChunkMappingStream = Boxed<re::GetChunkMappingResponse>;

    async fn get_chunk_mapping(
        &self,
        _: Request<re::GetChunkMappingRequest>,
    ) -> Result<Response<Self::GetChunkMappingStream>, Status> {
        Err(Status::unimplemented("GetChunkMapping"))
    }

    async fn splice_blob(
        &self,
        _: Request<re::SpliceBlobRequest>,
    ) -> Result<Response<re::SpliceBlobResponse>, Status> {
        Err(Status::unimplemented("SpliceBlob"))
    }

    async fn register_chunk_mapping(
        &self,
        _: Request<Streaming<re::RegisterChunkMappingRequest>>,
    ) -> Result<Response<re::RegisterChunkMappingResponse>, Status> {
        Err(Status::unimplemented("RegisterChunkMapping"))
    }
}

/// The digest a ByteStream resource name names, after the instance: `blobs/HASH/SIZE` to
/// read, `uploads/UUID/blobs/HASH/SIZE` to write.
fn resource(state: &State, name: &str, upload: bool) -> Result<re::Digest, Status> {
    let bad = || Status::invalid_argument(format!("bad resource name {name:?}"));
    let prefix = match state.config.instance.as_str() {
        "" => String::new(),
        i => format!("{i}/"),
    };
    let rest = name.strip_prefix(&prefix).ok_or_else(bad)?;
    let parts: Vec<&str> = rest.split('/').collect();
    let (hash, size) = match (upload, parts.as_slice()) {
        (false, ["blobs", hash, size, ..]) => (hash, size),
        (true, ["uploads", _, "blobs", hash, size, ..]) => (hash, size),
        _ => return Err(bad()),
    };
    Ok(re::Digest {
        hash: hash.to_string(),
        size_bytes: size.parse().map_err(|_| bad())?,
    })
}

#[tonic::async_trait]
impl bs::byte_stream_server::ByteStream for Cas {
    type ReadStream = Boxed<bs::ReadResponse>;

    async fn read(
        &self,
        request: Request<bs::ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        let state = &self.state;
        state.gate(Method::Read).await?;
        let request = request.into_inner();
        let digest = resource(state, &request.resource_name, false)?;
        let data = state
            .read_blob(&digest)
            .ok_or_else(|| Status::not_found(format!("no blob {}", digest.hash)))?;
        let start = usize::try_from(request.read_offset)
            .ok()
            .filter(|&o| o <= data.len())
            .ok_or_else(|| Status::out_of_range("read_offset is past the end"))?;
        let end = match request.read_limit {
            0 => data.len(),
            n => data.len().min(start + n as usize),
        };
        let pieces: Vec<Result<bs::ReadResponse, Status>> = data[start..end]
            .chunks(PIECE)
            .map(|c| Ok(bs::ReadResponse { data: c.to_vec() }))
            .collect();
        Ok(Response::new(stream_of(pieces)))
    }

    async fn write(
        &self,
        request: Request<Streaming<bs::WriteRequest>>,
    ) -> Result<Response<bs::WriteResponse>, Status> {
        let state = &self.state;
        state.gate(Method::Write).await?;
        let mut stream = request.into_inner();
        let mut name = String::new();
        let mut data = Vec::new();
        let mut finished = false;
        while let Some(piece) = stream.next().await {
            let piece = piece?;
            if name.is_empty() {
                name = piece.resource_name.clone();
            }
            if piece.write_offset != data.len() as i64 {
                return Err(Status::invalid_argument(format!(
                    "write_offset {} where {} bytes were written",
                    piece.write_offset,
                    data.len()
                )));
            }
            data.extend_from_slice(&piece.data);
            lock(&self.writes).insert(name.clone(), (data.len() as i64, false));
            if piece.finish_write {
                finished = true;
                break;
            }
        }
        let digest = resource(state, &name, true)?;
        if !finished {
            return Err(Status::invalid_argument(
                "the stream ended before finish_write",
            ));
        }
        if digest_of(&data) != digest {
            return Err(Status::invalid_argument(format!(
                "the data written does not match {}/{}",
                digest.hash, digest.size_bytes
            )));
        }
        let committed_size = data.len() as i64;
        state.put(data);
        lock(&self.writes).insert(name, (committed_size, true));
        Ok(Response::new(bs::WriteResponse { committed_size }))
    }

    async fn query_write_status(
        &self,
        request: Request<bs::QueryWriteStatusRequest>,
    ) -> Result<Response<bs::QueryWriteStatusResponse>, Status> {
        self.state.gate(Method::QueryWriteStatus).await?;
        let name = request.into_inner().resource_name;
        let digest = resource(&self.state, &name, true)?;
        let (committed_size, complete) = match lock(&self.writes).get(&name) {
            Some(known) => *known,
            None if self.state.has(&digest) => (digest.size_bytes, true),
            None => return Err(Status::not_found(format!("no upload {name}"))),
        };
        Ok(Response::new(bs::QueryWriteStatusResponse {
            committed_size,
            complete,
        }))
    }
}
