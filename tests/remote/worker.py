#!/usr/bin/env python3
"""TEST SCAFFOLDING, not for production: a minimal Remote Execution worker for the tests.

It speaks BuildGrid's Bots API (google.devtools.remoteworkers.v1test2): it opens a bot session,
takes one lease at a time, fetches the Action's input root from the CAS into a private temporary
directory, runs the Command there, uploads the outputs, and completes the lease with an
ActionResult. While a command runs it keeps updating the session, so a lease the server cancels
(CancelOperation) is noticed and its command killed. Production farms run their engine's own
workers (buildbox-worker, Buildbarn's bb_worker, NativeLink's worker, ...).

Every action it runs is logged as a JSON line (--log), for the tests to count; --fail-exit and
--empty-outputs make it misbehave on purpose, --delay slows each action down.
"""

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import grpc
from google.protobuf import any_pb2, timestamp_pb2

from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re
from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2_grpc as re_grpc
from buildgrid._protos.google.bytestream import bytestream_pb2, bytestream_pb2_grpc
from buildgrid._protos.google.devtools.remoteworkers.v1test2 import bots_pb2, bots_pb2_grpc, worker_pb2
from buildgrid._protos.google.rpc import code_pb2, status_pb2

CHUNK = 1 << 20
# The command running now, killed with the worker.
RUNNING = []


def now():
    ts = timestamp_pb2.Timestamp()
    ts.GetCurrentTime()
    return ts


class Cas:
    def __init__(self, channel, instance):
        self.instance = instance
        self.cas = re_grpc.ContentAddressableStorageStub(channel)
        self.bytestream = bytestream_pb2_grpc.ByteStreamStub(channel)

    def read(self, digest):
        if digest.size_bytes == 0:
            return b""
        if digest.size_bytes < CHUNK:
            resp = self.cas.BatchReadBlobs(re.BatchReadBlobsRequest(instance_name=self.instance, digests=[digest]))
            r = resp.responses[0]
            if r.status.code != code_pb2.OK:
                raise RuntimeError(f"read {digest.hash}: {r.status.message}")
            return r.data
        name = f"{self.instance}/blobs/{digest.hash}/{digest.size_bytes}" if self.instance else \
            f"blobs/{digest.hash}/{digest.size_bytes}"
        return b"".join(c.data for c in self.bytestream.Read(bytestream_pb2.ReadRequest(resource_name=name)))

    def write(self, data):
        digest = re.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))
        if len(data) >= CHUNK:  # beyond a batch: ByteStream, in chunks
            prefix = f"{self.instance}/" if self.instance else ""
            name = f"{prefix}uploads/{uuid.uuid4()}/blobs/{digest.hash}/{digest.size_bytes}"
            chunks = (bytestream_pb2.WriteRequest(
                resource_name=name if offset == 0 else "", write_offset=offset,
                finish_write=offset + CHUNK >= len(data), data=data[offset:offset + CHUNK])
                for offset in range(0, len(data), CHUNK))
            self.bytestream.Write(chunks)
            return digest
        req = re.BatchUpdateBlobsRequest(instance_name=self.instance)
        req.requests.add(digest=digest, data=data)
        resp = self.cas.BatchUpdateBlobs(req)
        if resp.responses[0].status.code != code_pb2.OK:
            raise RuntimeError(f"write {digest.hash}: {resp.responses[0].status.message}")
        return digest

    def message(self, digest, cls):
        m = cls()
        m.ParseFromString(self.read(digest))
        return m


def fetch_tree(cas, digest, into):
    directory = cas.message(digest, re.Directory)
    os.makedirs(into, exist_ok=True)
    for f in directory.files:
        path = os.path.join(into, f.name)
        with open(path, "wb") as out:
            out.write(cas.read(f.digest))
        if f.is_executable:
            os.chmod(path, 0o755)
    for d in directory.directories:
        fetch_tree(cas, d.digest, os.path.join(into, d.name))


def busy_retry(call, codes=(grpc.StatusCode.RESOURCE_EXHAUSTED,)):
    """`call()`, again after a moment while it fails with one of `codes` (BuildGrid answers
    RESOURCE_EXHAUSTED when its thread pool is taken, e.g. by a link's Execute streams)."""
    while True:
        try:
            return call()
        except grpc.RpcError as e:
            if e.code() not in codes:
                raise
            time.sleep(0.2)


