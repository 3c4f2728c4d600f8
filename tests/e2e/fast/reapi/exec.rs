//! Exec: the in-process server's Execution, Operations and ActionCache services — an Execute
//! starts an operation that outlives its stream (WaitExecution re-attaches to it, and
//! CancelOperation kills its command), answers from the action cache unless told to skip it,
//! and caches what it executed unless the action says not to.
//!
//! It knows operations and the action cache; how an action runs is executor.rs's.

use super::cas::Boxed;
use super::executor::{self, Running};
use super::faults::Method;
use super::state::{lock, State};
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use bazel_remote_apis::google::longrunning as lr;
use bazel_remote_apis::google::protobuf::{Any, Empty};
use bazel_remote_apis::google::rpc;
use prost::Message;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};
use tonic::{Request, Response, Status};

const RESPONSE_TYPE: &str = "type.googleapis.com/build.bazel.remote.execution.v2.ExecuteResponse";
const METADATA_TYPE: &str =
    "type.googleapis.com/build.bazel.remote.execution.v2.ExecuteOperationMetadata";

/// One operation: its action, its command's handle, and its end once it has one.
struct Op {
    name: String,
    action: re::Digest,
    running: Running,
    done: watch::Sender<Option<lr::Operation>>,
}

impl Op {
    /// The operation as a client sees it now.
    fn snapshot(&self) -> lr::Operation {
        self.done
            .borrow()
            .clone()
            .unwrap_or_else(|| operation(&self.name, &self.action, None))
    }

    /// Ends the operation, unless it has ended already (a cancel comes first).
    fn finish(&self, end: Result<re::ExecuteResponse, Status>) {
        let op = operation(&self.name, &self.action, Some(end));
        self.done.send_if_modified(|d| {
            let first = d.is_none();
            if first {
                *d = Some(op);
            }
            first
        });
    }
}

/// An Operation message: running (no end yet), done with a response, or done with an error.
fn operation(
    name: &str,
    action: &re::Digest,
    end: Option<Result<re::ExecuteResponse, Status>>,
) -> lr::Operation {
    use re::execution_stage::Value as Stage;
    let stage = if end.is_some() {
        Stage::Completed
    } else {
        Stage::Executing
    };
    let metadata = re::ExecuteOperationMetadata {
        stage: stage as i32,
        action_digest: Some(action.clone()),
        ..Default::default()
    };
    let result = end.map(|end| match end {
        Ok(response) => lr::operation::Result::Response(Any {
            type_url: RESPONSE_TYPE.into(),
            value: response.encode_to_vec(),
        }),
        Err(status) => lr::operation::Result::Error(rpc::Status {
            code: status.code() as i32,
            message: status.message().to_string(),
            details: Vec::new(),
        }),
    });
    lr::Operation {
        name: name.to_string(),
        metadata: Some(Any {
            type_url: METADATA_TYPE.into(),
            value: metadata.encode_to_vec(),
        }),
        done: result.is_some(),
        result,
    }
}

/// stdout and stderr inline in a result, when asked for (the digests stay).
fn inlined(
    state: &State,
    mut result: re::ActionResult,
    stdout: bool,
    stderr: bool,
) -> re::ActionResult {
    let read = |d: &Option<re::Digest>| d.as_ref().and_then(|d| state.blob(d)).unwrap_or_default();
    if stdout {
        result.stdout_raw = read(&result.stdout_digest);
    }
    if stderr {
        result.stderr_raw = read(&result.stderr_digest);
    }
    result
}

#[derive(Clone)]
pub struct Exec {
    pub state: Arc<State>,
    ops: Arc<Mutex<HashMap<String, Arc<Op>>>>,
    next: Arc<AtomicU64>,
}

impl Exec {
    pub fn new(state: Arc<State>) -> Exec {
        Exec {
            state,
            ops: Arc::default(),
            next: Arc::default(),
        }
    }

