#!/usr/bin/env bash
# Kernel bench: Debian's linux-source-6.1, `make LLVM=-22 tinyconfig` plus 64BIT PRINTK TTY
# SERIAL_8250 SERIAL_8250_CONSOLE BINFMT_ELF LTO_CLANG_THIN, built -j2 three ways:
#   inproc  lld's in-process ThinLTO (LD as Kbuild picks it, ld.lld-22)
#   dtlto   integrated DTLTO: LD="ld.lld-22 --thinlto-distributor=dtlto-bridge ..."
#   link    the classic flow as the whole of Kbuild's LD: LD="dtlto-bridge link ... -- ld.lld-22"
# Each kernel boots in qemu (its version line must print); their section sizes are compared;
# the vmlinux.o link is timed each way, RUNS times, interleaved, its ThinLTO cache removed
# first. The dtlto and link builds start from a copy of the in-process tree: the compiles are
# the same, and Kbuild relinks everything LD linked (its command changed), recompiling only
# objtool and the files that embed a linked image.
# Not part of the test suite: it takes many minutes. Sources and builds stay in
# target/bench/kernel (git-ignored). Usage: bench/kernel.sh [RUNS]   (default 2)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-2}
"$root/scripts/setup.sh"
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
for tool in flex bison bc; do command -v $tool >/dev/null || need+=($tool); done
[ -f /usr/include/gelf.h ] || need+=(libelf-dev)
[ -f /usr/src/linux-source-6.1.tar.xz ] || need+=(linux-source-6.1)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y "${need[@]}"
fi
cd "$root"
cargo build --release --quiet --bin dtlto-bridge
bridge=$root/target/release/dtlto-bridge
clang=$(command -v clang-22)

work=$root/target/bench/kernel
src=$work/linux-source-6.1
mkdir -p "$work"
[ -f "$src/Makefile" ] || tar -C "$work" -xf /usr/src/linux-source-6.1.tar.xz
results=$work/results.md
reports=$work/reports
rm -rf "$reports"
mkdir -p "$reports"

declare -A LD=(
  [dtlto]="ld.lld-22 --thinlto-distributor=$bridge --thinlto-remote-compiler=$clang"
  [link]="$bridge link --compiler=$clang -- ld.lld-22"
)

now() { date +%s.%N; }

# build WAY: configures (inproc) or copies the in-process tree, then builds bzImage.
build() {
  local way=$1 out=$work/build-$1
  local ld=()
  [ "$way" = inproc ] || ld=(LD="${LD[$way]}")
  if [ "$way" = inproc ]; then
    rm -rf "$out"
    make -s -C "$src" O="$out" LLVM=-22 tinyconfig >/dev/null
    "$src/scripts/config" --file "$out/.config" -e 64BIT -e PRINTK -e TTY -e SERIAL_8250 \
      -e SERIAL_8250_CONSOLE -e BINFMT_ELF -d LTO_NONE -e LTO_CLANG_THIN
    make -s -C "$src" O="$out" LLVM=-22 olddefconfig >/dev/null
    grep -q '^CONFIG_LTO_CLANG_THIN=y' "$out/.config" ||
      { echo "kernel: LTO_CLANG_THIN did not stay set in $out/.config" >&2; exit 1; }
  else
    rm -rf "$out"
    cp -a "$work/build-inproc" "$out"
  fi
  local start
  start=$(now)
  DTLTO_BRIDGE_REPORT="$reports/$way-{output}.json" \
    make -C "$src" O="$out" LLVM=-22 "${ld[@]}" -j2 V=1 bzImage >"$out.log" 2>&1 ||
    { tail -40 "$out.log" >&2; echo "kernel: the $way build failed; log: $out.log" >&2; exit 1; }
  echo "$way build: $(echo "$(now) - $start" | bc) s" >>"$work/builds.txt"
}

# boot WAY: the version line must print before the kernel panics (no root, no init).
boot() {
  local out=$work/build-$1
  timeout 180 qemu-system-x86_64 -kernel "$out/arch/x86/boot/bzImage" -m 256 -nographic \
    -no-reboot -append "console=ttyS0 panic=-1" >"$out.boot" 2>&1 || true
  grep -a -o -m1 'Linux version 6\.1.*' "$out.boot" ||
    { echo "kernel: the $1 kernel printed no version line; see $out.boot" >&2; exit 1; }
}

# The vmlinux.o link as Kbuild ran it (its .cmd file), objtool's step after it left out.
link_command() {
  sed -n 's/^\(saved\)\{0,1\}cmd_vmlinux.o := //p' "$work/build-$1/.vmlinux.o.cmd" |
    sed 's/; .*//'
}

: >"$work/builds.txt"
for way in inproc dtlto link; do
  build $way
  boot $way >"$work/version-$way.txt"
done

{
  echo "# Kernel bench: linux-source-6.1 tinyconfig + LTO_CLANG_THIN, clang/lld 22, -j2"
  echo
  echo "Built (the dtlto and link builds relink a copy of the in-process tree):"
  echo
  sed 's/^/- /' "$work/builds.txt"
  echo
  echo "Booted in qemu (the version line each kernel printed):"
  echo
  for way in inproc dtlto link; do echo "- $way: \`$(tr -d '\r' <"$work/version-$way.txt")\`"; done
  echo
  echo "Section sizes of vmlinux (bytes; llvm-size -A):"
  echo
  echo "| section | inproc | dtlto | link |"
  echo "| --- | ---: | ---: | ---: |"
  for sect in .text .rodata .data .bss .init.text .init.data; do
    row="| $sect"
    for way in inproc dtlto link; do
      row+=" | $(llvm-size-22 -A "$work/build-$way/vmlinux" | awk -v s="$sect" '$1 == s { print $2 }')"
    done
    echo "$row |"
  done
  echo
  same() { if cmp -s "$1" "$2"; then echo identical; else echo differ; fi; }
  for way in inproc dtlto link; do
    llvm-objdump-22 -d --no-show-raw-insn "$work/build-$way/vmlinux.o" | tail -n +3 >"$work/$way.dis"
    llvm-nm-22 -S "$work/build-$way/vmlinux.o" | awk '{ print $NF, $2, $3 }' | sort >"$work/$way.nm"
  done
  for way in dtlto link; do
    echo "- vmlinux.o against inproc's, $way: disassembly $(same "$work/inproc.dis" "$work/$way.dis");" \
      "symbols with their sizes and types (llvm-nm -S) $(same "$work/inproc.nm" "$work/$way.nm")"
  done
  jobs=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['totals']['jobs'])" \
    "$reports/dtlto-vmlinux.o.json")
  echo "- backend jobs of the vmlinux.o link: $jobs (reports of every link in $reports)"
  echo
  echo "The vmlinux.o link (seconds, $runs runs each, interleaved, ThinLTO cache removed first):"
  echo
  echo "| run | inproc | dtlto | link |"
  echo "| --- | ---: | ---: | ---: |"
} >"$results"
for run in $(seq "$runs"); do
  row="| $run"
  for way in inproc dtlto link; do
    out=$work/build-$way
    cmd=$(link_command $way)
    rm -rf "$out/.thinlto-cache"
    start=$(now)
    (cd "$out" && bash -c "$cmd") >/dev/null 2>&1 ||
      { echo "kernel: the timed $way link failed: $cmd" >&2; exit 1; }
    row+=" | $(printf '%.1f' "$(echo "$(now) - $start" | bc)")"
  done
  echo "$row |" >>"$results"
done
cat "$results"
