#!/usr/bin/env bash
# Benchmarks `dtlto-bridge link` (the classic flow): Lua 5.4 on clang-19 through `link`, against
# clang-19's in-process ThinLTO and against integrated DTLTO on clang-22 (same machine,
# interleaved). Writes bench/results/<date>-classic.md. See bench/README.md.
# Usage: bench/classic.sh [RUNS]   (default 5)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" --tests
cd "$root"
cargo build --release --quiet --bin dtlto-bridge
source "$root/bench/lua.sh"
python3 "$root/bench/classic.py" --lua "$lua" --runs "${1:-5}"
