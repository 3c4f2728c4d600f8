#!/usr/bin/env python3
"""Remote-execution benchmark (run through bench/remote.sh): Lua 5.4 linked through a BuildGrid
server on a Unix socket of this machine with 2 test workers (tests/remote/), against the same
link run here. Every linked program must pass its self-test. Writes
bench/results/<date>-remote.md.

What it measures, and why each number is what it is, is explained in bench/README.md.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (compile_lua, clean_env, timed, table, version)

ROOT = bench.ROOT
PY = os.path.join(ROOT, "target/pytools/bin")


class Farm:
    """BuildGrid and its workers, stopped by PID."""

    def __init__(self, workers):
        self.dir = tempfile.mkdtemp(prefix="dtlto-bench-farm-")
        try:
            server, self.socket = bench.start_buildgrid(
                os.path.join(ROOT, "tests/remote/buildgrid.yml"), self.dir)
        except RuntimeError as e:
            shutil.rmtree(self.dir, ignore_errors=True)
            sys.exit(str(e))
        self.procs = [server]
        self.log = os.path.join(self.dir, "worker.jsonl")
        for i in range(workers):
            self.procs.append(subprocess.Popen(
                [os.path.join(PY, "python"), os.path.join(ROOT, "tests/remote/worker.py"),
                 "--remote", "unix:" + self.socket, "--instance", "main", "--name", f"w{i}",
                 "--log", self.log], stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.url = "unix:" + self.socket

    def executed(self):
        if not os.path.exists(self.log):
            return 0
        with open(self.log) as f:
            return sum(1 for line in f if '"exit_code"' in line)

    def stop(self):
        bench.stop(self.procs, self.dir)


def link(cmd, objects, cwd, env):
    """One link; its wall seconds and report. The program must pass its self-test."""
    report = os.path.join(cwd, "report.json")
    prog = os.path.join(cwd, "prog")
    if os.path.exists(prog):
        os.remove(prog)
    seconds = bench.timed(cmd + [f"-Xthinlto-distributor=--report={report}"] + objects
                          + ["-lm", "-o", "prog"], env=env, cwd=cwd)
    check = subprocess.run([prog], capture_output=True, text=True)
    if check.returncode != 0 or "self-test ok" not in check.stdout:
        sys.exit(f"the linked program failed its self-test: {check.stderr}")
    with open(report) as f:
        return seconds, json.load(f)


def plain(cmd, objects, cwd, env):
    """One link without a report (as a user's relink); its wall seconds. The program must pass
    its self-test."""
    prog = os.path.join(cwd, "prog")
    if os.path.exists(prog):
        os.remove(prog)
    seconds = bench.timed(cmd + objects + ["-lm", "-o", "prog"], env=env, cwd=cwd)
    check = subprocess.run([prog], capture_output=True, text=True)
    if check.returncode != 0 or "self-test ok" not in check.stdout:
        sys.exit(f"the linked program failed its self-test: {check.stderr}")
    return seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lua", required=True)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    jobs = os.cpu_count()
    cwd = os.path.join(bench.WORK, "lua-remote")
    shutil.rmtree(cwd, ignore_errors=True)
    objects = bench.compile_lua(args.lua, cwd)
    env = bench.clean_env(jobs)
    base = ["clang-22", "-O2", "-flto=thin", "-fuse-ld=lld-22", f"-fthinlto-distributor={bench.BRIDGE}"]

    farm = Farm(workers=2)
    try:
        remote = base + [f"-Xthinlto-distributor=--remote={farm.url}",
                         "-Xthinlto-distributor=--remote-instance=main"]
        # The first link on an empty server: every input uploaded, every job executed.
        first_s, first = link(remote, objects, cwd, env)
        first_up = first["remote"]["uploaded_bytes"]
        # Cached relinks: nothing executed.
        before = farm.executed()
        cached = [link(remote, objects, cwd, env) for _ in range(args.runs)]
        assert farm.executed() == before, "a cached relink executed something"
        cached_s = statistics.median(s for s, _ in cached)
        hits = [r["totals"]["remote_cache"] for _, r in cached]
        # The same relink against lld's own ThinLTO cache, interleaved, asking for no report:
        # lld's cache, the action cache, the disk cache (each object one hard link).
        own = ["clang-22", "-O2", "-flto=thin", "-fuse-ld=lld-22",
               f"-Wl,--thinlto-cache-dir={os.path.join(cwd, 'lld-cache')}"]
        disk = remote + [f"-Xthinlto-distributor=--remote-disk-cache={os.path.join(cwd, 'dc')}"]
        ways = [own, remote, disk]
        for way in ways:
            plain(way, objects, cwd, env)
        relinks = [[], [], []]
        for _ in range(max(args.runs, 5)):
            for times, way in zip(relinks, ways):
                times.append(plain(way, objects, cwd, env))
        assert farm.executed() == before, "a cached relink executed something"
        # Interleaved: here, and remotely without the cache (every job executed by the workers).
        local_t, nocache_t = [], []
        for _ in range(args.runs):
            local_t.append(link(base, objects, cwd, env)[0])
            nocache_t.append(link(remote + ["-Xthinlto-distributor=--remote-no-cache"], objects,
                                  cwd, env)[0])
        _, nocache_report = link(remote + ["-Xthinlto-distributor=--remote-no-cache"], objects,
                                 cwd, env)
        per_job = [j["remote"] for j in nocache_report["jobs"]]
        # One source touched: the self-test file gets one more exported function.
        touched = os.path.join(cwd, "touched.c")
        with open(os.path.join(ROOT, "bench/lua_selftest.c")) as f:
            text = f.read()
        with open(touched, "w") as f:
            f.write(text + "\nint dtlto_bench_touched(void) { return 42; }\n")
        subprocess.run(["clang-22", "-O2", "-flto=thin", "-DLUA_USE_LINUX", "-I", args.lua, "-c",
                        touched, "-o", os.path.join(cwd, "lua_selftest.o")], check=True)
        touch_s, touch = link(remote, objects, cwd, env)
        # The fixed cost of the remote path: a link of one job, here and remote without cache.
        one = os.path.join(bench.WORK, "one")
        os.makedirs(one, exist_ok=True)
        with open(os.path.join(one, "one.c"), "w") as f:
            f.write("int main(void) { return 0; }\n")
        subprocess.run(["clang-22", "-O2", "-flto=thin", "-c", "one.c", "-o", "one.o"], cwd=one,
                       check=True)
        one_local = statistics.median(
            bench.timed(base + ["one.o", "-o", "prog"], env=env, cwd=one) for _ in range(9))
        one_remote = statistics.median(
            bench.timed(remote + ["-Xthinlto-distributor=--remote-no-cache", "one.o", "-o", "prog"],
                        env=env, cwd=one) for _ in range(9))
    finally:
        farm.stop()

    njobs = len(first["jobs"])
    med = lambda key: statistics.median(p[key] for p in per_job if p.get(key) is not None)
    today = datetime.date.today().isoformat()
    lines = [
        f"# dtlto-bridge remote-execution benchmark, {today}",
        "",
        f"Machine: {jobs} cores; BuildGrid 0.2.53 on a Unix socket of the same machine, 2 test "
        "workers (tests/remote/worker.py), so remote jobs use the same 2 cores as local ones.",
        f"Tools: {bench.version(['clang-22', '--version'])}.",
        f"Command: `bench/remote.sh {args.runs}` (medians of {args.runs} runs, interleaved where "
        "compared).",
    ]
    lines += bench.table(
        f"Lua 5.4: {njobs} backend jobs; every program passes its self-test",
        ["link", "s"],
        [["here (ninja, -j2)", f"{statistics.median(local_t):.3f}"],
         ["remote, cache off (every job executed by the 2 workers)",
          f"{statistics.median(nocache_t):.3f}"],
         ["remote, first link on an empty server", f"{first_s:.3f}"],
         ["remote, relink of unchanged objects (all from the action cache)", f"{cached_s:.3f}"],
         ["remote, relink after touching one source", f"{touch_s:.3f}"]],
    )
    own_t, remote_t, disk_t = relinks
    ratio = lambda t: (f"{statistics.median(t) / statistics.median(own_t):.2f}x",
                       f"{statistics.median(a / b for a, b in zip(t, own_t)):.2f}x")
    lines += bench.table(
        f"Cached relinks of Lua ({njobs} jobs) against lld's own cache ({len(own_t)} rounds, "
        "interleaved, no report asked)",
        ["relink", "s", "vs lld's cache", "median of the rounds' ratios"],
        [["lld's own cache (--thinlto-cache-dir, in-process)",
          f"{statistics.median(own_t):.3f}", "1.00x", "1.00x"],
         ["dtlto-bridge --remote, every job from the action cache",
          f"{statistics.median(remote_t):.3f}", *ratio(remote_t)],
         ["dtlto-bridge --remote --remote-disk-cache, every job from the disk",
          f"{statistics.median(disk_t):.3f}", *ratio(disk_t)]],
    )
    lines += bench.table(
        "Bytes uploaded",
        ["link", "MB", "blobs", "distinct blobs", "jobs from the cache"],
        [["first link", f"{first_up / 1e6:.2f}", str(first["remote"]["uploaded_blobs"]),
          str(first["remote"]["distinct_blobs"]), str(first["totals"]["remote_cache"])],
         ["relink, unchanged", f"{cached[0][1]['remote']['uploaded_bytes'] / 1e6:.2f}",
          str(cached[0][1]["remote"]["uploaded_blobs"]), str(cached[0][1]["remote"]["distinct_blobs"]),
          f"{min(hits)} of {njobs}"],
         ["relink, one source touched", f"{touch['remote']['uploaded_bytes'] / 1e6:.2f}",
          str(touch["remote"]["uploaded_blobs"]), str(touch["remote"]["distinct_blobs"]),
          str(touch["totals"]["remote_cache"])]],
    )
    lines += bench.table(
        "Per job, remote with the cache off (medians over the jobs of one link)",
        ["step", "s"],
        [["waiting for the link's upload", f"{med('upload_seconds'):.3f}"],
         ["queued on the server before a worker took it", f"{med('queued_seconds'):.3f}"],
         ["Execute call to result", f"{med('execute_seconds'):.3f}"],
         ["fetching and writing the output", f"{med('download_seconds'):.3f}"]],
    )
    lines += bench.table(
        "Fixed cost: a link of 1 job (median of 9)",
        ["link", "ms"],
        [["here", f"{one_local * 1000:.1f}"], ["remote, cache off", f"{one_remote * 1000:.1f}"]],
    )
    bench.publish(lines, f"{today}-remote")


if __name__ == "__main__":
    main()
