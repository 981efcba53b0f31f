#!/bin/bash
# What `luaflame attach` costs a host (docs/attach.md "Cost"): HAProxy
# (requests per second under ab), nmap and sysbench (wall seconds), each
# alone, with the bare interruption floor at 1 kHz (floor_preload.c: SIGPROF
# at 1,000 per second to the main thread, to a handler that does nothing),
# and attached at 100 Hz and 1 kHz. Rounds interleave the four (the machine
# is noisy: each round runs them back to back) and the medians are printed.
# Beside each wall figure, the host's CPU seconds (perf stat's task-clock,
# to the microsecond, where perf is installed; else user + system from
# /usr/bin/time, to the hundredth: a 1% step on a one-second scan): on this
# VM a loopback host's wall time moves 20-40% from run to run with wake-up
# latency, its CPU time far less. Not pinned to one CPU: so pinned
# (2026-12-07), nmap's scan waited on loopback twice as long (1.85 s of wall
# for 0.86 s of CPU, against 0.8-1.0 s) and its rounds spread 1.06-2.45 s.
#   bench/attach/cost.sh BUILD [ROUNDS]     (default 5; HOSTS="nmap": only those)
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

# timed MODE CMD...: CMD alone, under the floor or attached (luaflame attach
# execs it: the timed process is the host's), under perf stat or
# /usr/bin/time, which write "CPU_SECONDS" to $tmp/cpu.
timed() {
  local mode=$1 pre=() rc
  shift
  case $mode in
    floor1k) pre=(env FLOOR_HZ=1000 LD_PRELOAD="$tmp/floor.so") ;;
    attach100) pre=("$LF" attach --hz 100 -q -o "$tmp/p.folded" --) ;;
    attach1k) pre=("$LF" attach --hz 1000 -q -o "$tmp/p.folded" --) ;;
  esac
  if [ "$PERF" = 1 ]; then
    perf stat -x, -e task-clock -o "$tmp/time" "${pre[@]}" "$@"
    rc=$?
    awk -F, '$3 == "task-clock" {print $1 / 1000}' "$tmp/time" > "$tmp/cpu"
  else
    /usr/bin/time -f "%U %S" -o "$tmp/time" "${pre[@]}" "$@"
    rc=$?
    awk '{print $1 + $2}' "$tmp/time" > "$tmp/cpu"
  fi
  return $rc
}
PERF=0
perf stat -x, -e task-clock -o /dev/null true 2> /dev/null && PERF=1

# run_wall HOST MODE: wall seconds of the host's workload (its output
# discarded; a failure fails the bench).
run_wall() {
  local t0 t1
  t0=$(date +%s.%N)
  case $1 in
    nmap) timed "$2" nmap -Pn -n -p "$LF_PORT" --script "$T/hot.nse" 127.0.0.1 ;;
    sysbench)
      LUAFLAME_ATTACH_STATE=2 timed "$2" sysbench --threads=1 --events=400 --time=0 "$T/bench.lua" run ;;
  esac > /dev/null 2>&1 || { echo "cost.sh: $1 $2 failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}

# haproxy_rps MODE: requests per second of the Lua service, ab -n 150 -c 1.
haproxy_rps() {
  local port=$((10000 + RANDOM % 20000)) pid rps
  sed -e "s#@HERE@#$T#g" -e "s#@PORT@#$port#g" "$T/haproxy.cfg.in" > "$tmp/h.cfg"
  (timed "$1" haproxy -f "$tmp/h.cfg" -db > /dev/null 2>&1) &
  pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/" > /dev/null && break; sleep 0.05; done
  rps=$(ab -q -n 150 -c 1 "http://127.0.0.1:$port/" 2>/dev/null | awk '/Requests per second/ {print $4}')
  pkill -USR1 -x haproxy  # the host (luaflame attach and env exec it), not /usr/bin/time
  wait "$pid"
  echo "${rps:-0}"
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# cost BASE VALUE LOWER_IS_BETTER: percent the host lost against BASE.
cost() {
  if [ "$3" = 1 ]; then echo "($2 - $1) * 100 / $1" | bc -l; else echo "($1 - $2) * 100 / $1" | bc -l; fi
}

for host in ${HOSTS:-haproxy nmap sysbench}; do
  command -v "$host" > /dev/null || { echo "$host: not installed, skipped"; continue; }
  for _ in $(seq "$ROUNDS"); do
    for m in "${modes[@]}"; do
      case $host in
        haproxy) haproxy_rps "$m" >> "$tmp/$host.$m" ;;
        *) run_wall "$host" "$m" >> "$tmp/$host.$m" ;;
      esac
      cat "$tmp/cpu" >> "$tmp/$host.$m.cpu"
    done
  done
  base=$(median < "$tmp/$host.alone")
  base_cpu=$(median < "$tmp/$host.alone.cpu")
  unit="s"; lower=1
  [ "$host" = haproxy ] && unit="req/s" && lower=0
  printf '%-9s %-10s %10s %9s %9s %9s\n' host mode "median" "cost" "CPU s" "CPU cost"
  for m in "${modes[@]}"; do
    v=$(median < "$tmp/$host.$m")
    cpu=$(median < "$tmp/$host.$m.cpu")
    printf '%-9s %-10s %8.3f %s %+8.2f%% %9.4f %+8.2f%%   (%s| CPU %s)\n' "$host" "$m" "$v" "$unit" \
      "$(cost "$base" "$v" "$lower")" "$cpu" "$(cost "$base_cpu" "$cpu" 1)" \
      "$(tr '\n' ' ' < "$tmp/$host.$m")" "$(tr '\n' ' ' < "$tmp/$host.$m.cpu")"
  done
done
