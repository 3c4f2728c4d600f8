#!/usr/bin/env bash
# Benchmarks a generated many-module link (bench/many.py): cached relinks through BuildGrid
# against lld's own ThinLTO cache, the first remote link, and local execution against the
# minimal executor (bench/results/<date>-many.md). See bench/README.md.
# Usage: bench/many.sh [--modules N] [--runs R] [--also-in DIR] [--no-local | --no-cached]
#        (defaults: 1501 modules, 3 runs; DIR: another file system for the cached relinks)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" --tests
cd "$root"
cargo build --release --quiet --bin dtlto-bridge --example ideal
exec python3 "$root/bench/many.py" "$@"
