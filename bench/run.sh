#!/usr/bin/env bash
# Benchmarks dtlto-bridge: real links of Lua 5.4 (sources from the lua-src crate, fetched at bench
# time by cargo) side by side with in-process ThinLTO and the ideal executor, then synthetic job
# files for parse + render cost. Writes bench/results/<date>.md. See bench/README.md.
# Usage: bench/run.sh [RUNS]   (default 5 runs of each link)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
cargo build --release --quiet --bin dtlto-bridge --example ideal

# The code base: Lua 5.4 from crates.io, never committed.
source "$root/bench/lua.sh"

python3 "$root/bench/bench.py" --lua "$lua" --runs "${1:-5}"
