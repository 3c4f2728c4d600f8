#!/usr/bin/env python3
"""The farm bench (run through bench/farm.sh): a link's time through dtlto-bridge against a
simulated build farm, against the ideal. See bench/README.md ("The farm at the farm's speed").

1. Record once: the link with record.py as its distributor, every job run here one at a time;
   each job's time and object kept under target/bench/farm/PROGRAM/record (never committed).
2. The local phases: the same link with record.py --replay (every recorded object hard-linked at
   once, nothing compiled): lld's thin link, its shards, its final link.
3. For each round-trip time and bandwidth (bench/farm/relay.py between dtlto-bridge and
   BuildGrid) and each number of workers W (bench/farm/worker.py: W single-slot bots that sleep
   each job's recorded time times SCALE and return its recorded object), RUNS times: a fresh
   BuildGrid, the first link (empty farm), then RELINKS relinks (all from the action cache).
4. The ideal of a first link: the local phases plus the longest-processing-time-first schedule
   of the recorded times (times SCALE) on W workers; of a cached relink: the local phases
   measured again between the relinks, the farm idle beside them (the same load).

Every linked program must equal the recorded link's program byte for byte and pass its check.
"""

import argparse
import datetime
import functools
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import bench  # noqa: E402  (compile_lua, clean_env, makespan, table, version, publish)

