#!/usr/bin/env bash
# Installs what dtlto-bridge's example and tests need, when missing: clang-22, lld-22, ninja, make.
# Debian bookworm (its security suite carries clang-22 and lld-22). Needs root or sudo.
set -euo pipefail

need=()
command -v clang-22 >/dev/null || need+=(clang-22)
command -v ld.lld-22 >/dev/null || need+=(lld-22)
command -v llvm-ar-22 >/dev/null || need+=(llvm-22)
command -v ninja >/dev/null || need+=(ninja-build)
command -v make >/dev/null || need+=(make)
command -v python3 >/dev/null || need+=(python3)

if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y "${need[@]}"
fi

for tool in clang-22 ld.lld-22 llvm-ar-22 ninja make cargo; do
  command -v "$tool" >/dev/null || { echo "setup: $tool is still missing" >&2; exit 1; }
done
