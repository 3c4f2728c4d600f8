#!/usr/bin/env bash
# The farm bench: a link's time through dtlto-bridge against a simulated build farm (BuildGrid
# with replay workers that sleep each job's recorded time and return its recorded object, behind
# a user-space link of given round-trip time and bandwidth), against the ideal (the link's local
# phases plus the best schedule of the recorded job times on the workers). Lua 5.4, and with
# --openssl also OpenSSL's `openssl` program (built once by bench/openssl.sh: about 8 minutes on
# 2 cores). The recording is kept under target/bench/farm (never committed); --rerecord makes it
# again. Writes bench/results/<date>-farm.md (or NAME.md with --name NAME). See bench/README.md,
# "The farm at the farm's speed".
# Usage: bench/farm.sh [--bridge PATH] [--scale F] [--workers W,W] [--net RTT_MS:MBIT,...]
#                      [--runs N] [--relinks N] [--bots-per-process N] [--openssl] [--no-lua] [--smoke]
#                      [--rerecord] [--name NAME] [--batch-limit BYTES] [--late-ms MS]
# Without --bridge, dtlto-bridge is built here (cargo build --release) and that one is measured.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bridge=
with_openssl=false
with_lua=true
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bridge) bridge=$2; shift 2 ;;
    --bridge=*) bridge=${1#--bridge=}; shift ;;
    --openssl) with_openssl=true; shift ;;
    --no-lua) with_lua=false; shift ;;
    --smoke) with_lua=false; pass+=("$1"); shift ;;
    --rerecord) pass+=("$1"); shift ;;
    --scale|--workers|--net|--runs|--relinks|--bots-per-process|--name|--out-json|--batch-limit|--late-ms)
      pass+=("$1" "$2"); shift 2 ;;
    *) sed -n '/^# Usage/,/^# Without/p' "$0" >&2; exit 2 ;;
  esac
done
"$root/scripts/setup.sh" --tests
cd "$root"
if [ -z "$bridge" ]; then
  cargo build --release --quiet --bin dtlto-bridge
  bridge=$root/target/release/dtlto-bridge
fi
args=(--bridge "$bridge")
if $with_lua; then
  source "$root/bench/lua.sh"
  args+=(--lua "$lua")
fi
if $with_openssl; then
  source "$root/bench/openssl.sh"
  args+=(--openssl "$openssl")
fi
exec "$root/target/pytools/bin/python" "$root/bench/farm/farm.py" "${args[@]}" "${pass[@]}"