ROOT = bench.ROOT
PY = os.path.join(ROOT, "target/pytools/bin")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_of(pid):
    """User plus system CPU seconds of a live process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except OSError:
        return 0.0


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Farm:
    """BuildGrid on a Unix socket, the replay workers on it, and the relay in front: every
    process stopped by PID."""

    def __init__(self, workers, per_process, record, scale, rtt_ms, mbit, batch_limit=0,
                 late_ms=0.0):
        self.dir = tempfile.mkdtemp(prefix="dtlto-farm-bench-")
        self.procs = {"server": [], "workers": [], "relay": []}
        self.relay_log = os.path.join(self.dir, "relay.jsonl")
        self.connections_seen = 0
        try:
            server, self.socket = bench.start_buildgrid(os.path.join(HERE, "buildgrid.yml"),
                                                        self.dir, batch_limit)
            self.procs["server"].append(server)
            self.log = os.path.join(self.dir, "worker.jsonl")
            self.workers_log = open(os.path.join(self.dir, "workers.err"), "w")
            for i in range(0, workers, per_process):
                self.procs["workers"].append(subprocess.Popen(
                    [os.path.join(PY, "python"), os.path.join(HERE, "worker.py"),
                     "--remote", "unix:" + self.socket, "--instance", "main", "--name", f"w{i}",
                     "--bots", str(min(per_process, workers - i)), "--record", record,
                     "--scale", str(scale), "--log", self.log,
                     "--batch-limit", str(batch_limit)],
                    stdin=subprocess.DEVNULL, stdout=self.workers_log, stderr=self.workers_log))
            port_file = os.path.join(self.dir, "relay.port")
            self.procs["relay"].append(subprocess.Popen(
                [os.path.join(PY, "python"), os.path.join(HERE, "relay.py"),
                 "--to", "unix:" + self.socket, "--rtt-ms", str(rtt_ms), "--mbit", str(mbit),
                 "--late-ms", str(late_ms), "--log", self.relay_log,
                 "--port-file", port_file], stdin=subprocess.DEVNULL))
            until = time.time() + 30
            while not os.path.exists(port_file):
                if time.time() > until:
                    raise RuntimeError("the relay did not start")
                time.sleep(0.05)
            with open(port_file) as f:
                self.url = f"grpc://127.0.0.1:{f.read().strip()}"
            self.wait_for_bots(workers)
        except BaseException:
            self.stop()
            raise

    def wait_for_bots(self, workers):
        """Until BuildGrid knows every bot (each has created its session), so that the first
        link does not race the workers' start."""
        until = time.time() + 120
        while time.time() < until:
            for p in self.procs["workers"]:
                if p.poll() is not None:
                    raise RuntimeError("a worker process ended: " +
                                       open(self.workers_log.name).read()[-2000:])
            # Each bot logs a "ready" line once its session is created.
            ready = sum(1 for a in self.actions() if "ready" in a)
            if ready >= workers:
                return
            time.sleep(0.2)
        raise RuntimeError("the bots did not all create their sessions in 120 s")

    def calls(self):
        """The gRPC calls of the connections the relay closed since the last ask (one link's:
        dtlto-bridge's connections close when it exits), added up: calls, calls started with
        none in flight, bytes up and down."""
        until = time.time() + 5
        lines = []
        while time.time() < until:
            if os.path.exists(self.relay_log):
                with open(self.relay_log) as f:
                    lines = [json.loads(line) for line in f]
            if len(lines) > self.connections_seen:
                break
            time.sleep(0.05)
        new, self.connections_seen = lines[self.connections_seen:], len(lines)
        return {k: sum(c[k] for c in new) for k in ("calls", "serial", "up", "down")}

    def cpu(self):
        return {k: sum(cpu_of(p.pid) for p in ps) for k, ps in self.procs.items()}

    def actions(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def jobs(self):
        return [a for a in self.actions() if "ready" not in a]

    def stop(self):
        bench.stop([p for ps in self.procs.values() for p in ps], self.dir)


class Program:
    """What is linked: its inputs (relative to `dir`), extra link arguments, and its check."""

    def __init__(self, name, dir, inputs, libs, check):
        self.name, self.dir, self.inputs, self.libs, self.check = name, dir, inputs, libs, check


def lua_program(lua, dir):
    objects = bench.compile_lua(lua, dir)

    def check(prog):
        out = subprocess.run([prog], capture_output=True, text=True)
        if out.returncode != 0 or "self-test ok" not in out.stdout:
            sys.exit(f"check {prog}: its self-test failed: {out.stderr}")
    return Program("Lua 5.4 (self-test program)", dir, objects, ["-lm"], check)


def smoke_program(dir):
    """Two small modules (a smoke test of the bench itself: bench/farm.sh --smoke)."""
    os.makedirs(dir, exist_ok=True)
    sources = {"main.c": "int add(int, int);\n#include <stdio.h>\n"
                         "int main(void) { printf(\"%d\\n\", add(1, 2)); return 0; }\n",
               "add.c": "int add(int a, int b) { return a + b; }\n"}
    for name, text in sources.items():
        with open(os.path.join(dir, name), "w") as f:
            f.write(text)
        subprocess.run(["clang-22", "-O2", "-flto=thin", "-c", name, "-o", name[:-2] + ".o"],
                       cwd=dir, check=True)

    def check(prog):
        out = subprocess.run([prog], capture_output=True, text=True)
        if out.returncode != 0 or out.stdout != "3\n":
            sys.exit(f"check {prog}: printed {out.stdout!r}, not 3")
    return Program("smoke test (2 modules)", dir, ["main.o", "add.o"], [], check)


def openssl_program(build, dir):
    import sharing
    shutil.rmtree(dir, ignore_errors=True)  # copied again from the build: the same bytes
    os.makedirs(dir)
    project = sharing.openssl_project(build, dir)
    return Program("OpenSSL 3 (`openssl` program)", dir, project.inputs, project.libs,
                   project.check)


def link(program, distributor, extra, env, out="prog"):
    """One link in the program's directory; its wall seconds, CPU seconds of its processes, and
    the time it started (for the workers' log)."""
    prog = os.path.join(program.dir, out)
    if os.path.exists(prog):
        os.remove(prog)
    cmd = (["clang-22", "-O2", "-flto=thin", "-fuse-ld=lld-22", f"-fthinlto-distributor={distributor}"]
           + [f"-Xthinlto-distributor={a}" for a in extra] + program.inputs + program.libs
           + ["-o", out])
    cpu0 = children_cpu()
    started = time.time()
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=program.dir, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"link failed: {' '.join(cmd)}\n{done.stderr}")
    return seconds, children_cpu() - cpu0, started


def through(farm, program, bridge, env, recorded):
    """One link through `farm`, its program checked against the recorded one: its wall and CPU
    seconds, the farm's CPU seconds, the time it started, and its report."""
    report = os.path.join(program.dir, "report.json")
    remote = [f"--remote={farm.url}", "--remote-instance=main", f"--report={report}"]
    cpu0 = farm.cpu()
    seconds, link_cpu, started = link(program, bridge, remote, env)
    cpu1 = farm.cpu()
    same_program(program, recorded)
    with open(report) as f:
        rep = json.load(f)
    return seconds, link_cpu, {k: cpu1[k] - cpu0[k] for k in cpu1}, started, rep


