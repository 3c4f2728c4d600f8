#!/usr/bin/env python3
"""distcc hosts benchmark (run through bench/hosts.sh): Lua 5.4 (and with --openssl, OpenSSL's
`openssl` program) linked through two stock distccd on 127.0.0.1 with `--wrapper distcc`, each
job sent as a bundle, against the same DTLTO link run here. Every program must equal the local
link byte for byte (and Lua's pass its self-test). Writes bench/results/<date>-hosts.md.

The hosts share this machine's cores, so the link cannot be faster through them: what is
measured is what sending costs (packing, distcc, unpacking, the version check), the bytes
shipped, and that every job compiled on a host. bench/README.md explains each number.
"""

import argparse
import datetime
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import sharing  # noqa: E402  (openssl_project: the `openssl` program's link and its check)

TICK = os.sysconf("SC_CLK_TCK")


class Hosts:
    """Two distccd on 127.0.0.1 allowing the host entry (`dtlto-bridge host setup`), stopped by
    PID."""

    def __init__(self, slots):
        self.dir = tempfile.mkdtemp(prefix="dtlto-bench-hosts-")
        os.chmod(self.dir, 0o777)
        bindir = os.path.join(self.dir, "bin")
        os.mkdir(bindir)
        exe = os.path.join(bindir, "dtlto-bridge")
        shutil.copy(bench.BRIDGE, exe)
        subprocess.run([exe, "host", "setup"], check=True, stdout=subprocess.DEVNULL)
        cmdlist = os.path.join(bindir, "distcc-cmdlist")
        self.procs, self.ports = [], []
        for name in ["a", "b"]:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            tmp = os.path.join(self.dir, name + ".tmp")
            os.mkdir(tmp)
            os.chmod(tmp, 0o777)
            cmd = ["distccd", "--daemon", "--no-detach", "--allow", "127.0.0.1", "--listen",
                   "127.0.0.1", "--port", str(port), "--jobs", str(slots), "--log-level", "warning",
                   "--log-file", os.path.join(self.dir, name + ".log")]
            if os.getuid() == 0:
                cmd += ["--user", "nobody"]
            env = {**os.environ, "DISTCC_CMDLIST": cmdlist, "DTLTO_CLANG_HOST": name, "TMPDIR": tmp}
            self.procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                               start_new_session=True))
            self.ports.append(port)
        for port in self.ports:
            until = time.time() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port)).close()
                    break
                except OSError:
                    if time.time() > until:
                        sys.exit("distccd did not start")
                    time.sleep(0.05)
        self.hosts = " ".join(f"127.0.0.1:{p}/{slots}" for p in self.ports)

    def cpu(self):
        """CPU seconds of every distccd and the entries and compilers it reaped."""
        total = 0
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if "(distccd)" in stat:
                fields = stat.rsplit(")", 1)[1].split()
                total += sum(int(x) for x in fields[11:15])
        return total / TICK

    def stop(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, 15)
            except ProcessLookupError:
                pass
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def link(cmd, objects, cwd, env, libs):
    """One link: its wall seconds, the CPU seconds of its process tree, its report, the
    program's bytes."""
    report = os.path.join(cwd, "report.json")
    prog = os.path.join(cwd, "prog")
    if os.path.exists(prog):
        os.remove(prog)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        seconds = bench.timed(cmd + [f"-Xthinlto-distributor=--report={report}"] + objects
                              + libs + ["-o", "prog"], env=env, cwd=cwd)
    except subprocess.CalledProcessError as e:
        sys.exit(f"the link failed: {e.stderr.decode(errors='replace')[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(report) as f, open(prog, "rb") as p:
        return seconds, cpu, json.load(f), p.read()


def measure(name, objects, cwd, libs, runs, hosts, check):
    env = bench.clean_env(2)
    base = ["clang-22", "-O2", "-flto=thin", "-fuse-ld=lld-22",
            "-Xthinlto-distributor=--summary", f"-fthinlto-distributor={bench.BRIDGE}"]
    sent_env = {**env, "DISTCC_HOSTS": hosts.hosts, "DISTCC_DIR": os.path.join(cwd, "distcc")}
    os.makedirs(sent_env["DISTCC_DIR"], exist_ok=True)
    sent_cmd = base + ["-Xthinlto-distributor=--wrapper=distcc"]
    local, sent = [], []
    for _ in range(runs):
        local.append(link(base, objects, cwd, env, libs))
        before = hosts.cpu()
        s = link(sent_cmd, objects, cwd, sent_env, libs)
        sent.append(s + (hosts.cpu() - before,))
    want = local[0][3]
    for s in sent:
        if s[3] != want:
            sys.exit(f"{name}: the program linked through the hosts differs from the local one")
    check(os.path.join(cwd, "prog"))
    report = sent[-1][2]
    totals = report["totals"]
    on_hosts = sum(totals.get("hosts", {}).values())
    return {
        "name": name,
        "jobs": totals["jobs"],
        "on_hosts": on_hosts,
        "hosts": totals.get("hosts", {}),
        "local_s": statistics.median(s for s, *_ in local),
        "sent_s": statistics.median(s for s, *_ in sent),
        "local_cpu": statistics.median(c for _, c, *_ in local),
        "sent_cpu": statistics.median(c for _, c, *_ in sent),
        "host_cpu": statistics.median(s[4] for s in sent),
        "bundle_bytes": totals.get("bundle_bytes", 0),
        "input_bytes": totals["input_bytes"],
        "per_job": sorted(j.get("sent", {}).get("bytes", 0) for j in report["jobs"]),
    }


def selftest(prog):
    check = subprocess.run([prog], capture_output=True, text=True)
    if check.returncode != 0 or "self-test ok" not in check.stdout:
        sys.exit(f"{prog} failed its self-test: {check.stderr}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lua", required=True)
    ap.add_argument("--openssl")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    hosts = Hosts(slots=1)
    rows = []
    try:
        cwd = os.path.join(bench.WORK, "lua-hosts")
        shutil.rmtree(cwd, ignore_errors=True)
        objects = bench.compile_lua(args.lua, cwd)
        rows.append(measure("Lua 5.4", objects, cwd, ["-lm"], args.runs, hosts, selftest))
        if args.openssl:
            cwd = os.path.join(bench.WORK, "openssl-hosts")
            shutil.rmtree(cwd, ignore_errors=True)
            os.makedirs(cwd)
            project = sharing.openssl_project(args.openssl, cwd)
            rows.append(measure("OpenSSL `openssl`", project.inputs, cwd, project.libs, 1,
                                hosts, project.check))
    finally:
        hosts.stop()
    write(rows, args.runs)


def write(rows, runs):
    today = datetime.date.today().isoformat()
    lines = [f"# dtlto-bridge through two distccd hosts, {today}", "",
             f"Two stock distccd ({bench.version(['distccd', '--version'])}) on 127.0.0.1, each "
             "`--jobs 1`, `DISTCC_HOSTS` with 1 slot each, the host entry allowed through the "
             "`DISTCC_CMDLIST` of `dtlto-bridge host setup`; the local link: the same DTLTO link "
             f"without a wrapper, 2 slots. Median of {runs} (OpenSSL: 1). Every program equal to "
             "the local link byte for byte. The hosts share this machine's 2 cores: see "
             "bench/README.md (hosts)."]
    lines += bench.table("The link", ["program", "jobs", "compiled on the hosts", "local s",
                                     "through the hosts s", "ratio"],
                         [[r["name"], str(r["jobs"]),
                           f"{r['on_hosts']} ({', '.join(f'{h} {n}' for h, n in r['hosts'].items())})",
                           f"{r['local_s']:.2f}", f"{r['sent_s']:.2f}",
                           f"{r['sent_s'] / r['local_s']:.2f}x"] for r in rows])
    lines += bench.table("CPU", ["program", "local link s", "link machine, through the hosts s",
                                 "hosts (entry + clang) s", "total ratio"],
                         [[r["name"], f"{r['local_cpu']:.2f}", f"{r['sent_cpu']:.2f}",
                           f"{r['host_cpu']:.2f}",
                           f"{(r['sent_cpu'] + r['host_cpu']) / r['local_cpu']:.2f}x"] for r in rows])
    lines += bench.table("Bytes shipped", ["program", "bundles MB", "inputs per job, summed MB",
                                           "median bundle kB", "p90 kB", "largest kB"],
                         [[r["name"], f"{r['bundle_bytes'] / 1e6:.1f}", f"{r['input_bytes'] / 1e6:.1f}",
                           f"{statistics.median(r['per_job']) / 1e3:.0f}",
                           f"{r['per_job'][int(len(r['per_job']) * 0.9)] / 1e3:.0f}",
                           f"{r['per_job'][-1] / 1e3:.0f}"] for r in rows])
    bench.publish(lines, f"{today}-hosts")


if __name__ == "__main__":
    main()