    fn op(&self, name: &str) -> Result<Arc<Op>, Status> {
        lock(&self.ops)
            .get(name)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("no operation {name}")))
    }

    /// The operation's messages from now on: where it is, then its end. Under
    /// `break_streams`, where it is and then UNAVAILABLE; under `end_streams`, where it is and
    /// then the stream's clean end.
    fn follow(&self, op: Arc<Op>) -> Boxed<lr::Operation> {
        let (tx, rx) = mpsc::channel(4);
        let mut ended = op.done.subscribe();
        let state = self.state.clone();
        tokio::spawn(async move {
            let first = op.snapshot();
            if tx.send(Ok(first.clone())).await.is_err() || first.done {
                return;
            }
            // A fault is spent only on a stream it can break: one whose operation ended
            // before its first message (a fast command on a loaded machine) leaves it for the
            // next stream.
            let (breaking, ending) = {
                let mut f = lock(&state.faults);
                let breaking = f.break_streams > 0;
                f.break_streams = f.break_streams.saturating_sub(1);
                let ending = !breaking && f.end_streams > 0;
                if ending {
                    f.end_streams -= 1;
                }
                (breaking, ending)
            };
            if breaking {
                let broken = Status::unavailable("the stream breaks on purpose (test fault)");
                let _ = tx.send(Err(broken)).await;
                return;
            }
            if ending {
                // The stream ends here, cleanly: the client must follow the operation again.
                return;
            }
            loop {
                let end = ended.borrow_and_update().clone();
                if let Some(end) = end {
                    let _ = tx.send(Ok(end)).await;
                    return;
                }
                if ended.changed().await.is_err() {
                    return;
                }
            }
        });
        Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
    }
}

#[tonic::async_trait]
impl re::execution_server::Execution for Exec {
    type ExecuteStream = Boxed<lr::Operation>;

    async fn execute(
        &self,
        request: Request<re::ExecuteRequest>,
    ) -> Result<Response<Self::ExecuteStream>, Status> {
        let state = self.state.clone();
        state.gate(Method::Execute).await?;
        let request = request.into_inner();
        state.instance(&request.instance_name)?;
        let digest = (request.action_digest.clone())
            .ok_or_else(|| Status::invalid_argument("no action_digest"))?;
        let name = format!("operations/{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (stdout, stderr) = (request.inline_stdout, request.inline_stderr);
        let hit = match request.skip_cache_lookup || state.faults().execute_ignores_cache {
            true => None,
            false => state.cached(&digest.hash),
        };
        if let Some(result) = hit {
            let response = re::ExecuteResponse {
                result: Some(inlined(&state, result, stdout, stderr)),
                cached_result: true,
                status: Some(rpc::Status::default()),
                ..Default::default()
            };
            let op = operation(&name, &digest, Some(Ok(response)));
            return Ok(Response::new(super::cas::stream_of(vec![Ok(op)])));
        }
        let op = Arc::new(Op {
            name: name.clone(),
            action: digest.clone(),
            running: Running::default(),
            done: watch::channel(None).0,
        });
        lock(&self.ops).insert(name, op.clone());
        let job = op.clone();
        let follow = self.follow(op.clone());
        tokio::spawn(async move {
            let s = state.clone();
            let ran = tokio::task::spawn_blocking(move || {
                executor::execute(&s, &job.running, &job.action).map(|r| (r, job))
            })
            .await
            .unwrap_or_else(|e| Err(Status::internal(format!("the executor panicked: {e}"))));
            let end = ran.map(|((result, do_not_cache), op)| {
                if !do_not_cache
                    && result.exit_code == 0
                    && !op.running.cancelled.load(Ordering::SeqCst)
                {
                    state.remember(&op.action.hash, result.clone());
                }
                re::ExecuteResponse {
                    result: Some(inlined(&state, result, stdout, stderr)),
                    status: Some(rpc::Status::default()),
                    ..Default::default()
                }
            });
            // A failed precondition, a fault's status: an operation that ends with a response
            // whose status is the error, as the protocol has it.
            let end = end.unwrap_or_else(|status| re::ExecuteResponse {
                status: Some(rpc::Status {
                    code: status.code() as i32,
                    message: status.message().to_string(),
                    details: Vec::new(),
                }),
                ..Default::default()
            });
            op.finish(Ok(end));
        });
        Ok(Response::new(follow))
    }

    type WaitExecutionStream = Boxed<lr::Operation>;

    async fn wait_execution(
        &self,
        request: Request<re::WaitExecutionRequest>,
    ) -> Result<Response<Self::WaitExecutionStream>, Status> {
        self.state.gate(Method::WaitExecution).await?;
        let op = self.op(&request.into_inner().name)?;
        Ok(Response::new(self.follow(op)))
    }
}

#[tonic::async_trait]
impl lr::operations_server::Operations for Exec {
    async fn list_operations(
        &self,
        _: Request<lr::ListOperationsRequest>,
    ) -> Result<Response<lr::ListOperationsResponse>, Status> {
        self.state.gate(Method::ListOperations).await?;
        let operations = lock(&self.ops).values().map(|op| op.snapshot()).collect();
        Ok(Response::new(lr::ListOperationsResponse {
            operations,
            ..Default::default()
        }))
    }

