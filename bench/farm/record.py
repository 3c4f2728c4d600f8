#!/usr/bin/env python3
"""BENCH SCAFFOLDING: the farm bench's recording distributor (bench/farm.sh).

lld runs it as its DTLTO distributor: `record.py --store=DIR [-jN] JOBS.json`. It runs every
backend job of the link with its own command (the compiler lld names), N at a time (default 1,
so that each job's time is its own, not shared with another on the same cores), and keeps in
DIR:

- `objects/KEY.o`, each job's object, where KEY is the SHA-256 of the job's module (its first
  input): the digest the REAPI action names it by, so a replay worker finds the job by it;
- `record.json`: per KEY the job's elapsed seconds, command, inputs, output name, the object's
  digest and size.

`names/NAME` is a hard link to each object under the job's module name (with '/' written as
'%' and, for an archive member, lld's ".TASK.PID.o" removed): the names the ideal's local
distributor (store.c) finds them by.
"""

import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def name_of(module):
    """The module's name in names/ (as store.c makes it)."""
    if "(" in module:
        module = module.rsplit(".", 3)[0]
    return module.replace("/", "%")


def main():
    store, jobs_n, path = None, 1, None
    for arg in sys.argv[1:]:
        if arg.startswith("--store="):
            store = arg[len("--store="):]
        elif arg.startswith("-j"):
            jobs_n = int(arg[2:])
        else:
            path = arg
    if not store or not path:
        sys.exit("usage: record.py --store=DIR [-jN] JOBS.json")
    with open(path) as f:
        doc = json.load(f)
    common = doc["common"]["args"]
    objects = os.path.join(store, "objects")

    os.makedirs(objects, exist_ok=True)

    def run(job):
        cmd = common + job["args"]
        key = digest(job["inputs"][0])
        t0 = time.perf_counter()
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seconds = time.perf_counter() - t0
        if done.returncode != 0:
            sys.stderr.write(f"record.py: job failed: {shlex.join(cmd)}\n{done.stderr.decode()}")
            return None
        out = job["outputs"][0]
        with open(out, "rb") as f:
            data = f.read()
        dst = os.path.join(objects, key + ".o")
        with open(dst + ".tmp", "wb") as f:
            f.write(data)
        os.replace(dst + ".tmp", dst)
        return key, {
            "seconds": seconds,
            "module": job["inputs"][0],
            "output": out,
            "command": cmd,
            "inputs": job["inputs"],
            "input_bytes": sum(os.path.getsize(i) for i in job["inputs"]),
            "object_sha256": hashlib.sha256(data).hexdigest(),
            "object_bytes": len(data),
        }

    with ThreadPoolExecutor(jobs_n) as pool:
        results = list(pool.map(run, doc["jobs"]))
    if any(r is None for r in results):
        sys.exit(1)
    record, names = {}, {}
    os.makedirs(os.path.join(store, "names"), exist_ok=True)
    for key, entry in results:
        name = name_of(entry["module"])
        if names.setdefault(name, key) != key:
            sys.exit(f"record.py: two modules are named {name}")
        os.link(os.path.join(objects, key + ".o"), os.path.join(store, "names", name))
        if key in record and record[key]["object_sha256"] != entry["object_sha256"]:
            sys.exit(f"record.py: two jobs of one module ({entry['module']}) gave different "
                     "objects: a replay could not tell them apart")
        record[key] = entry
    with open(os.path.join(store, "record.json"), "w") as f:
        json.dump({"linker_output": doc["common"].get("linker_output"), "jobs": record,
                   "threads": jobs_n}, f, indent=1)


if __name__ == "__main__":
    main()
