#!/bin/bash
# An icecream cluster of three test hosts on this machine, for tests/e2e/full/icecc.rs: network
# namespaces PREFIX-link (icecc-scheduler, and the linking machine's iceccd, which builds
# nothing itself: --no-remote -m 0) and PREFIX-h1, PREFIX-h2 (an iceccd each, one job at a time,
# DTLTO_CLANG_HOST=h1/h2), joined by veth pairs to a bridge inside PREFIX-link on 10.77.0.0/24.
# Nothing is made in this machine's own namespace. Each daemon has its own /run (a private
# mount namespace), its files under DIR, and runs as user icecc.
#   tests/hosts/icecc.sh up DIR PREFIX     start; prints the client's socket when every daemon is in
#   tests/hosts/icecc.sh down DIR PREFIX   stop every process started (by PID), delete the namespaces
set -euo pipefail
cmd=$1 D=$2 P=$3
NODES="link h1 h2"
SUB=10.77.0
addr() { case $1 in link) echo $SUB.1 ;; h1) echo $SUB.2 ;; h2) echo $SUB.3 ;; esac; }

down() {
  for f in "$D"/pids/*.pid; do
    [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
  for n in $NODES; do
    ip netns list | grep -qw "$P-$n" || continue
    # What the daemons started (jobs) is inside these namespaces only.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [ -z "$(ip netns pids "$P-$n")" ] && break
      sleep 0.2
    done
    for pid in $(ip netns pids "$P-$n"); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$P-$n"
  done
}

# Starts "$@" in namespace $1 with its own /run; the pid file holds the process itself (each
# step execs the next).
start() {
  local n=$1 name=$2
  shift 2
  ip netns exec "$P-$n" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DTLTO_CLANG_HOST="$n" \
    unshare -m --propagation private sh -c 'mount --bind "$0" /run && exec "$@"' "$D/$n/run" "$@" \
    >"$D/logs/$name.out" 2>&1 &
  echo $! >"$D/pids/$name.pid"
}

up() {
  mkdir -p "$D"/{pids,logs}
  chmod 755 "$D"
  for n in $NODES; do ip netns add "$P-$n"; ip -n "$P-$n" link set lo up; done
  ip -n "$P-link" link add br0 type bridge
  ip -n "$P-link" addr add "$SUB.1/24" dev br0
  ip -n "$P-link" link set br0 up
  for h in h1 h2; do
    ip -n "$P-link" link add "v-$h" type veth peer name eth0 netns "$P-$h"
    ip -n "$P-link" link set "v-$h" master br0 up
    ip -n "$P-$h" addr add "$(addr $h)/24" dev eth0
    ip -n "$P-$h" link set eth0 up
  done
  for n in $NODES; do
    mkdir -p "$D/$n/run/icecc" "$D/$n/envs"
    touch "$D/logs/$n.log"
  done
  touch "$D/logs/scheduler.log"
  chown -R icecc:icecc "$D/link" "$D/h1" "$D/h2" "$D/logs"
  start link scheduler icecc-scheduler -n dtlto -l "$D/logs/scheduler.log" -vv
  sleep 0.5
  start link iceccd-link iceccd --no-remote -m 0 -n dtlto -s "$SUB.1" -N link -b "$D/link/envs" \
    -l "$D/logs/link.log" -vvv
  for h in h1 h2; do
    start "$h" "iceccd-$h" iceccd -n dtlto -s "$SUB.1" -N "$h" -m 1 -b "$D/$h/envs" \
      -l "$D/logs/$h.log" -vvv
  done
  # The scheduler's text port lists the daemons logged in; a daemon just in says load=1000
  # and takes no job until its first load report.
  local out=""
  for _ in $(seq 60); do
    out=$(ip netns exec "$P-link" timeout 3 bash -c \
      "exec 3<>/dev/tcp/$SUB.1/8766; printf 'listcs\nquit\n' >&3; cat <&3" 2>/dev/null || true)
    [ "$(grep -E '^ *(h1|h2) ' <<<"$out" | grep -vc 'load=1000')" -ge 2 ] && break
    sleep 0.5
  done
  [ "$(grep -E '^ *(h1|h2) ' <<<"$out" | grep -vc 'load=1000')" -ge 2 ] ||
    { echo "icecc.sh: the hosts did not log in: $out" >&2; exit 1; }
  echo "$D/link/run/icecc/iceccd.socket"
}

case $cmd in
  up) up ;;
  down) down ;;
  *) echo "usage: tests/hosts/icecc.sh up|down DIR PREFIX" >&2; exit 2 ;;
esac