def same_program(program, recorded, prog="prog"):
    path = os.path.join(program.dir, prog)
    program.check(path)
    with open(path, "rb") as a, open(recorded, "rb") as b:
        if a.read() != b.read():
            sys.exit(f"{path} differs from the recorded link's program {recorded}")


def lpt(durations, slots):
    return bench.makespan(sorted(durations, reverse=True), slots)


@functools.lru_cache(maxsize=None)
def members(dir, archive):
    """Each member's size in the archive of that file name under `dir` (lld names an archive's
    members by the archive's file name), by `ar tv`."""
    found = [os.path.join(d, archive) for d, _, files in os.walk(dir) if archive in files]
    if len(found) != 1:
        sys.exit(f"{len(found)} archives {archive} under {dir}")
    listing = subprocess.run(["ar", "tv", found[0]], check=True, capture_output=True,
                             text=True).stdout
    return {line.split()[-1]: int(line.split()[2]) for line in listing.splitlines()}


def module_bytes(dir, module):
    """The size of a recorded job's own module in the program's directory: a file, or an archive
    member as lld names it (`lib.a(m.o at 80).4.1D36.o`)."""
    member = re.match(r"(.+\.a)\((.+) at \d+\)", module)
    if not member:
        return os.path.getsize(os.path.join(dir, module))
    return members(dir, member.group(1))[member.group(2)]


