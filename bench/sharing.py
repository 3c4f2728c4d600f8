#!/usr/bin/env python3
"""Cache-sharing benchmark (run through bench/remote.sh): how many backend jobs of a link come
from a REAPI action cache when the same inputs are linked again — a relink, a second checkout at
another path, absolute paths from another directory, the classic flow in a second checkout,
thin archives in a second checkout — with actions keyed by names (`--remote-key names`, what
dtlto-bridge did before content keys) and by content (the default). Each keying gets a fresh
BuildGrid with 2 test workers on a Unix socket of this machine, and a history directory of its
own (so each miss's reason compares with links of the same keying). Every linked program must
pass its check and be byte for byte the program of the same flow linked without the farm.
Writes bench/results/<date>-sharing.md.

What it measures, and why each number is what it is, is explained in bench/README.md.
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (compile_lua, clean_env, table, version)
import remote  # noqa: E402  (Farm)

LLD = ["clang-22", "-O2", "-flto=thin", "-fuse-ld=lld-22"]


class Project:
    """A link's inputs in one directory (a checkout), how to link them, how to check the
    program."""

    def __init__(self, name, inputs, thin, libs, check):
        self.name = name
        self.inputs = inputs  # relative to the checkout: objects and archives, in link order
        self.thin = thin  # the same link with thin archives instead of regular ones
        self.libs = libs  # -l options after the inputs
        self.check = check  # (program path) -> None, exits on a wrong program


def lua_project(lua, checkout):
    """Lua 5.4: the self-test program and liblua.a (every Lua object, a regular archive)."""
    objects = bench.compile_lua(lua, checkout)
    members = [o for o in objects if o != "lua_selftest.o"]
    bench.run(["llvm-ar-22", "rcs", "liblua.a"] + members, cwd=checkout)

    def check(prog):
        out = subprocess.run([prog], capture_output=True, text=True)
        if out.returncode != 0 or "self-test ok" not in out.stdout:
            sys.exit(f"check {prog}: its self-test failed: {out.stderr}")

    inputs = ["lua_selftest.o", "liblua.a"]
    return Project("Lua 5.4", inputs, thin(checkout, inputs), ["-lm"], check)


def thin(checkout, inputs):
    """`inputs` with each regular archive replaced by a thin archive of its members (extracted
    under checkout/members/NAME/): lld then names each member by its path, with no pid."""
    out = []
    for rel in inputs:
        if not rel.endswith(".a"):
            out.append(rel)
            continue
        name = os.path.basename(rel)
        into = os.path.join(checkout, "members", name)
        os.makedirs(into)
        archive = os.path.join(checkout, rel)
        listed = subprocess.run(["llvm-ar-22", "t", archive], capture_output=True, text=True,
                                check=True).stdout.split()
        if len(set(listed)) != len(listed):
            sys.exit(f"extract {rel}: two members have the same name")
        bench.run(["llvm-ar-22", "x", archive], cwd=into)
        thin_rel = os.path.join("members", "thin-" + name)
        bench.run(["llvm-ar-22", "rcs", "--thin", thin_rel]
                  + [os.path.join("members", name, m) for m in listed], cwd=checkout)
        out.append(thin_rel)
    return out


def openssl_project(build, checkout):
    """OpenSSL 3: the `openssl` program's objects, apps/libapps.a, libssl.a and libcrypto.a (as
    the OpenSSL build links it), copied from `build`."""
    # The link command as make would run it (with the program out of the way).
    program = os.path.join(build, "apps/openssl")
    os.rename(program, program + ".built")
    try:
        words = subprocess.run(["make", "-s", "-n", "apps/openssl"], cwd=build,
                               capture_output=True, text=True)
    finally:
        os.rename(program + ".built", program)
    text = words.stdout.replace("\\\n", " ")
    line = next((ln for ln in text.splitlines() if "-o apps/openssl" in " ".join(ln.split())),
                None)
    if line is None:
        sys.exit(f"find the link of apps/openssl: not in `make -n`:\n{words.stdout}{words.stderr}")
    args = line.split()
    inputs = [a for a in args if a.endswith(".o") or a.endswith(".a")] + ["libssl.a",
                                                                          "libcrypto.a"]
    libs = [a for a in args if a.startswith("-l") and a not in ("-lssl", "-lcrypto")]
    libs += ["-pthread"]
    for rel in inputs:
        os.makedirs(os.path.join(checkout, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(os.path.join(build, rel), os.path.join(checkout, rel))
    data = os.path.join(checkout, "data.txt")
    with open(data, "w") as f:
        f.write("dtlto-bridge sharing bench\n" * 1000)
    want = subprocess.run(["sha256sum", data], capture_output=True, text=True,
                          check=True).stdout.split()[0]

    def check(prog):
        out = subprocess.run([prog, "dgst", "-sha256", "-r", data], capture_output=True,
                             text=True)
        if out.returncode != 0 or not out.stdout.startswith(want):
            sys.exit(f"check {prog}: dgst gave {out.stdout!r} {out.stderr!r}, not {want}")

    return Project("OpenSSL 3 (`openssl` program)", inputs, thin(checkout, inputs), libs, check)


def link(farm, key, checkout, inputs, libs, env, cwd=None, classic=False):
    """One link of `inputs` into checkout/prog through the farm (here without one); its report
    (the program checked by the caller)."""
    # The program by a relative name where the link runs in the checkout (lld names the jobs'
    # outputs after it), by its absolute path from elsewhere.
    prog = "prog" if cwd is None else os.path.join(checkout, "prog")
    cwd = cwd or checkout
    report = os.path.join(cwd, "report.json")
    for f in (report, os.path.join(checkout, "prog")):
        if os.path.exists(f):
            os.remove(f)
    bridge = [f"--report={report}"]
    if farm:
        bridge += [f"--remote={farm.url}", "--remote-instance=main", f"--remote-key={key}"]
    if classic:
        cmd = [bench.BRIDGE, "link"] + bridge + ["--"] + LLD
    else:
        cmd = LLD + [f"-fthinlto-distributor={bench.BRIDGE}"] + \
            [f"-Xthinlto-distributor={a}" for a in bridge]
    start = time.perf_counter()
    out = subprocess.run(cmd + inputs + libs + ["-o", prog], cwd=cwd, env=env,
                         capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"link {prog} in {cwd}: {' '.join(cmd)} failed:\n{out.stderr}")
    with open(report) as f:
        return seconds, json.load(f)


def scenarios(project, key, a, b, elsewhere, env):
    """Every link of the table, keyed `key`, on a fresh farm: rows of (link, cached, jobs, ran
    here, executed, seconds, {kind of miss: jobs})."""
    farm = remote.Farm(workers=2)
    env = dict(env, DTLTO_BRIDGE_HISTORY=os.path.join(bench.WORK, f"history-sharing-{key}"))
    shutil.rmtree(env["DTLTO_BRIDGE_HISTORY"], ignore_errors=True)
    rows = []
    try:
        # Each flow's program linked here, without the farm: every program the farm gives must
        # be the same, byte for byte.
        here = {}
        for classic in (False, True):
            link(None, key, a, project.inputs, project.libs, env, classic=classic)
            with open(os.path.join(a, "prog"), "rb") as f:
                here[classic] = f.read()

        def row(name, checkout, inputs, cwd=None, classic=False):
            before = farm.executed()
            seconds, r = link(farm, key, checkout, inputs, project.libs, env, cwd, classic)
            project.check(os.path.join(checkout, "prog"))
            with open(os.path.join(checkout, "prog"), "rb") as f:
                if f.read() != here[classic]:
                    sys.exit(f"link {name} ({key}): the program differs from the one linked "
                             "here without the farm")
            t = r["totals"]
            executed = farm.executed() - before
            if t["fell_back"] or executed != t["remote"]:
                sys.exit(f"link {name} ({key}): {t['fell_back']} jobs fell back, "
                         f"{executed} executed for {t['remote']} remote: {t}")
            why = {}
            for j in r["jobs"]:
                kind = (j.get("remote") or {}).get("miss_kind")
                if j["ran"] == "remote":
                    why[kind] = why.get(kind, 0) + 1
            rows.append((name, t["remote_cache"], t["jobs"], t["local"], executed, seconds, why))

        absolute = lambda checkout, inputs: [os.path.join(checkout, i) for i in inputs]
        row("first link (empty cache)", a, project.inputs)
        row("relink, same checkout, nothing changed", a, project.inputs)
        row("second checkout at another path", b, project.inputs)
        row("absolute paths, run from another directory, first checkout", a,
            absolute(a, project.inputs), cwd=elsewhere)
        row("absolute paths, run from another directory, second checkout", b,
            absolute(b, project.inputs), cwd=elsewhere)
        row("classic `link`, first checkout", a, project.inputs, classic=True)
        row("classic `link`, second checkout", b, project.inputs, classic=True)
        row("thin archives, first checkout", a, project.thin)
        row("thin archives, second checkout", b, project.thin)
    finally:
        farm.stop()
    return rows


def buildgrid_version():
    out = subprocess.run([os.path.join(remote.PY, "python"), "-c",
                          "from importlib.metadata import version; print(version('buildgrid'))"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "(version unknown)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lua", required=True)
    ap.add_argument("--openssl", help="an OpenSSL build tree (bench/openssl.sh)")
    args = ap.parse_args()
    env = bench.clean_env(os.cpu_count())
    today = datetime.date.today().isoformat()
    lines = [
        f"# dtlto-bridge cache-sharing benchmark, {today}",
        "",
        f"Machine: {os.cpu_count()} cores; BuildGrid {buildgrid_version()} on a Unix socket of "
        "the same machine, "
        "2 test workers (tests/remote/worker.py); a fresh server for each keying.",
        f"Tools: {bench.version(['clang-22', '--version'])}.",
        "Command: `bench/remote.sh" + (" --openssl" if args.openssl else "") + "`. Each row is "
        "one link, in the order shown, after the rows above it; every program passed its check "
        "and equals, byte for byte, the same flow's program linked without the farm.",
        "A cell reads: jobs from the action cache of all jobs (jobs run here instead of remotely, "
        "if any; jobs the workers executed; wall seconds of the link).",
    ]
    projects = []
    root = os.path.join(bench.WORK, "sharing")
    shutil.rmtree(root, ignore_errors=True)
    for name in ["lua"] + (["openssl"] if args.openssl else []):
        a = os.path.join(root, name, "checkout-a")
        b = os.path.join(root, name, "elsewhere", "checkout-b")
        elsewhere = os.path.join(root, name, "other-dir")
        for d in (a, elsewhere):
            os.makedirs(d)
        project = lua_project(args.lua, a) if name == "lua" else openssl_project(args.openssl, a)
        shutil.copytree(a, b)
        projects.append((project, a, b, elsewhere))
    for project, a, b, elsewhere in projects:
        by = {key: scenarios(project, key, a, b, elsewhere, env) for key in ("names", "content")}
        cell = lambda r: (f"{r[1]} of {r[2]}" + (f" ({r[3]} here)" if r[3] else "")
                          + f"; {r[4]} executed; {r[5]:.1f}s")
        rows = [[n[0], cell(n), cell(c)] for n, c in zip(by["names"], by["content"])]
        lines += bench.table(
            f"{project.name}: {by['content'][0][2]} backend jobs",
            ["link", "keyed by names (before)", "keyed by content (now)"], rows)
        reasons = lambda r: "; ".join(f"{k}: {n}" for k, n in sorted(r[6].items(),
                                                                     key=lambda kv: -kv[1]))
        lines += bench.table(
            f"{project.name}: why jobs executed, keyed by content (the report's `remote.miss`, "
            "by kind)",
            ["link", "jobs executed, by reason"],
            [[c[0], reasons(c) or "-"] for c in by["content"]])
    bench.publish(lines, f"{today}-sharing")


if __name__ == "__main__":
    main()
