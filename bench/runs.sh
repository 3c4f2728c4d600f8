# Sourced by bench/remote.sh and bench/hosts.sh: reads their arguments `[RUNS] [--openssl]` into
# $runs (default 3) and $with_openssl, or prints the script's usage and exits 2.
runs=3
with_openssl=false
for arg in "$@"; do
  case "$arg" in
    --openssl) with_openssl=true ;;
    *[!0-9]* | '') echo "usage: bench/$(basename "$0") [RUNS] [--openssl]" >&2; exit 2 ;;
    *) runs=$arg ;;
  esac
done
