#!/usr/bin/env bash
# Benchmarks the remote path: Lua 5.4 linked through BuildGrid (installed by setup --tests) on a
# Unix socket with 2 test workers, against the same link run here; the first link's upload, the
# cached relink, a relink after touching one source, per-job steps, the 1-job fixed cost
# (bench/results/<date>-remote.md). Then how much of a link the action cache serves across
# relinks, checkouts, absolute paths and the classic flow, keyed by names and by content
# (bench/results/<date>-sharing.md): for Lua, and with --openssl also for OpenSSL's `openssl`
# program (built once by bench/openssl.sh: about 8 minutes on 2 cores; its links about 40 more).
# See bench/README.md.
# Usage: bench/remote.sh [RUNS] [--openssl]   (RUNS default 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/runs.sh"
"$root/scripts/setup.sh" --tests
cd "$root"
cargo build --release --quiet --bin dtlto-bridge --example ideal
source "$root/bench/lua.sh"
python3 "$root/bench/remote.py" --lua "$lua" --runs "$runs"
if $with_openssl; then
  source "$root/bench/openssl.sh"
  python3 "$root/bench/sharing.py" --lua "$lua" --openssl "$openssl"
else
  python3 "$root/bench/sharing.py" --lua "$lua"
fi
