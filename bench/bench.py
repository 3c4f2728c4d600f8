#!/usr/bin/env python3
"""Benchmark driver for dtlto-bridge (run through bench/run.sh, which fetches Lua and builds).

Real links: Lua 5.4 compiled to ThinLTO bitcode, linked by clang-22/lld-22 four ways, runs
interleaved: in-process ThinLTO, the ideal executor, dtlto-bridge with ninja, dtlto-bridge with
make. Every linked program must pass its self-test. Then the fixed overhead of a 1-job link,
parse + render of synthetic job files (1k, 10k, 100k jobs), and a replay of the recorded job
durations in file order and longest-first at -j2 and -j64. Writes bench/results/<date>.md.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BRIDGE = os.path.join(ROOT, "target/release/dtlto-bridge")
IDEAL = os.path.join(ROOT, "target/release/examples/ideal")
WORK = os.path.join(ROOT, "target/bench")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def timed(cmd, env=None, cwd=None):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)
    return time.perf_counter() - start


class Resident:
    """Holds the files of programs (each program's file and the shared libraries it loads) in
    memory (mmap and mlock) until `release`: the host of the VM these numbers come from reclaims
    page cache all the time, even from idle files, so a compiler re-reads evicted pages from
    disk at random moments otherwise, which is noise in every way measured. Needs the right to
    lock memory (root, or CAP_IPC_LOCK); without it, nothing is held and `held` says so."""

    def __init__(self, programs):
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.mlock.argtypes = libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.libc, self.maps, self.held, self.why = libc, [], [], None
        files = set()
        for program in programs:
            path = os.path.realpath(shutil.which(program) or program)
            files.add(path)
            ldd = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
            files.update(os.path.realpath(line.split("=>")[1].split("(")[0].strip())
                         for line in ldd.splitlines() if "=> /" in line)
        for path in sorted(files):
            fd = os.open(path, os.O_RDONLY)
            size = os.fstat(fd).st_size
            addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
            os.close(fd)
            if addr in (None, ctypes.c_void_p(-1).value):
                self.why = f"mmap {path}: {os.strerror(ctypes.get_errno())}"
                break
            self.maps.append((addr, size))
            if libc.mlock(addr, size) != 0:
                self.why = f"mlock {path}: {os.strerror(ctypes.get_errno())}"
                break
            self.held.append(path)
        if self.why:
            print(f"bench: the compiler's files are not held in memory ({self.why})",
                  file=sys.stderr)
            self.release()

    def describe(self):
        if not self.held:
            return f"not held in memory ({self.why})"
        mb = sum(size for _, size in self.maps) / 1e6
        return f"{len(self.held)} files, {mb:.0f} MB, held in memory (mlock) while timed"

    def release(self):
        for addr, size in self.maps:
            self.libc.munmap(addr, size)
        self.maps, self.held = [], []


# BuildGrid's batch limit is a constant of its code (settings.MAX_REQUEST_SIZE, 4 MiB less 1 KiB),
# which its modules copy when imported: set before any of them is, it is the limit the server
# advertises (max_batch_total_size_bytes) and enforces on every batch call.
BGD_WITH_LIMIT = (
    "import sys\n"
    "import buildgrid.server.settings as settings\n"
    "settings.MAX_REQUEST_SIZE = int(sys.argv.pop(1))\n"
    "from buildgrid.server.app import cli\n"
    "sys.argv[0] = 'bgd'\n"
    "sys.exit(cli())\n")


def start_buildgrid(template, dir, batch_limit=None):
    """BuildGrid started from the configuration `template` (its ${SOCKET} filled in) on a Unix
    socket in `dir`, its scheduler's database under dir/tmp and its log in dir/server.log, with
    `batch_limit` bytes as its batch limit when given: the process and the socket's path.
    RuntimeError, the process stopped, when no socket comes in 60 s."""
    socket = os.path.join(dir, "bgd.sock")
    with open(template) as f:
        config = f.read().replace("${SOCKET}", socket)
    path = os.path.join(dir, "buildgrid.yml")
    with open(path, "w") as f:
        f.write(config)
    tmp = os.path.join(dir, "tmp")
    os.mkdir(tmp)
    bgd = [os.path.join(ROOT, "target/pytools/bin/bgd")]
    if batch_limit:
        bgd = [os.path.join(ROOT, "target/pytools/bin/python"), "-c", BGD_WITH_LIMIT,
               str(batch_limit)]
    with open(os.path.join(dir, "server.log"), "w") as log:
        proc = subprocess.Popen(bgd + ["server", "start", path],
                                env={**os.environ, "TMPDIR": tmp}, stdout=log,
                                stderr=log, stdin=subprocess.DEVNULL)
    until = time.time() + 60
    while not os.path.exists(socket):
        if proc.poll() is not None or time.time() > until:
            proc.kill()
            proc.wait()
            with open(log.name) as f:
                raise RuntimeError("BuildGrid did not start: " + f.read()[-2000:])
        time.sleep(0.05)
    return proc, socket


def stop(procs, dir):
    """Stops `procs` by PID, the last started first (SIGTERM, then SIGKILL after 10 s), and
    removes `dir`."""
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    shutil.rmtree(dir, ignore_errors=True)


def clean_env(jobs):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("DTLTO_BRIDGE_") or "MAKEFLAGS" in k or k == "MFLAGS")}
    env["DTLTO_BRIDGE_HOST_SLOTS"] = str(jobs)
    env["DTLTO_BRIDGE_HOST_POOL"] = os.path.join(WORK, "pool")
    env["DTLTO_BRIDGE_HISTORY"] = os.path.join(WORK, "history")
    env["DTLTO_BRIDGE_QUIET"] = "1"
    return env


def compile_lua(lua, out, clang="clang-22"):
    os.makedirs(out, exist_ok=True)
    sources = sorted(f for f in os.listdir(lua) if f.endswith(".c"))
    objects = []
    for src in sources + ["lua_selftest.c"]:
        path = os.path.join(lua, src) if src != "lua_selftest.c" else os.path.join(ROOT, "bench", src)
        obj = os.path.join(out, src[:-2] + ".o")
        if not os.path.exists(obj) or os.path.getmtime(obj) < os.path.getmtime(path):
            run([clang, "-O2", "-flto=thin", "-DLUA_USE_LINUX", "-I", lua, "-c", path, "-o", obj])
        objects.append(os.path.basename(obj))
    return objects


def link_variants(jobs):
    base = ["clang-22", "-O2", "-flto=thin", "-fuse-ld=lld-22"]
    return {
        "in-process ThinLTO": base + [f"-Wl,--thinlto-jobs={jobs}"],
        "ideal executor": base + [f"-fthinlto-distributor={IDEAL}", f"-Xthinlto-distributor=-j{jobs}"],
        "dtlto-bridge ninja": base + [f"-fthinlto-distributor={BRIDGE}", "-Xthinlto-distributor=--backend=ninja"],
        "dtlto-bridge make": base + [f"-fthinlto-distributor={BRIDGE}", "-Xthinlto-distributor=--backend=make"],
        "dtlto-bridge ninja, file order": base + [f"-fthinlto-distributor={BRIDGE}",
                                                  "-Xthinlto-distributor=--backend=ninja",
                                                  "-Xthinlto-distributor=--order=file"],
    }


def median_links(variants, inputs, cwd, runs, env, selftest):
    """Links `inputs` each way `runs` times, interleaved; the median seconds of each way. With
    `selftest`, every linked program must print `lua self-test ok`."""
    prog = os.path.join(cwd, "prog")
    times = {name: [] for name in variants}
    for _ in range(runs):
        for name, cmd in variants.items():
            if os.path.exists(prog):
                os.remove(prog)
            times[name].append(timed(cmd + inputs + ["-o", "prog"], env=env, cwd=cwd))
            check = subprocess.run([prog], capture_output=True, text=True)
            if check.returncode != 0 or (selftest and "self-test ok" not in check.stdout):
                sys.exit(f"{name}: the linked program failed its self-test: {check.stderr}")
    return {name: statistics.median(t) for name, t in times.items()}


def report_of_one_link(objects, cwd, jobs, libs):
    env = clean_env(jobs)
    report = os.path.join(cwd, "report.json")
    cmd = link_variants(jobs)["dtlto-bridge ninja"] + [f"-Xthinlto-distributor=--report={report}"]
    run(cmd + objects + ["-o", "prog"] + libs, env=env, cwd=cwd, stdout=subprocess.DEVNULL)
    with open(report) as f:
        return json.load(f)


def makespan(durations, slots):
    """List scheduling: each job in order starts on the first slot free."""
    free = [0.0] * slots
    for d in durations:
        i = free.index(min(free))
        free[i] += d
    return max(free)


def synthetic(tmp, n):
    """A job file shaped like lld's: n jobs, each its module, its index shard and 5 imported
    modules, lld's common arguments; 100k jobs make about 31 MB of JSON."""
    jobs = []
    for i in range(n):
        mod = f"dir{i % 97}/mod{i}.o"
        out = f"dir{i % 97}/mod{i}.{i + 1}.4242.native.o"
        jobs.append({
            "args": [mod, f"-fthinlto-index={out}.thinlto.bc", "-o", out],
            "inputs": [mod, f"{out}.thinlto.bc"]
            + [f"dir{(i + k) % 97}/mod{(i * 7 + k) % n}.o" for k in range(1, 6)],
            "outputs": [out],
        })
    args = ["/usr/lib/llvm-22/bin/clang", "-c", "--target=x86_64-pc-linux-gnu", "-O2", "-faddrsig",
            "-ffunction-sections", "-fdata-sections", "-fpic", "-Wno-unused-command-line-argument"]
    doc = {"common": {"linker_output": "big", "args": args, "inputs": []}, "jobs": jobs}
    path = os.path.join(tmp, f"jobs-{n}.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return path


def time_and_rss(cmd):
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + cmd, check=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds, kb = out.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kb) / 1024


def filesystem(path):
    """The type of the file system holding `path` (ext4, tmpfs, ...)."""
    out = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", path],
                         capture_output=True, text=True, check=True).stdout
    return out.split()[0]  # the first of stacked mounts (/dev/shm can be mounted twice)


