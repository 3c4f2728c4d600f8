//! Executor: the in-process server's local worker — one action read from the CAS, its input
//! root written out in a scratch directory, its command run there (argv, environment, working
//! directory), its declared output files put back in the CAS as an ActionResult.
//!
//! It knows how an action becomes a process and a result, and the switches that change a
//! result; it does not know operations, streams or the action cache (exec.rs does). It runs
//! output files only: output directories and symlinks are not collected (the client asks for
//! none), and there is no sandbox beyond the scratch directory.

use super::faults::Outputs;
use super::state::{lock, Executed, State};
use bazel_remote_apis::build::bazel::remote::execution::v2 as re;
use bazel_remote_apis::google::protobuf::Timestamp;
use prost::Message;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;
use tonic::Status;

/// One execution's handle for CancelOperation: the flag, and the process group once started.
#[derive(Default)]
pub struct Running {
    pub cancelled: AtomicBool,
    pub pgid: Mutex<Option<i32>>,
}

impl Running {
    /// Marks the execution cancelled and kills its command, if it runs.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        if let Some(pgid) = *lock(&self.pgid) {
            kill_group(pgid);
        }
    }
}

pub fn kill_group(pgid: i32) {
    // SAFETY: kill(2) on a process group this server started; no memory is involved.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
}

fn now() -> Option<Timestamp> {
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    Some(Timestamp {
        seconds: t.as_secs() as i64,
        nanos: t.subsec_nanos() as i32,
    })
}

/// A message the action names, from the CAS; FAILED_PRECONDITION when missing, as the
/// protocol wants for an input the client did not upload.
fn message<M: Message + Default>(
    state: &State,
    digest: &Option<re::Digest>,
    what: &str,
) -> Result<M, Status> {
    let digest = digest.clone().unwrap_or_default();
    let bytes = state.blob(&digest).ok_or_else(|| {
        Status::failed_precondition(format!(
            "the {what} {}/{} is not in the CAS",
            digest.hash, digest.size_bytes
        ))
    })?;
    M::decode(bytes.as_slice())
        .map_err(|e| Status::invalid_argument(format!("decode the {what}: {e}")))
}

/// A name inside the input root must be one plain component.
fn plain(name: &str) -> Result<&str, Status> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(Status::invalid_argument(format!(
            "bad name {name:?} in a Directory"
        )));
    }
    Ok(name)
}

/// Writes the Directory `digest` under `dir`, listing each file as its path from the root.
fn materialize(
    state: &State,
    digest: &Option<re::Digest>,
    dir: &Path,
    prefix: &str,
    files: &mut Vec<String>,
) -> Result<(), Status> {
    let directory: re::Directory = message(state, digest, "Directory")?;
    let io = |e: std::io::Error| Status::internal(format!("write the input root: {e}"));
    for f in &directory.files {
        let name = plain(&f.name)?;
        let digest = f.digest.clone().unwrap_or_default();
        let data = state.blob(&digest).ok_or_else(|| {
            Status::failed_precondition(format!(
                "the input {prefix}{name} ({}) is not in the CAS",
                digest.hash
            ))
        })?;
        let path = dir.join(name);
        std::fs::write(&path, data).map_err(io)?;
        if f.is_executable {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
        }
        files.push(format!("{prefix}{name}"));
    }
    for d in &directory.directories {
        let name = plain(&d.name)?;
        let sub = dir.join(name);
        std::fs::create_dir(&sub).map_err(io)?;
        materialize(state, &d.digest, &sub, &format!("{prefix}{name}/"), files)?;
    }
    for s in &directory.symlinks {
        let name = plain(&s.name)?;
        std::os::unix::fs::symlink(&s.target, dir.join(name)).map_err(io)?;
    }
    Ok(())
}

