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

# The code base: fetched through cargo from crates.io into its registry cache, never committed.
fetch="$root/target/bench/fetch-lua"
mkdir -p "$fetch/src"
printf '[package]\nname = "fetch-lua"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nlua-src = "=551.1.0"\n' \
  > "$fetch/Cargo.toml"
: > "$fetch/src/lib.rs"
cargo fetch --quiet --manifest-path "$fetch/Cargo.toml"
lua=$(cargo metadata --quiet --format-version 1 --manifest-path "$fetch/Cargo.toml" |
  python3 -c 'import json,sys,os; m=json.load(sys.stdin); p=[p for p in m["packages"] if p["name"]=="lua-src"][0]; print(os.path.join(os.path.dirname(p["manifest_path"]), "lua-5.4.9"))')

python3 "$root/bench/bench.py" --lua "$lua" --runs "${1:-5}"
