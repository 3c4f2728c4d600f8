#!/usr/bin/env bash
# The whole test suite: installs what the tests need when missing, then runs every test
# (unit, golden, and end-to-end links with real clang-22, ld.lld-22, ninja and make).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" --tests
cd "$root"
# Settings a developer may have in the environment; every test must isolate what it runs from
# them, and one that forgets fails here.
export DTLTO_BRIDGE_WRAPPER=false DTLTO_BRIDGE_JOBS=1 DTLTO_BRIDGE_BACKEND=bogus \
  DTLTO_BRIDGE_REPORT=/nonexistent/report.json DTLTO_BRIDGE_HOST_SLOTS=1 DTLTO_BRIDGE_QUIET=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --locked --no-fail-fast "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One closing line for the whole suite, summed over every test binary.
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