/// Runs `argv` in `cwd` with exactly the command's environment (and this process's PATH,
/// unless the command sets one, so that a bare `sh` is found), stdout and stderr to files.
/// Returns the exit code (128 + the signal for a killed command), stdout and stderr.
fn run(
    state: &State,
    running: &Running,
    command: &re::Command,
    cwd: &Path,
    scratch: &Path,
) -> Result<(i32, Vec<u8>, Vec<u8>), Status> {
    let io = |what: &str, e: std::io::Error| Status::internal(format!("{what}: {e}"));
    let (out_path, err_path) = (scratch.join("stdout"), scratch.join("stderr"));
    let stdout = std::fs::File::create(&out_path).map_err(|e| io("create stdout", e))?;
    let stderr = std::fs::File::create(&err_path).map_err(|e| io("create stderr", e))?;
    let Some((program, args)) = command.arguments.split_first() else {
        return Err(Status::invalid_argument("the command has no arguments"));
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    for v in &command.environment_variables {
        cmd.env(&v.name, &v.value);
    }
    // Under both locks, so that a cancel or the server's stop either sees this group or comes
    // before it starts (and then it does not start).
    let mut child = {
        let mut pgid = lock(&running.pgid);
        let mut groups = lock(&state.running);
        if running.cancelled.load(Ordering::SeqCst) || state.stopping.load(Ordering::SeqCst) {
            return Err(Status::cancelled("cancelled before the command started"));
        }
        let child = cmd.spawn().map_err(|e| io(&format!("run {program}"), e))?;
        *pgid = Some(child.id() as i32);
        groups.insert(child.id() as i32);
        child
    };
    let waited = child.wait();
    lock(&state.running).remove(&(child.id() as i32));
    *lock(&running.pgid) = None;
    let status = waited.map_err(|e| io("wait for the command", e))?;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    let read = |p: &Path| std::fs::read(p).map_err(|e| io("read the command's output", e));
    Ok((code, read(&out_path)?, read(&err_path)?))
}

/// Executes the action: its result, or the error its operation ends with. Nothing is cached
/// here; the caller decides.
pub fn execute(
    state: &State,
    running: &Running,
    action_digest: &re::Digest,
) -> Result<(re::ActionResult, bool), Status> {
    let queued = now();
    let faults = state.faults();
    let action: re::Action = message(state, &Some(action_digest.clone()), "Action")?;
    let command: re::Command = message(state, &action.command_digest, "Command")?;
    if let Some((code, text)) = faults.exec_status {
        return Err(Status::new(code, text));
    }
    let scratch = tempfile::Builder::new()
        .prefix("action-")
        .tempdir_in(state.scratch.path())
        .map_err(|e| Status::internal(format!("create a scratch directory: {e}")))?;
    let root = scratch.path().join("root");
    std::fs::create_dir(&root)
        .map_err(|e| Status::internal(format!("create the input root: {e}")))?;
    let mut inputs = Vec::new();
    materialize(state, &action.input_root_digest, &root, "", &mut inputs)?;
    let cwd = root.join(&command.working_directory);
    #[allow(deprecated)]
    let declared: Vec<String> = if command.output_paths.is_empty() {
        command.output_files.clone()
    } else {
        command.output_paths.clone()
    };
    for o in &declared {
        if let Some(parent) = cwd.join(o).parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Status::internal(format!("create the directory of {o}: {e}")))?;
        }
    }
    let worker_start = now();
    let (exit_code, stdout, stderr) = match faults.exit {
        Some((code, text)) => (code, Vec::new(), text.into_bytes()),
        None => run(state, running, &command, &cwd, scratch.path())?,
    };
    let worker_completed = now();
    let mut output_files = Vec::new();
    for path in &declared {
        let Ok(data) = std::fs::read(cwd.join(path)) else {
            continue;
        };
        let data = match &faults.outputs {
            Outputs::Real => data,
            Outputs::Empty => Vec::new(),
            Outputs::Replaced(bytes) => bytes.clone(),
            Outputs::Missing => continue,
        };
        let mut digest = state.put(data);
        digest.size_bytes += faults.output_size_delta;
        output_files.push(re::OutputFile {
            path: path.clone(),
            digest: Some(digest),
            ..Default::default()
        });
    }
    lock(&state.executed).push(Executed {
        action: action_digest.hash.clone(),
        arguments: command.arguments.clone(),
        working_directory: command.working_directory.clone(),
        environment: (command.environment_variables.iter())
            .map(|v| (v.name.clone(), v.value.clone()))
            .collect(),
        inputs,
        exit_code,
        do_not_cache: action.do_not_cache,
    });
    let result = re::ActionResult {
        output_files,
        exit_code,
        stdout_digest: Some(state.put(stdout)),
        stderr_digest: Some(state.put(stderr)),
        execution_metadata: Some(re::ExecutedActionMetadata {
            worker: state.config.worker.clone(),
            queued_timestamp: queued,
            worker_start_timestamp: worker_start,
            execution_start_timestamp: worker_start,
            execution_completed_timestamp: worker_completed,
            worker_completed_timestamp: now(),
            ..Default::default()
        }),
        ..Default::default()
    };
    Ok((result, action.do_not_cache))
}