def version(cmd):
    return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0].strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lua", required=True)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    jobs = os.cpu_count()
    cwd = os.path.join(WORK, "lua")
    objects = compile_lua(args.lua, cwd)
    libs = ["-lm"]

    env = clean_env(jobs)
    real = median_links(link_variants(jobs), objects + libs, cwd, args.runs, env, selftest=True)
    report = report_of_one_link(objects, cwd, jobs, libs)

    # Fixed overhead: a link with one backend job.
    one = os.path.join(WORK, "one")
    os.makedirs(one, exist_ok=True)
    with open(os.path.join(one, "one.c"), "w") as f:
        f.write("int main(void) { return 0; }\n")
    run(["clang-22", "-O2", "-flto=thin", "-c", "one.c", "-o", "one.o"], cwd=one)
    one_job = {k: v for k, v in link_variants(jobs).items() if "order" not in k}
    fixed = median_links(one_job, ["one.o"], one, max(3 * args.runs, 15), env, selftest=False)

    # clang's own start-up, which every distributed job pays and in-process ThinLTO does not.
    startup = statistics.median(
        timed(["clang-22", "-c", "-x", "c", "/dev/null", "-o", "/dev/null"]) for _ in range(15))

    # Parse + render at scale.
    scale = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (1000, 10000, 100000):
            path = synthetic(tmp, n)
            for fmt in ("ninja", "make"):
                samples = [time_and_rss([BRIDGE, "emit", "--format", fmt, path, "-o", os.devnull])
                           for _ in range(3)]
                scale.append((n, fmt, statistics.median(s[0] for s in samples),
                              max(s[1] for s in samples)))

    # Job order: replay the recorded durations in file order and longest-first.
    recorded = [j["seconds"] for j in report["jobs"]]
    order = []
    for scale_by, slots in ((1, jobs), (1, 64), (40, 64)):
        # A link `scale_by` times this size: the recorded jobs repeated, in file order.
        rec, byb = recorded * scale_by, []
        for j in sorted([j for j in report["jobs"]] * scale_by, key=lambda j: -j["input_bytes"]):
            byb.append(j["seconds"])
        order.append((f"{len(rec)} jobs, -j{slots}", makespan(rec, slots), makespan(byb, slots),
                      makespan(sorted(rec, reverse=True), slots), max(rec)))

    write_results(args, jobs, real, fixed, startup, scale, order, len(report["jobs"]))


