#!/usr/bin/env bash
# The whole test suite: installs what the tests need when missing, then runs every test
# (unit, golden, and end-to-end links with real clang-22, ld.lld-22, ninja and make).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
cargo test --locked "$@"