class Bot:
    """One bot session taking one lease at a time; `run` does a lease's action (the farm
    bench's replay bots, bench/farm/worker.py, are Bots too)."""

    # The codes a session call is repeated on.
    RETRY = (grpc.StatusCode.RESOURCE_EXHAUSTED,)
    LOG_LOCK = threading.Lock()

    def __init__(self, args, name=None):
        self.args = args
        self.name = name or args.name
        self.channel = grpc.insecure_channel(args.remote)
        self.bots = bots_pb2_grpc.BotsStub(self.channel)
        self.cas = Cas(self.channel, args.instance)
        session = bots_pb2.BotSession(bot_id=self.name, status=bots_pb2.OK)
        session.worker.devices.add(handle=self.name)
        self.session = busy_retry(lambda: self.bots.CreateBotSession(
            bots_pb2.CreateBotSessionRequest(parent=args.instance, bot_session=session)),
            self.RETRY)

    def update(self):
        # BuildGrid holds the call until a lease arrives or the deadline nears: keep it short
        # (it needs more than ~4 s) so that a waiting bot still answers SIGTERM soon.
        self.session = busy_retry(lambda: self.bots.UpdateBotSession(
            bots_pb2.UpdateBotSessionRequest(name=self.session.name, bot_session=self.session),
            timeout=5), self.RETRY)

    def log(self, **entry):
        if self.args.log:
            with self.LOG_LOCK, open(self.args.log, "a") as f:
                f.write(json.dumps(entry) + "\n")

    def serve(self):
        done = set()
        self.update()
        while True:
            # BuildGrid hands leases over already ACTIVE; other servers send them PENDING. The
            # update that completes a lease may bring the next one: no call in between.
            new = [l for l in self.session.leases
                   if l.state in (bots_pb2.PENDING, bots_pb2.ACTIVE) and l.id not in done]
            if not new:
                self.update()
                continue
            lease = new[0]
            if lease.state == bots_pb2.PENDING:
                lease.state = bots_pb2.ACTIVE
                self.update()
            done.add(lease.id)
            self.run(lease.id)

    def lease(self, lease_id):
        return next((l for l in self.session.leases if l.id == lease_id), None)

    def action(self, lease_id):
        """The Action of a lease: in its payload, or named there by digest."""
        lease = self.lease(lease_id)
        action = re.Action()
        if not lease.payload.Unpack(action):
            digest = re.Digest()
            lease.payload.Unpack(digest)
            action = self.cas.message(digest, re.Action)
        return action

    def complete(self, lease_id, result, status):
        """Completes the lease (unless the server took it back) with `result` and `status`."""
        current = self.lease(lease_id)
        if current is None:
            return
        packed = any_pb2.Any()
        packed.Pack(result)
        current.result.CopyFrom(packed)
        current.status.CopyFrom(status)
        current.state = bots_pb2.COMPLETED
        self.update()

    def run(self, lease_id):
        action = self.action(lease_id)
        action_hash = hashlib.sha256(action.SerializeToString()).hexdigest()
        command = self.cas.message(action.command_digest, re.Command)
        result = re.ActionResult()
        meta = result.execution_metadata
        meta.worker = self.name
        meta.worker_start_timestamp.CopyFrom(now())
        root = tempfile.mkdtemp(prefix="dtlto-worker-")
        try:
            meta.input_fetch_start_timestamp.CopyFrom(now())
            fetch_tree(self.cas, action.input_root_digest, root)
            meta.input_fetch_completed_timestamp.CopyFrom(now())
            cwd = os.path.join(root, command.working_directory)
            outputs = list(command.output_paths) or list(command.output_files)
            for out in outputs:
                os.makedirs(os.path.dirname(os.path.join(cwd, out)) or cwd, exist_ok=True)
            env = {v.name: v.value for v in command.environment_variables}
            env.setdefault("PATH", os.environ.get("PATH", "/usr/bin:/bin"))
            meta.execution_start_timestamp.CopyFrom(now())
            # --delay: the action takes at least this long, its lease watched all the while.
            deadline = time.time() + self.args.delay
            proc = subprocess.Popen(list(command.arguments), cwd=cwd, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
            RUNNING.append(proc)
            self.log(action=action_hash, started=True)
            # Watch the lease while the command runs: the server may cancel it.
            while proc.poll() is None or time.time() < deadline:
                self.update()
                current = self.lease(lease_id)
                if current is None or current.state == bots_pb2.CANCELLED:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:  # it had ended (--delay keeps the lease)
                        pass
                    proc.wait()
                    self.log(action=action_hash, argv=list(command.arguments), cancelled=True)
                    return
                time.sleep(0.05)
            stdout, stderr = proc.communicate()
            meta.execution_completed_timestamp.CopyFrom(now())
            code = proc.returncode
            if self.args.fail_exit:
                code = self.args.fail_exit
                stderr += b"worker: failing on purpose (--fail-exit)\n"
            result.exit_code = code
            result.stdout_digest.CopyFrom(self.cas.write(stdout))
            result.stderr_digest.CopyFrom(self.cas.write(stderr))
            meta.output_upload_start_timestamp.CopyFrom(now())
            for out in outputs:
                path = os.path.join(cwd, out)
                if not os.path.isfile(path):
                    continue
                data = b"" if self.args.empty_outputs else open(path, "rb").read()
                result.output_files.add(path=out, digest=self.cas.write(data),
                                        is_executable=os.access(path, os.X_OK))
            meta.output_upload_completed_timestamp.CopyFrom(now())
            status = status_pb2.Status(code=code_pb2.OK)
        except Exception as e:  # a worker-side failure: report it as the lease's status
            # Not INTERNAL or UNAVAILABLE: BuildGrid retries those for many seconds.
            status = status_pb2.Status(code=code_pb2.FAILED_PRECONDITION, message=str(e))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        meta.worker_completed_timestamp.CopyFrom(now())
        self.log(action=action_hash, argv=list(command.arguments), exit_code=result.exit_code,
                 env={v.name: v.value for v in command.environment_variables})
        self.complete(lease_id, result, status)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--remote", required=True, help="HOST:PORT of the server")
    p.add_argument("--instance", default="")
    p.add_argument("--name", required=True)
    p.add_argument("--log")
    p.add_argument("--fail-exit", type=int, default=0)
    p.add_argument("--empty-outputs", action="store_true")
    p.add_argument("--delay", type=float, default=0.0)
    args = p.parse_args()
    def stop(*_):
        for proc in RUNNING:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    Bot(args).serve()


if __name__ == "__main__":
    main()
