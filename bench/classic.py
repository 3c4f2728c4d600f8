#!/usr/bin/env python3
"""Classic-flow benchmark (run through bench/classic.sh): Lua 5.4 linked on clang-19 through
`dtlto-bridge link` (thin link, jobs, final link), against clang-19's in-process ThinLTO, and
integrated DTLTO on clang-22 through dtlto-bridge against clang-22's in-process ThinLTO, all
interleaved. Every linked program must pass its self-test. Writes
bench/results/<date>-classic.md.

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (compile_lua, clean_env, timed, table, version)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lua", required=True)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    jobs = os.cpu_count()
    env = bench.clean_env(jobs)
    dirs, objects = {}, {}
    for v in (19, 22):
        dirs[v] = os.path.join(bench.WORK, f"lua-classic-{v}")
        shutil.rmtree(dirs[v], ignore_errors=True)
        objects[v] = bench.compile_lua(args.lua, dirs[v], clang=f"clang-{v}")
    report = os.path.join(bench.WORK, "classic-report.json")

    def lld(v):
        return [f"clang-{v}", "-O2", "-flto=thin", f"-fuse-ld=lld-{v}"]

    variants = {
        "clang-19 in-process ThinLTO": (19, lld(19) + [f"-Wl,--thinlto-jobs={jobs}"]),
        "clang-19 through dtlto-bridge link": (
            19, [bench.BRIDGE, "link", f"--report={report}", "--"] + lld(19)),
        "clang-22 in-process ThinLTO": (22, lld(22) + [f"-Wl,--thinlto-jobs={jobs}"]),
        "clang-22 DTLTO through dtlto-bridge": (
            22, lld(22) + [f"-fthinlto-distributor={bench.BRIDGE}",
                           f"-Xthinlto-distributor=--report={report}"]),
    }
    times = {name: [] for name in variants}
    job_walls = {name: [] for name in variants}
    njobs = {}
    for _ in range(args.runs):
        for name, (v, cmd) in variants.items():
            cwd = dirs[v]
            prog = os.path.join(cwd, "prog")
            for f in (prog, report):
                if os.path.exists(f):
                    os.remove(f)
            times[name].append(bench.timed(cmd + objects[v] + ["-lm", "-o", "prog"], env=env, cwd=cwd))
            check = subprocess.run([prog], capture_output=True, text=True)
            if check.returncode != 0 or "self-test ok" not in check.stdout:
                sys.exit(f"{name}: the linked program failed its self-test: {check.stderr}")
            if os.path.exists(report):
                with open(report) as f:
                    r = json.load(f)
                job_walls[name].append(r["wall_seconds"])
                njobs[name] = len(r["jobs"])
    med = {name: statistics.median(t) for name, t in times.items()}

    rows = []
    for name in variants:
        jw = statistics.median(job_walls[name]) if job_walls[name] else None
        rows.append([
            name,
            f"{med[name]:.2f}",
            f"{min(times[name]):.2f}",
            str(njobs.get(name, "-")),
            f"{jw:.2f}" if jw is not None else "-",
            f"{med[name] - jw:.2f}" if jw is not None else "-",
        ])
    ratio19 = med["clang-19 through dtlto-bridge link"] / med["clang-19 in-process ThinLTO"]
    ratio22 = med["clang-22 DTLTO through dtlto-bridge"] / med["clang-22 in-process ThinLTO"]
    lines = [
        f"# Classic flow (`dtlto-bridge link`), {datetime.date.today()}",
        "",
        f"Lua 5.4 (33 modules with the self-test), {jobs} cores, {args.runs} runs of each way,",
        "interleaved; the median (and the best) wall seconds of the whole link command. `jobs wall` is",
        "the backend jobs' span from the report; the rest is the thin link and the final link (for",
        "`link`), or lld's own work around the jobs (for DTLTO), plus dtlto-bridge's start-up.",
        "",
        f"- {bench.version(['clang-19', '--version'])}; {bench.version(['clang-22', '--version'])}",
        f"- {bench.version([bench.BRIDGE, '--version'])}",
    ]
    lines += bench.table("Link of Lua", ["way", "median s", "best s", "jobs", "jobs wall s", "rest s"], rows)
    lines += [
        "",
        f"`link` on clang-19 takes {ratio19:.2f}x clang-19's in-process ThinLTO; DTLTO on clang-22",
        f"takes {ratio22:.2f}x clang-22's. See bench/README.md for why.",
    ]
    out = os.path.join(bench.ROOT, "bench/results", f"{datetime.date.today()}-classic.md")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
