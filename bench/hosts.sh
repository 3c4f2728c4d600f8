#!/usr/bin/env bash
# Benchmarks jobs sent as bundles to two stock distccd on 127.0.0.1 (bench/hosts.py): Lua 5.4,
# and with --openssl OpenSSL's `openssl` program (built once by bench/openssl.sh), against the
# same DTLTO link run here (bench/results/<date>-hosts.md; explained in bench/README.md).
# Usage: bench/hosts.sh [RUNS] [--openssl]   (RUNS default 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=3
with_openssl=false
for arg in "$@"; do
  case "$arg" in
    --openssl) with_openssl=true ;;
    *[!0-9]* | '') echo "usage: bench/hosts.sh [RUNS] [--openssl]" >&2; exit 2 ;;
    *) runs=$arg ;;
  esac
done
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
