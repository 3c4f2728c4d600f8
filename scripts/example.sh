#!/usr/bin/env bash
# The main job: a real DTLTO link of examples/hello through dtlto-bridge, then runs the program.
# Usage: scripts/example.sh [ninja|make]   (default: ninja if found, else make)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
echo "example: building dtlto-bridge (cargo build --release: a few minutes the first time)" >&2
cargo build --release --manifest-path "$root/Cargo.toml"
echo "example: compiling examples/hello to ThinLTO bitcode, then linking it through dtlto-bridge" >&2
bridge="$root/target/release/dtlto-bridge"

# A build directory whose name has a space, as real ones sometimes do.
out="$root/target/example/hello world"
rm -rf "$out" && mkdir -p "$out" && cd "$out"
src="$root/examples/hello"
for f in main add mul sq greeting; do
  clang-22 -O2 -flto=thin -c "$src/$f.c" -o "$f.o"
done
mv greeting.o "greet #1 (v2).o"          # an awkward name, quoted right all the way
llvm-ar-22 rc libmul.a mul.o              # regular archive: lld extracts 'libmul.a(mul.o at N)...'
llvm-ar-22 rc --thin libsq.a sq.o         # thin archive

backend=()
[ $# -gt 0 ] && backend=("-Xthinlto-distributor=--backend=$1")
set -x
clang-22 -O2 -flto=thin -fuse-ld=lld-22 -fthinlto-distributor="$bridge" "${backend[@]}" \
  main.o add.o "greet #1 (v2).o" libmul.a libsq.a -o hello
./hello