    async fn get_operation(
        &self,
        request: Request<lr::GetOperationRequest>,
    ) -> Result<Response<lr::Operation>, Status> {
        self.state.gate(Method::GetOperation).await?;
        Ok(Response::new(
            self.op(&request.into_inner().name)?.snapshot(),
        ))
    }

    async fn delete_operation(
        &self,
        request: Request<lr::DeleteOperationRequest>,
    ) -> Result<Response<Empty>, Status> {
        self.state.gate(Method::DeleteOperation).await?;
        let name = request.into_inner().name;
        lock(&self.ops).remove(&name);
        Ok(Response::new(Empty {}))
    }

    /// Kills the command, and ends the operation CANCELLED unless it had ended.
    async fn cancel_operation(
        &self,
        request: Request<lr::CancelOperationRequest>,
    ) -> Result<Response<Empty>, Status> {
        self.state.gate(Method::CancelOperation).await?;
        let name = request.into_inner().name;
        let op = self.op(&name)?;
        lock(&self.state.cancelled).push(name);
        op.running.cancel();
        op.finish(Err(Status::cancelled("cancelled by the client")));
        Ok(Response::new(Empty {}))
    }

    async fn wait_operation(
        &self,
        request: Request<lr::WaitOperationRequest>,
    ) -> Result<Response<lr::Operation>, Status> {
        self.state.gate(Method::WaitOperation).await?;
        let op = self.op(&request.into_inner().name)?;
        let mut ended = op.done.subscribe();
        let _ = ended.wait_for(Option::is_some).await;
        Ok(Response::new(op.snapshot()))
    }
}

#[tonic::async_trait]
impl re::action_cache_server::ActionCache for Exec {
    async fn get_action_result(
        &self,
        request: Request<re::GetActionResultRequest>,
    ) -> Result<Response<re::ActionResult>, Status> {
        let state = &self.state;
        state.gate(Method::GetActionResult).await?;
        let request = request.into_inner();
        state.instance(&request.instance_name)?;
        let digest = request.action_digest.unwrap_or_default();
        let result = state
            .cached(&digest.hash)
            .ok_or_else(|| Status::not_found(format!("no result for {}", digest.hash)))?;
        let (stdout, stderr) = (request.inline_stdout, request.inline_stderr);
        Ok(Response::new(inlined(state, result, stdout, stderr)))
    }

    async fn update_action_result(
        &self,
        request: Request<re::UpdateActionResultRequest>,
    ) -> Result<Response<re::ActionResult>, Status> {
        let state = &self.state;
        state.gate(Method::UpdateActionResult).await?;
        let request = request.into_inner();
        state.instance(&request.instance_name)?;
        if state.faults().refuse_cache_writes {
            return Err(Status::permission_denied(
                "this server takes no action-cache writes (test fault)",
            ));
        }
        let digest = request.action_digest.unwrap_or_default();
        let result = request.action_result.unwrap_or_default();
        state.remember(&digest.hash, result.clone());
        Ok(Response::new(result))
    }
}
