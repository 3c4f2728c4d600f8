#!/usr/bin/env python3
"""Many-module benchmark (run through bench/many.sh): a generated program of N small C modules
(each imports three functions from others), linked with clang-22/lld-22 ThinLTO. Measures, runs
interleaved:

- cached relinks: lld's own --thinlto-cache-dir (in-process) against dtlto-bridge --remote with
  every job from the action cache of a BuildGrid server on this machine;
- the first remote link (empty server: every input uploaded, every job executed by 2 workers);
- local execution: dtlto-bridge (ninja, and --backend=direct; -j2) against the minimal executor
  (bench/ideal.rs: one process per job on 2 threads, nothing else);
- per-job overhead alone: as many jobs of `cp` (about 1 ms each), each distributor run on the
  job file directly.

Every linked program must print the checksum the generator computed. The compiler's and the
linker's files are held in memory while timed (bench.Resident). Writes
bench/results/<date>-many.md (<date>-many-local.md with --no-cached); bench/README.md explains
the numbers.
"""

import argparse
import datetime
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from remote import Farm  # noqa: E402

MASK = 0xFFFFFFFF


def leaf(j, x):
    """What module j's leaf function returns, as C's unsigned arithmetic computes it."""
    return (x * (2 * j + 1) + j) & MASK


def imports(i, n):
    """The three modules module i calls into (never itself)."""
    return [(i * 7 + k * 13 + 1) % n for k in range(3)]


def generate(out, n):
    """Writes n modules (m0.c is main) and returns the checksum the program must print."""
    os.makedirs(out, exist_ok=True)
    total = 0
    for i in range(1, n):
        a, b, c = [j if j != 0 else 1 for j in imports(i, n)]
        src = (
            f"unsigned leaf{i}(unsigned x) {{ return x * {2 * i + 1}u + {i}u; }}\n"
            f"unsigned leaf{a}(unsigned); unsigned leaf{b}(unsigned); unsigned leaf{c}(unsigned);\n"
            f"unsigned f{i}(unsigned x) {{ return leaf{a}(x) ^ leaf{b}(x + 1u) ^ leaf{c}(x + 2u); }}\n"
        )
        total = (total + (leaf(a, i) ^ leaf(b, i + 1) ^ leaf(c, i + 2))) & MASK
        write_if_changed(os.path.join(out, f"m{i}.c"), src)
    decls = "".join(f"unsigned f{i}(unsigned);\n" for i in range(1, n))
    calls = "".join(f"  s += f{i}({i}u);\n" for i in range(1, n))
    main = (f"#include <stdio.h>\n{decls}int main(void) {{\n  unsigned s = 0;\n{calls}"
            '  printf("%u\\n", s);\n  return 0;\n}\n')
    write_if_changed(os.path.join(out, "m0.c"), main)
    return total


def write_if_changed(path, text):
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    with open(path, "w") as f:
        f.write(text)