def schedules(rec, sizes, scale, slots):
    """The span of the recorded times x scale on `slots` workers started longest first by the
    times themselves (LPT), by each job's own module's size (`sizes`, by module: dtlto-bridge's
    estimate without a history), and by all the bytes each job reads."""
    jobs = list(rec["jobs"].values())

    def by(key):
        order = sorted(jobs, key=key, reverse=True)
        return bench.makespan([j["seconds"] * scale for j in order], slots)

    return (by(lambda j: j["seconds"]), by(lambda j: sizes[j["module"]]),
            by(lambda j: j["input_bytes"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bridge", required=True)
    ap.add_argument("--lua")
    ap.add_argument("--openssl", help="an OpenSSL build tree (bench/openssl.sh)")
    ap.add_argument("--smoke", action="store_true", help="a 2-module program only")
    ap.add_argument("--scale", type=float, default=10.0)
    ap.add_argument("--workers", default="16")
    ap.add_argument("--net", default="20:100,1:1000", help="RTT_MS:MBIT,...")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--relinks", type=int, default=3)
    ap.add_argument("--bots-per-process", type=int, default=16)
    ap.add_argument("--rerecord", action="store_true")
    ap.add_argument("--record-jobs", type=int, default=1)
    ap.add_argument("--name", default=None, help="results file name (bench/results/NAME.md)")
    ap.add_argument("--out-json", default=None)
    ap.add_argument("--batch-limit", type=int, default=0,
                    help="the server's batch limit in bytes (default: BuildGrid's, 4 MiB)")
    ap.add_argument("--late-ms", type=float, default=0.0,
                    help="the relay holds every server answer this much longer")
    args = ap.parse_args()
    bridge = os.path.abspath(args.bridge)
    workers = [int(w) for w in args.workers.split(",")]
    nets = [tuple(float(x) for x in n.split(":")) for n in args.net.split(",")]
    record_py = os.path.join(HERE, "record.py")
    store_bin = os.path.join(bench.WORK, "farm", "store")
    os.makedirs(os.path.dirname(store_bin), exist_ok=True)
    subprocess.run(["clang-22", "-O2", "-o", store_bin, os.path.join(HERE, "store.c")], check=True)

    results = {"programs": {}, "load_start": os.getloadavg()}
    programs = []
    if args.smoke:
        programs.append(("smoke", smoke_program))
    if args.lua:
        programs.append(("lua", lambda d: lua_program(args.lua, d)))
    if args.openssl:
        programs.append(("openssl", lambda d: openssl_program(args.openssl, d)))
    relay_checks = []
    for rtt, mbit in nets:
        out = subprocess.run([os.path.join(PY, "python"), os.path.join(HERE, "relay.py"),
                              "--selftest", "--rtt-ms", str(rtt), "--mbit", str(mbit),
                              "--late-ms", str(args.late_ms)],
                             capture_output=True, text=True, check=True)
        relay_checks.append((rtt, mbit, json.loads(out.stdout)))
    results["relay"] = relay_checks

    for key, make in programs:
        work = os.path.join(bench.WORK, "farm", key)
        program = make(os.path.join(work, "link"))
        store = os.path.join(work, "record")
        recorded = os.path.join(store, "prog")
        env = bench.clean_env(os.cpu_count())
        env["DTLTO_BRIDGE_HOST_POOL"] = os.path.join(work, "pool")
        # 1. Record once.
        if args.rerecord or not os.path.exists(os.path.join(store, "record.json")):
            shutil.rmtree(store, ignore_errors=True)
            os.makedirs(store)
            print(f"farm: recording {program.name}", file=sys.stderr)
            link(program, record_py, [f"--store={store}", f"-j{args.record_jobs}"], env)
            program.check(os.path.join(program.dir, "prog"))
            shutil.copy2(os.path.join(program.dir, "prog"), recorded)
        with open(os.path.join(store, "record.json")) as f:
            rec = json.load(f)
        times = [j["seconds"] for j in rec["jobs"].values()]
        sizes = {j["module"]: module_bytes(program.dir, j["module"]) for j in rec["jobs"].values()}
        orders = {w: schedules(rec, sizes, args.scale, w) for w in workers}
        # 2. The local phases (median of max(5, runs) links, every program checked).
        local = []
        for _ in range(max(5, args.runs)):
            local.append(link(program, store_bin, [store], env)[0])
            same_program(program, recorded)
        local_s = statistics.median(local)
        print(f"farm: {program.name}: {len(times)} jobs recorded, local phases {local_s:.3f} s",
              file=sys.stderr)

        rows = []
        for rtt, mbit in nets:
            for w in workers:
                ideal_first = local_s + lpt([t * args.scale for t in times], w)
                firsts, relinks, beside = [], [], []
                for run in range(args.runs):
                    farm = Farm(w, args.bots_per_process, store, args.scale, rtt, mbit,
                                args.batch_limit, args.late_ms)
                    try:
                        history = tempfile.mkdtemp(prefix="dtlto-farm-history-")
                        renv = dict(env, DTLTO_BRIDGE_HISTORY=history)
                        s, link_cpu, farm_cpu, started, rep = through(
                            farm, program, bridge, renv, recorded)
                        tot = rep["totals"]
                        if tot["remote"] != len(times) or tot.get("fell_back"):
                            sys.exit(f"first link: {tot['remote']} of {len(times)} jobs remote, "
                                     f"{tot.get('fell_back')} fell back: {tot}")
                        acts = farm.jobs()
                        bad = [a for a in acts if not a["ok"]]
                        if bad:
                            sys.exit(f"workers failed actions: {bad[:3]}")
                        firsts.append({
                            "seconds": s, "link_cpu": link_cpu, "farm_cpu": farm_cpu,
                            "started": started, "actions": acts,
                            "remote": rep["remote"], "bridge_start": rep["start"],
                            "jobs": [j.get("remote", {}) for j in rep["jobs"]],
                            "calls": farm.calls(),
                        })
                        for _ in range(args.relinks):
                            s, link_cpu, farm_cpu, _, rep = through(
                                farm, program, bridge, renv, recorded)
                            if rep["totals"]["remote_cache"] != len(times):
                                sys.exit(f"relink: {rep['totals']['remote_cache']} of {len(times)} "
                                         "jobs from the action cache")
                            relinks.append({"seconds": s, "link_cpu": link_cpu,
                                            "farm_cpu": farm_cpu, "remote": rep["remote"],
                                            "bridge": rep["wall_seconds"],
                                            "calls": farm.calls()})
                            # The local phases again, the farm idle beside them: the ideal
                            # of a relink on the same machine, under the same load.
                            beside.append(link(program, store_bin, [store], env)[0])
                            same_program(program, recorded)
                        if len(farm.jobs()) != len(acts):
                            sys.exit("a cached relink executed something")
                    finally:
                        farm.stop()
                        shutil.rmtree(history, ignore_errors=True)
                    print(f"farm: {key} rtt {rtt} ms {mbit} Mbit/s {w} workers run {run + 1}: "
                          f"first {firsts[-1]['seconds']:.3f} s, relinks "
                          + ", ".join(f"{r['seconds']:.3f}" for r in relinks[-args.relinks:]),
                          file=sys.stderr)
                rows.append({"rtt": rtt, "mbit": mbit, "workers": w, "ideal_first": ideal_first,
                             "ideal_relink": med(beside) if beside else local_s,
                             "beside": beside, "firsts": firsts, "relinks": relinks})
        results["programs"][key] = {
            "name": program.name, "jobs": len(times), "job_seconds": times, "local": local,
            "local_s": local_s, "rows": rows,
            "record_threads": rec.get("threads", 1), "orders": orders,
            "costliest": max(rec["jobs"], key=lambda k: rec["jobs"][k]["seconds"])}

    results["load_end"] = os.getloadavg()
    if args.out_json:
        with open(args.out_json, "w") as f:
            json.dump(results, f, indent=1)
    write(args, bridge, results)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def write(args, bridge, results):
    today = datetime.date.today().isoformat()
    # The build's commit: of the checkout it is in, else of this one (a copy of a build from
    # it); its path only inside this checkout (results name no path of the machine).
    git = lambda d: subprocess.run(["git", "-C", d, "rev-parse", "--short", "HEAD"],
                                   capture_output=True, text=True).stdout.strip()
    commit = git(os.path.dirname(bridge)) or git(ROOT) or "?"
    inside = os.path.relpath(bridge, ROOT)
    shown = "a copy outside the checkout" if inside.startswith("..") else inside
    cmdline = (f"bench/farm.sh --bridge {shown if shown == inside else 'BRIDGE'} "
               f"--scale {args.scale:g} "
               f"--workers {args.workers} --net {args.net} --runs {args.runs} "
               f"--relinks {args.relinks}" + (" --openssl" if args.openssl else "")
               + (f" --batch-limit {args.batch_limit}" if args.batch_limit else "")
               + (f" --late-ms {args.late_ms:g}" if args.late_ms else "")
               + ("" if args.lua else " --no-lua"))
    lines = [
        f"# dtlto-bridge against a simulated build farm, {today}",
        "",
        f"Machine: {os.cpu_count()} cores. BuildGrid 0.2.53 on a Unix socket with replay workers "
        "(bench/farm/worker.py: each bot takes one action at a time, sleeps the job's recorded "
        f"time x{args.scale:g} and returns the recorded object); dtlto-bridge reaches the server "
        "through bench/farm/relay.py (a user-space link of the given round-trip time and "
        "bandwidth). What every number is: bench/README.md, \"The farm at the farm's speed\"."
        + (f" The server's batch limit: {args.batch_limit} bytes (BuildGrid's own is 4 MiB)."
           if args.batch_limit else "")
        + (f" The relay holds every server answer {args.late_ms:g} ms longer (an engine that "
           "leaves Nagle on, answering once the client's delayed ACK comes)."
           if args.late_ms else ""),
        f"dtlto-bridge: `{bench.version([bridge, '--version'])}`, commit {commit} ({shown}).",
        f"Tools: {bench.version(['clang-22', '--version'])}.",
        f"Command: `{cmdline}`.",
        "Load average (1, 5, 15 min) at the start: "
        + ", ".join(f"{x:.2f}" for x in results["load_start"]) + "; at the end: "
        + ", ".join(f"{x:.2f}" for x in results["load_end"])
        + " (what else ran on this machine, if anything: the notes below the tables).",
    ]
    lines += bench.table(
        "The relay, measured (bench/farm/relay.py --selftest: 1-byte round trip, median of 50; "
        "a 16 MB transfer)",
        ["link asked for", "round trip ms", "throughput Mbit/s"],
        [[f"{rtt:g} ms, {mbit:g} Mbit/s", f"{r['rtt_ms']:.2f}", f"{r['mbit']:.0f}"]
         for rtt, mbit, r in results["relay"]])
    for key, p in results["programs"].items():
        t = p["job_seconds"]
        lines += bench.table(
            f"{p['name']}: the recording ({p['jobs']} jobs, run one at a time here)",
            ["", "s"],
            [["jobs' times added up", f"{sum(t):.2f}"], ["longest job", f"{max(t):.3f}"],
             ["median job", f"{statistics.median(t):.3f}"],
             [f"local phases (median of {len(p['local'])} links, every object hard-linked by "
              "bench/farm/store.c)", f"{p['local_s']:.3f}"]]
            + [[f"best schedule (LPT) of the times x{args.scale:g} on {w} workers",
                f"{lpt([x * args.scale for x in t], w):.2f}"]
               for w in sorted({r['workers'] for r in p['rows']})]
            + [[f"the same, longest first by {what} ({w} workers)", f"{o[k]:.2f}"]
               for w, o in sorted(p["orders"].items())
               for k, what in ((1, "each job's module size (dtlto-bridge without a history)"),
                               (2, "the bytes each job reads"))])
        rows = []
        for r in p["rows"]:
            net = f"{r['rtt']:g} ms, {r['mbit']:g} Mbit/s"
            f = med(x["seconds"] for x in r["firsts"])
            c = med(x["seconds"] for x in r["relinks"])
            rows.append([f"first link (empty farm)", net, str(r["workers"]), f"{f:.3f}",
                         f"{r['ideal_first']:.3f}", f"{f / r['ideal_first']:.3f}x",
                         " / ".join(f"{x['seconds']:.2f}" for x in r["firsts"])])
            beside = r.get("beside") or []
            # Each relink against the local phases measured right after it, and dtlto-bridge's
            # own part of it (its report's wall).
            rounds = [x["seconds"] / b for x, b in zip(r["relinks"], beside)]
            own = med(x.get("bridge") for x in r["relinks"])
            rows.append([f"relink, all from the action cache", net, str(r["workers"]), f"{c:.3f}",
                         f"{r['ideal_relink']:.3f}", f"{c / r['ideal_relink']:.2f}x",
                         " / ".join(f"{x['seconds']:.3f}" for x in r["relinks"])
                         + (" (local phases between them: "
                            + " / ".join(f"{x:.3f}" for x in beside) + "; median of the "
                            f"rounds' ratios {med(rounds):.2f}x)" if beside else "")
                         + f"; dtlto-bridge's own wall, median: {own:.3f} s"])
        lines += bench.table(
            f"{p['name']}: links through the farm, job times x{args.scale:g} (median; every "
            "program equal to the recorded one byte for byte and passing its check)",
            ["link", "link (RTT, bandwidth)", "workers", "s", "ideal s", "ratio", "each run"],
            rows)
        # Where the time goes, first link.
        rows = []
        for r in p["rows"]:
            before, span, after, busy, lpts = [], [], [], [], []
            for x in r["firsts"]:
                acts = x["actions"]
                t0, t1 = x["started"], x["started"] + x["seconds"]
                first_taken = min(a["taken"] for a in acts)
                last_done = max(a["completed"] for a in acts)
                before.append(first_taken - t0)
                span.append(last_done - first_taken)
                after.append(t1 - last_done)
            net = f"{r['rtt']:g} ms, {r['mbit']:g} Mbit/s"
            rows.append([net, str(r["workers"]), f"{med(before):.3f}", f"{med(span):.3f}",
                         f"{r['ideal_first'] - p['local_s']:.3f}", f"{med(after):.3f}"])
        lines += bench.table(
            f"{p['name']}: where a first link's time goes (medians over the runs)",
            ["link", "workers", "start to the first job taken by a bot s",
             "first job taken to last job done s", "LPT schedule s",
             "last job done to the link's end s"], rows)
        rows = []
        for r in p["rows"]:
            net = f"{r['rtt']:g} ms, {r['mbit']:g} Mbit/s"
            first_taken, costliest, before = [], [], []
            for x in r["firsts"]:
                t0 = x.get("bridge_start")
                if t0 is None:
                    continue
                first_taken.append(min(a["taken"] for a in x["actions"]) - t0)
                costliest += [a["taken"] - t0 for a in x["actions"]
                              if a.get("key") == p.get("costliest")]
                # clang's start to dtlto-bridge's: lld's thin link, slower on a busy machine.
                before.append(t0 - x["started"])
            each = lambda xs: " / ".join(f"{x:.2f}" for x in xs)
            calls = lambda xs, k: med(x["calls"][k] for x in xs if "calls" in x)
            beside = r.get("beside") or []
            wire = [x["remote"].get("downloaded_bytes", 0) * 8 / (r["mbit"] * 1e6)
                    for x in r["relinks"]]
            own = [(x["bridge"] - w) / b for x, w, b in zip(r["relinks"], wire, beside)]
            rows.append([net, str(r["workers"]), f"{med(first_taken):.2f}",
                         f"{med(costliest):.2f} ({each(costliest)})", each(before),
                         f"{calls(r['firsts'], 'calls'):.0f} / {calls(r['firsts'], 'serial'):.0f}",
                         f"{calls(r['relinks'], 'calls'):.0f} / "
                         f"{calls(r['relinks'], 'serial'):.0f}",
                         f"{med(x['bridge'] for x in r['relinks']):.3f}",
                         f"{med(wire):.3f}", f"{med(beside):.3f}",
                         f"{med(own):.2f}x ({each(own)})"])
        lines += bench.table(
            f"{p['name']}: the first seconds and the calls (medians; measures that do not depend "
            "on the job-time scale)",
            ["link", "workers", "dtlto-bridge's start to the first job taken by a bot s",
             "to the costliest job taken s (each run)",
             "first link: clang's start to dtlto-bridge's s (each run)",
             "first link: calls / started with none in flight",
             "relink: calls / started with none in flight", "relink: dtlto-bridge's wall s",
             "relink: wire time of its downloads s", "relink: lld's phases s",
             "relink: (dtlto-bridge's wall - wire) / lld's phases (each relink)"], rows)
        rows = []
        for r in p["rows"]:
            jobs = [j for x in r["firsts"] for j in x["jobs"]]
            acts = [a for x in r["firsts"] for a in x["actions"]]
            net = f"{r['rtt']:g} ms, {r['mbit']:g} Mbit/s"
            rows.append([net, str(r["workers"]),
                         f"{med(j.get('upload_seconds') for j in jobs):.3f}",
                         f"{med(j.get('queued_seconds') for j in jobs):.3f}",
                         f"{med(j.get('execute_seconds') for j in jobs):.3f}",
                         f"{med(a['slept'] for a in acts):.3f}",
                         f"{med(j.get('download_seconds') for j in jobs):.3f}",
                         f"{max(j.get('download_seconds') or 0 for j in jobs):.3f}"])
        lines += bench.table(
            f"{p['name']}: per job of the first links (report's remote fields, medians over "
            "every job of every run)",
            ["link", "workers", "waiting for upload s", "queued s", "execute s",
             "bot's sleep s", "download s", "download max s"], rows)
        rows = []
        for r in p["rows"]:
            net = f"{r['rtt']:g} ms, {r['mbit']:g} Mbit/s"
            for what, xs in (("first", r["firsts"]), ("relink", r["relinks"])):
                rows.append([what, net, str(r["workers"]),
                             f"{med(x['remote']['uploaded_bytes'] for x in xs) / 1e6:.2f}",
                             f"{med(x['remote'].get('downloaded_bytes') for x in xs) / 1e6:.2f}",
                             f"{med(x['link_cpu'] for x in xs):.2f}",
                             f"{med(x['farm_cpu']['server'] for x in xs):.2f}",
                             f"{med(x['farm_cpu']['workers'] for x in xs):.2f}",
                             f"{med(x['farm_cpu']['relay'] for x in xs):.2f}"])
        lines += bench.table(
            f"{p['name']}: bytes moved and CPU seconds spent per link (medians)",
            ["link", "link (RTT, bandwidth)", "workers", "uploaded MB", "downloaded MB",
             "CPU: clang, lld, dtlto-bridge", "CPU: BuildGrid", "CPU: worker processes",
             "CPU: relay"], rows)
    if args.smoke and not args.name:  # a test of the bench: not published
        path = os.path.join(bench.WORK, "farm", "smoke.md")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        print("\n".join(lines) + f"\nwritten to {path}")
        return
    bench.publish(lines, args.name or f"{today}-farm")


if __name__ == "__main__":
    main()