def publish(lines, name):
    """Writes a results file, bench/results/NAME.md, of `lines`, and prints it."""
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    path = os.path.join(ROOT, "bench/results", f"{name}.md")
    with open(path, "w") as f:
        f.write(text)
    print(text)
    print(f"written to {os.path.relpath(path, ROOT)}")


def table(title, header, rows):
    """A markdown section: a heading and a table whose first column is text, the rest numbers."""
    align = ["---"] + ["---:"] * (len(header) - 1)
    return ["", f"## {title}", "", "| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"] + [
        "| " + " | ".join(row) + " |" for row in rows]


def write_results(args, jobs, real, fixed, startup, scale, order, njobs):
    today = datetime.date.today().isoformat()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next((l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal")), "0")
    ideal, inproc = real["ideal executor"], real["in-process ThinLTO"]
    lines = [
        f"# dtlto-bridge benchmark, {today}",
        "",
        f"Machine: {jobs} cores ({cpu}), {int(mem) // 1024 // 1024} GiB, {platform.platform()}.",
        f"Tools: {version(['clang-22', '--version'])}; {version(['ld.lld-22', '--version'])}; "
        f"ninja {version(['ninja', '--version'])}; {version(['make', '--version'])}.",
        f"Command: `bench/run.sh {args.runs}` (medians of {args.runs} interleaved runs; -j{jobs}).",
        "",
    ]
    lines += table(
        f"Real link: Lua 5.4 ({njobs} ThinLTO backend jobs), every program passes its self-test",
        ["link", "median s", "/ ideal", "/ in-process"],
        [[name, f"{t:.3f}", f"{t / ideal:.3f}", f"{t / inproc:.3f}"] for name, t in real.items()],
    )
    lines += ["", f"One clang-22 process start-up (compile of an empty file): {startup * 1000:.1f} ms."]
    lines += table(
        "Fixed overhead: a link with 1 backend job",
        ["link", "median ms", "over ideal ms"],
        [[name, f"{t * 1000:.1f}", f"{(t - fixed['ideal executor']) * 1000:+.1f}"]
         for name, t in fixed.items()],
    )
    lines += table(
        "Parse + render (`dtlto-bridge emit`), synthetic job files",
        ["jobs", "format", "median s", "peak RSS MB"],
        [[str(n), fmt, f"{t:.3f}", f"{rss:.1f}"] for n, fmt, t, rss in scale],
    )
    lines += table(
        "Job order: recorded durations replayed (list scheduling)",
        ["link", "file order s", "longest first by input bytes s", "longest first by duration s",
         "longest job s"],
        [[what] + [f"{x:.3f}" for x in rest] for what, *rest in order],
    )
    publish(lines, today)


if __name__ == "__main__":
    main()
