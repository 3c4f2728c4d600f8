#!/usr/bin/env python3
"""BENCH SCAFFOLDING: the farm bench's replay workers (bench/farm.sh), built on the structure of
the test worker tests/remote/worker.py (BuildGrid's Bots API, one lease at a time per bot).

One process runs `--bots` bots, each a thread with its own connection and bot session, each
taking one action at a time, as a farm of that many single-slot workers would. A bot does not
compile: it finds the job in the recording (record.py) by the digest of the job's module (the
first argument of the action's command that names a file of its input root, looked up in the
input root's Directory messages, so the inputs themselves are never downloaded), sleeps the
job's recorded seconds times `--scale`, and uploads the recorded object as the action's output.
An action it cannot find fails (FAILED_PRECONDITION), so dtlto-bridge would run the job locally,
and the bench, which checks that every job ran remotely, fails.

Every action is logged as a JSON line (--log): bot, module digest, when it was taken, how long
it slept, when it completed.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

import grpc
from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re
from buildgrid._protos.google.rpc import code_pb2, status_pb2

# The test worker's bot session, CAS client and timestamps, shared rather than copied.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "remote"))
import worker  # noqa: E402  (tests/remote/worker.py)
from worker import now  # noqa: E402

# While a bot sleeps out a job, it still updates its session this often (BuildGrid drops a bot
# silent for bot-session-keepalive-timeout, 30 s in bench/farm/buildgrid.yml).
KEEPALIVE = 10.0


def tree_files(cas, digest, prefix=""):
    """{path: Digest} of every file under the input root, from its Directory messages only."""
    directory = cas.message(digest, re.Directory)
    files = {os.path.join(prefix, f.name): f.digest for f in directory.files}
    for d in directory.directories:
        files.update(tree_files(cas, d.digest, os.path.join(prefix, d.name)))
    return files


class Bot(worker.Bot):
    # Also repeated: a session update past its 5 s deadline on a loaded machine, or a server
    # briefly unavailable (a bot must keep its session).
    RETRY = (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED,
             grpc.StatusCode.UNAVAILABLE)

    def __init__(self, args, name, record):
        super().__init__(args, name)
        self.record = record

    def run(self, lease_id):
        taken = time.time()
        action = self.action(lease_id)
        command = self.cas.message(action.command_digest, re.Command)
        result = re.ActionResult()
        meta = result.execution_metadata
        meta.worker = self.name
        meta.worker_start_timestamp.CopyFrom(now())
        key, slept = None, 0.0
        try:
            meta.input_fetch_start_timestamp.CopyFrom(now())
            files = tree_files(self.cas, action.input_root_digest)
            meta.input_fetch_completed_timestamp.CopyFrom(now())
            cwd = command.working_directory
            module = next((a for a in list(command.arguments)[1:]
                           if os.path.normpath(os.path.join(cwd, a)) in files), None)
            if module is None:
                raise RuntimeError(f"no input file among the arguments {list(command.arguments)}")
            key = files[os.path.normpath(os.path.join(cwd, module))].hash
            job = self.record.get(key)
            if job is None:
                raise RuntimeError(f"module {module} ({key}) is not in the recording")
            meta.execution_start_timestamp.CopyFrom(now())
            slept = job["seconds"] * self.args.scale
            until = time.monotonic() + slept
            while True:
                left = until - time.monotonic()
                if left <= 0:
                    break
                time.sleep(min(left, KEEPALIVE))
                if until - time.monotonic() > 0:
                    self.update()
            meta.execution_completed_timestamp.CopyFrom(now())
            result.exit_code = 0
            result.stdout_digest.CopyFrom(self.cas.write(b""))
            result.stderr_digest.CopyFrom(self.cas.write(b""))
            meta.output_upload_start_timestamp.CopyFrom(now())
            outputs = list(command.output_paths) or list(command.output_files)
            with open(os.path.join(self.args.record, "objects", key + ".o"), "rb") as f:
                data = f.read()
            for out in outputs:
                result.output_files.add(path=out, digest=self.cas.write(data))
            meta.output_upload_completed_timestamp.CopyFrom(now())
            status = status_pb2.Status(code=code_pb2.OK)
        except Exception as e:
            status = status_pb2.Status(code=code_pb2.FAILED_PRECONDITION, message=str(e))
        meta.worker_completed_timestamp.CopyFrom(now())
        self.log(bot=self.name, key=key, taken=taken, slept=slept, completed=time.time(),
                 ok=status.code == code_pb2.OK, error=status.message or None)
        self.complete(lease_id, result, status)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--remote", required=True, help="the server: unix:PATH or HOST:PORT")
    p.add_argument("--instance", default="")
    p.add_argument("--name", required=True, help="the bots are NAME-0, NAME-1, ...")
    p.add_argument("--bots", type=int, default=1)
    p.add_argument("--record", required=True, help="the recording's directory (record.py)")
    p.add_argument("--scale", type=float, default=1.0, help="sleep the recorded time times this")
    p.add_argument("--log")
    p.add_argument("--batch-limit", type=int, default=0,
                   help="the server's batch limit, when small: larger blobs go by ByteStream")
    args = p.parse_args()
    if args.batch_limit:
        worker.CHUNK = min(worker.CHUNK, args.batch_limit // 2)
    with open(os.path.join(args.record, "record.json")) as f:
        record = json.load(f)["jobs"]

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    threads = []
    for i in range(args.bots):
        bot = Bot(args, f"{args.name}-{i}", record)
        bot.log(ready=bot.name)
        t = threading.Thread(target=bot.serve, daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    sys.exit(1)  # a bot ended: an error it could not survive


if __name__ == "__main__":
    main()