def compile_all(out, n, jobs):
    """Compiles each module to ThinLTO bitcode (make -j, only what changed); the objects."""
    objects = [f"m{i}.o" for i in range(n)]
    rules = "".join(f"m{i}.o: m{i}.c\n\tclang-22 -O2 -flto=thin -c m{i}.c -o m{i}.o\n"
                    for i in range(n))
    with open(os.path.join(out, "Makefile"), "w") as f:
        f.write("all: " + " ".join(objects) + "\n" + rules)
    bench.run(["make", "-s", f"-j{jobs}", "-C", out], stdout=subprocess.DEVNULL)
    return objects


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", type=int, default=1501)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--also-in", metavar="DIR",
                    help="also time the cached relinks with the objects copied under DIR "
                         "(another file system, such as /dev/shm)")
    ap.add_argument("--no-local", action="store_true",
                    help="skip local execution and the per-job overhead (the longest part)")
    ap.add_argument("--no-cached", action="store_true",
                    help="skip the cached relinks and the first remote link (no server); the "
                         "results go to <date>-many-local.md")
    args = ap.parse_args()
    if args.no_local and args.no_cached:
        ap.error("--no-local and --no-cached leave nothing to measure")
    n = args.modules
    jobs = os.cpu_count()
    cwd = os.path.join(bench.WORK, f"many-{n}")
    expected = generate(cwd, n)
    objects = compile_all(cwd, n, jobs)
    env = bench.clean_env(jobs)
    rsp = os.path.join(cwd, "objects.rsp")
    with open(rsp, "w") as f:
        f.write("\n".join(objects) + "\n")
    base = ["clang-22", "-O2", "-flto=thin", "-fuse-ld=lld-22", "@objects.rsp", "-o", "prog"]

    def link(extra, where=cwd):
        prog = os.path.join(where, "prog")
        if os.path.exists(prog):
            os.remove(prog)
        seconds = bench.timed(base + extra, env=env, cwd=where)
        got = subprocess.run([prog], capture_output=True, text=True).stdout.strip()
        if got != str(expected):
            sys.exit(f"the linked program printed {got!r}, not {expected}")
        return seconds

    def store(where):
        """The floor of a cached relink: bench/ideal.rs hard-links each job's object from a
        directory by its module's name, and checks nothing."""
        return [f"-fthinlto-distributor={bench.IDEAL}", "-Xthinlto-distributor=-j2",
                f"-Xthinlto-distributor=--store={os.path.join(where, 'store')}"]

    def floor(where):
        """lld's own part of a DTLTO link: the distributor is /bin/true, so the link fails once
        it finds no object, after writing every index shard; timed all the same."""
        start = time.perf_counter()
        subprocess.run(base + ["-fthinlto-distributor=/bin/true"], env=env, cwd=where,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - start

    bridge = [f"-fthinlto-distributor={bench.BRIDGE}"]
    resident = bench.Resident(["clang-22", "ld.lld-22"])
    held = resident.describe()
    try:
        cached, first_s = ({}, None) if args.no_cached else cached_relinks(args, cwd, objects,
                                                                            link, store, floor,
                                                                            bridge)
        local_t, direct_t, ideal_t, tiny_t = local_runs(args, cwd, n, env, link, bridge)
    finally:
        resident.release()
    write(args, n, jobs, held, cached, first_s, local_t, direct_t, ideal_t, tiny_t)


def cached_relinks(args, cwd, objects, link, store, floor, bridge):
    """Cached relinks on each file system, and the first remote link: ({label: times}, s)."""
    n = args.modules
    places = [cwd]
    if args.also_in:
        # The same objects in another directory (another file system): the actions are keyed
        # by content, so its relinks hit the entries the first link made.
        other = os.path.join(args.also_in, f"many-{n}")
        shutil.rmtree(other, ignore_errors=True)
        os.makedirs(other)
        for name in objects + ["objects.rsp"]:
            shutil.copy2(os.path.join(cwd, name), other)
        places.append(other)
    farm = Farm(workers=2)
    cached = {}
    try:
        remote = bridge + [f"-Xthinlto-distributor=--remote={farm.url}",
                           "-Xthinlto-distributor=--remote-instance=main"]
        first_s = link(remote)
        before = farm.executed()
        for where in places:
            lld_cache = os.path.join(where, "lld-cache")
            shutil.rmtree(lld_cache, ignore_errors=True)
            own_cache = [f"-Wl,--thinlto-cache-dir={lld_cache}"]
            disk_dir = os.path.join(where, "disk-cache")
            shutil.rmtree(disk_dir, ignore_errors=True)
            shutil.rmtree(os.path.join(where, "store"), ignore_errors=True)
            os.makedirs(os.path.join(where, "store"))
            disk = remote + [f"-Xthinlto-distributor=--remote-disk-cache={disk_dir}"]
            link(own_cache, where)
            link(remote, where)
            link(disk, where)
            link(store(where), where)
            times = ([], [], [], [], [])
            for _ in range(args.runs):
                times[0].append(link(own_cache, where))
                times[1].append(link(remote, where))
                times[2].append(link(disk, where))
                times[3].append(link(store(where), where))
                times[4].append(floor(where))
            label = bench.filesystem(where)
            cached[label if label not in cached else f"{label} ({where})"] = times
        assert farm.executed() == before, "a cached relink executed something"
    finally:
        farm.stop()
        if args.also_in:
            shutil.rmtree(places[1], ignore_errors=True)
    return cached, first_s


def local_runs(args, cwd, n, env, link, bridge):
    """Local execution of the link's jobs, and of as many `cp` jobs, by each way."""
    local_t, direct_t, ideal_t = [], [], []
    if not args.no_local:
        ideal = [f"-fthinlto-distributor={bench.IDEAL}", "-Xthinlto-distributor=-j2"]
        two = bridge + ["-Xthinlto-distributor=--jobs=2"]
        ways = [(local_t, two), (direct_t, two + ["-Xthinlto-distributor=--backend=direct"]),
                (ideal_t, ideal)]
        for r in range(args.runs):
            # Each round led by another way, so that no way always runs first (this VM's speed
            # drifts within minutes).
            for times, extra in ways[r % 3:] + ways[:r % 3]:
                times.append(link(extra))

    # Per-job overhead alone: as many jobs that copy a small object (`cp`, about a millisecond
    # each), each distributor run on the job file directly (no clang, no lld).
    tiny_t = {}
    if not args.no_local:
        tiny = os.path.join(cwd, "tiny")
        shutil.rmtree(tiny, ignore_errors=True)
        os.makedirs(tiny)
        subprocess.run(["clang-22", "-c", "-x", "c", "-", "-o", os.path.join(tiny, "t.o")],
                       input=b"int f(void) { return 1; }\n", check=True)
        jobs_json = [{"args": ["t.o", f"out{k}.o"], "inputs": ["t.o"], "outputs": [f"out{k}.o"]}
                     for k in range(n)]
        with open(os.path.join(tiny, "tiny.json"), "w") as f:
            json.dump({"common": {"linker_output": "prog", "args": ["/bin/cp"], "inputs": []},
                       "jobs": jobs_json}, f)
        ways = [("minimal executor (bench/ideal.rs, 2 threads)", [bench.IDEAL, "-j2"]),
                ("dtlto-bridge --backend=direct --jobs=2",
                 [bench.BRIDGE, "--jobs=2", "--backend=direct"]),
                ("dtlto-bridge (ninja, --jobs=2)", [bench.BRIDGE, "--jobs=2"])]
        for r in range(max(args.runs, 5)):
            for name, cmd in ways[r % 3:] + ways[:r % 3]:
                for out in glob.glob(os.path.join(tiny, "out*.o")):
                    os.remove(out)
                tiny_t.setdefault(name, []).append(
                    bench.timed(cmd + ["tiny.json"], env=env, cwd=tiny))
                if len(glob.glob(os.path.join(tiny, "out*.o"))) != n:
                    sys.exit(f"{name} did not write every output")
    return local_t, direct_t, ideal_t, tiny_t


def write(args, n, jobs, held, cached, first_s, local_t, direct_t, ideal_t, tiny_t):
    med = statistics.median

    def per_round(a, b):
        """The median of the ratios of runs of the same round: drift between rounds cancels."""
        return f"{med(x / y for x, y in zip(a, b)):.3f}x"
    today = datetime.date.today().isoformat()
    lines = [
        f"# dtlto-bridge many-module benchmark, {today}",
        "",
        f"Machine: {jobs} cores"
        + ("." if first_s is None else "; BuildGrid 0.2.53 on a Unix socket of the same machine, "
           "2 test workers (tests/remote/worker.py)."),
        f"Tools: {bench.version(['clang-22', '--version'])}.",
        f"Program: {n} generated modules (bench/many.py), each calling three small functions of "
        "others, so every backend job imports; every linked program prints the expected checksum.",
        f"Command: `bench/many.sh --modules {n} --runs {args.runs}"
        f"{' --also-in ' + args.also_in if args.also_in else ''}"
        f"{' --no-local' if args.no_local else ''}{' --no-cached' if args.no_cached else ''}` "
        f"(medians of {args.runs} runs, interleaved: a round runs each way once, the local ones "
        "in a rotating order; each time is the whole clang link).",
        f"The compiler's and linker's files: {held}.",
    ]
    rows = []
    for fs, (lld_t, cached_t, disk_t, store_t, floor_t) in cached.items():
        rows += [[f"{fs}: lld's own cache (--thinlto-cache-dir, in-process), everything cached",
                  f"{med(lld_t):.3f}", "1.00x", "1.000x"],
                 [f"{fs}: dtlto-bridge --remote, every job from the action cache",
                  f"{med(cached_t):.3f}", f"{med(cached_t) / med(lld_t):.2f}x",
                  per_round(cached_t, lld_t)],
                 [f"{fs}: dtlto-bridge --remote --remote-disk-cache, every job from the disk",
                  f"{med(disk_t):.3f}", f"{med(disk_t) / med(lld_t):.2f}x",
                  per_round(disk_t, lld_t)],
                 [f"{fs}: floor: each object hard-linked by its module's name, nothing checked "
                  "(bench/ideal.rs --store)", f"{med(store_t):.3f}",
                  f"{med(store_t) / med(lld_t):.2f}x", per_round(store_t, lld_t)],
                 [f"{fs}: lld's DTLTO alone (distributor /bin/true: shards written, no object)",
                  f"{med(floor_t):.3f}", f"{med(floor_t) / med(lld_t):.2f}x",
                  per_round(floor_t, lld_t)]]
    if first_s is not None:
        rows.append(["dtlto-bridge --remote, first link on an empty server", f"{first_s:.3f}",
                     "", ""])
        lines += bench.table(f"Cached relinks: {n} backend jobs",
                             ["link", "s", "vs lld's cache", "median of the rounds' ratios"],
                             rows)
    if local_t:
        lines += bench.table(
            f"Local execution: {n} backend jobs on 2 cores",
            ["distributor", "s", "vs minimal", "median of the rounds' ratios"],
            [["minimal executor (bench/ideal.rs, 2 threads)", f"{med(ideal_t):.3f}", "1.00x",
              "1.000x"],
             ["dtlto-bridge --backend=direct --jobs=2", f"{med(direct_t):.3f}",
              f"{med(direct_t) / med(ideal_t):.3f}x", per_round(direct_t, ideal_t)],
             ["dtlto-bridge (ninja, --jobs=2)", f"{med(local_t):.3f}",
              f"{med(local_t) / med(ideal_t):.3f}x", per_round(local_t, ideal_t)]])
    if tiny_t:
        names = list(tiny_t)
        base = tiny_t[names[0]]
        lines += bench.table(
            f"Per-job overhead: {n} jobs of `cp` (a small object, about 1 ms each), each "
            f"distributor run on the job file directly, 2 at a time ({len(base)} rounds)",
            ["distributor", "s", "vs minimal", "ms of wall per job over minimal"],
            [[name, f"{med(t):.3f}", f"{med(t) / med(base):.2f}x",
              f"{(med(t) - med(base)) * 1000 / n:.3f}"] for name, t in tiny_t.items()])
    bench.publish(lines, f"{today}-many{'-local' if args.no_cached else ''}")


if __name__ == "__main__":
    main()
