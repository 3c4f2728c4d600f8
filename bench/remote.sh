#!/usr/bin/env bash
# Benchmarks the remote path: Lua 5.4 linked through BuildGrid (installed by setup --tests) on a
# Unix socket with 2 test workers, against the same link run here; the first link's upload, the
# cached relink, a relink after touching one source, per-job steps, the 1-job fixed cost.
# Writes bench/results/<date>-remote.md. See bench/README.md.
# Usage: bench/remote.sh [RUNS]   (default 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" --tests
cd "$root"
cargo build --release --quiet --bin dtlto-bridge --example ideal
source "$root/bench/lua.sh"
python3 "$root/bench/remote.py" --lua "$lua" --runs "${1:-3}"
