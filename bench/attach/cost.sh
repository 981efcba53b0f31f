#!/bin/bash
# What `luaflame attach` costs a host (docs/attach.md "Cost"): HAProxy
# (requests per second under ab), nmap and sysbench (wall seconds), each
# alone, with the bare interruption floor at 1 kHz (floor_preload.c: SIGPROF
# at 1,000 per second to the main thread, to a handler that does nothing),
# and attached at 100 Hz and 1 kHz. Rounds interleave the four (the machine
# is noisy: each round runs them back to back) and the medians are printed.
#   bench/attach/cost.sh BUILD [ROUNDS]     (default 5)
set -u
BUILD=$(realpath "${1:?usage: cost.sh BUILD [ROUNDS]}")
ROUNDS=${2:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(cd "$HERE/../../tests/attach" && pwd)
LF=$BUILD/cli/luaflame
# nmap's target: a luaflame-server on loopback (an open port for hot.nse's portrule).
source "$HERE/../../tests/support/server.sh"
lf_e2e_server "$BUILD/server/luaflame-server"  # sets tmp, LF_PORT; removes both at exit
cc -O2 -shared -fPIC -o "$tmp/floor.so" "$HERE/floor_preload.c" || exit 1
modes=(alone floor1k attach100 attach1k)

# with MODE CMD...: becomes CMD alone, under the floor or attached (exec:
# the caller's process is the host's, for its signals).
with() {
  local mode=$1; shift
  case $mode in
    alone) exec "$@" ;;
    floor1k) FLOOR_HZ=1000 LD_PRELOAD="$tmp/floor.so" exec "$@" ;;
    attach100) exec "$LF" attach --hz 100 -q -o "$tmp/p.folded" -- "$@" ;;
    attach1k) exec "$LF" attach --hz 1000 -q -o "$tmp/p.folded" -- "$@" ;;
  esac
}

# seconds CMD...: wall seconds of CMD (its output discarded; a failure fails the bench).
seconds() {
  local t0 t1
  t0=$(date +%s.%N)
  ("$@") > /dev/null 2>&1 || { echo "cost.sh: failed: $*" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}

nmap_run() {
  with "$1" nmap -Pn -n -p "$LF_PORT" --script "$T/hot.nse" 127.0.0.1
}
sysbench_run() {
  LUAFLAME_ATTACH_STATE=2 with "$1" sysbench --threads=1 --events=400 --time=0 "$T/bench.lua" run
}

# haproxy_rps MODE: requests per second of the Lua service, ab -n 150 -c 1.
haproxy_rps() {
  local port=$((20000 + RANDOM % 20000)) pid rps
  sed -e "s#@HERE@#$T#g" -e "s#@PORT@#$port#g" "$T/haproxy.cfg.in" > "$tmp/h.cfg"
  (with "$1" haproxy -f "$tmp/h.cfg" -db > /dev/null 2>&1) &
  pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/" > /dev/null && break; sleep 0.05; done
  rps=$(ab -q -n 150 -c 1 "http://127.0.0.1:$port/" 2>/dev/null | awk '/Requests per second/ {print $4}')
  kill -USR1 "$pid"; wait "$pid"
  echo "${rps:-0}"
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

for host in haproxy nmap sysbench; do
  command -v "$host" > /dev/null || { echo "$host: not installed, skipped"; continue; }
  for _ in $(seq "$ROUNDS"); do
    for m in "${modes[@]}"; do
      case $host in
        haproxy) haproxy_rps "$m" >> "$tmp/$host.$m" ;;
        nmap) seconds nmap_run "$m" >> "$tmp/$host.$m" ;;
        sysbench) seconds sysbench_run "$m" >> "$tmp/$host.$m" ;;
      esac
    done
  done
  base=$(median < "$tmp/$host.alone")
  unit="s"; [ "$host" = haproxy ] && unit="req/s"
  printf '%-9s %-10s %10s %9s\n' host mode "median" "cost"
  for m in "${modes[@]}"; do
    v=$(median < "$tmp/$host.$m")
    # cost in percent: a slower host has fewer req/s or more seconds.
    if [ "$host" = haproxy ]; then c=$(echo "($base - $v) * 100 / $base" | bc -l)
    else c=$(echo "($v - $base) * 100 / $base" | bc -l); fi
    printf '%-9s %-10s %8.3f %s %+8.2f%%   (%s)\n' "$host" "$m" "$v" "$unit" "$c" \
      "$(tr '\n' ' ' < "$tmp/$host.$m")"
  done
done
