#!/usr/bin/env bash
# Benchmarks jobs sent as bundles to two stock distccd on 127.0.0.1 (bench/hosts.py): Lua 5.4,
# and with --openssl OpenSSL's `openssl` program (built once by bench/openssl.sh), against the
# same DTLTO link run here (bench/results/<date>-hosts.md; explained in bench/README.md).
# Usage: bench/hosts.sh [RUNS] [--openssl]   (RUNS default 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/runs.sh"
"$root/scripts/setup.sh" --tests
cd "$root"
cargo build --release --quiet --bin dtlto-bridge
source "$root/bench/lua.sh"
if $with_openssl; then
  source "$root/bench/openssl.sh"
  python3 "$root/bench/hosts.py" --lua "$lua" --runs "$runs" --openssl "$openssl"
else
  python3 "$root/bench/hosts.py" --lua "$lua" --runs "$runs"
fi
