#!/usr/bin/env bash
# The test suite: installs what the tests need when missing, then runs them.
#   scripts/test.sh [ARGS]   every test (unit, golden, and end-to-end links with real clang-22,
#                            ld.lld-22, ninja and make): scripts/setup.sh --tests, then
#                            `cargo test ARGS`
#   scripts/test.sh fast     the unit tests and the end-to-end tests in tests/e2e/fast, which need
#                            only sh, make and ninja: scripts/setup.sh --fast (no LLVM, no Python)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fast=false
if [ "${1:-}" = fast ]; then
  [ $# -eq 1 ] || { echo "usage: scripts/test.sh fast (takes no more arguments)" >&2; exit 2; }
  fast=true
  "$root/scripts/setup.sh" --fast
else
  "$root/scripts/setup.sh" --tests
fi
cd "$root"
# Settings a developer may have in the environment; every test must isolate what it runs from
# them, and one that forgets fails here.
export DTLTO_BRIDGE_WRAPPER=false DTLTO_BRIDGE_JOBS=1 DTLTO_BRIDGE_BACKEND=bogus \
  DTLTO_BRIDGE_REPORT=/nonexistent/report.json DTLTO_BRIDGE_HOST_SLOTS=1 DTLTO_BRIDGE_QUIET=1
echo "test: building and running the tests (cargo test; the first build takes a few minutes)" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
if $fast; then
  # Two runs: a filter on one would filter the unit tests too.
  cargo test --locked --no-fail-fast --lib --bins 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  cargo test --locked --no-fail-fast --test e2e -- fast:: 2>&1 | tee -a "$log"
  e2e=${PIPESTATUS[0]}
  [ "$status" -ne 0 ] || status=$e2e
else
  cargo test --locked --no-fail-fast "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
fi
set -e
# One closing line for the whole run, summed over every test binary.
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
