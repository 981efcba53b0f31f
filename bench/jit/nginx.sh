#!/usr/bin/env bash
# nginx worker throughput with and without the LuaJIT collector at 999 Hz
# streaming to luaflame-server, side by side and interleaved: ROUNDS rounds
# of `ab -n REQUESTS -c 4` against each. The figure is requests per second
# of the workers' CPU time (all their threads, the collector's included,
# from /proc/PID/task/*/schedstat): on a shared machine ab's requests per second of wall
# time move by +-30% with the neighbours' load, the workers' CPU per request
# does not. ab's wall-clock rate is printed too, and the workers' context
# switches per 1000 requests (every thread: a timer thread's wake-ups show).
# With BEFORE=OTHER_BUILD_DIR, a third setting: the collector module built
# there, in the same rounds ("before"), for a side-by-side comparison.
# With FLOOR=1, two more settings with no luaflame at all (bench/jit/floor.c,
# loaded with LuaJIT's FFI): "thread", a thread polling each worker's CPU
# clock as luaflame's timer thread does, sending nothing, and "signal", the
# same thread sending SIGPROF to a handler that does nothing at HZ of the
# worker's CPU: the floor under any sampler that interrupts the worker; and
# "ktimer", no thread, a kernel timer sending the same at HZ of wall time.
# Usage: [HZ=999] [FLUSH=1] [BEFORE=DIR] [FLOOR=1] bench/jit/nginx.sh BUILD_DIR [ROUNDS] [REQUESTS]  (FLUSH: flush_interval, s)
set -u
BUILD=$(realpath "${1:?usage: nginx.sh BUILD_DIR [ROUNDS] [REQUESTS]}") ROUNDS=${2:-5} REQS=${3:-30000}
CONF=$(cd "$(dirname "$0")/../../tests/nginx" && pwd)
tmp=$(mktemp -d); chmod 755 "$tmp"
spid="" npid=""
trap '[ -n "$npid" ] && kill -QUIT $npid; [ -n "$spid" ] && kill $spid; wait; rm -rf "$tmp"' EXIT
port=$((10000 + RANDOM % 20000))
"$BUILD/server/luaflame-server" --listen "127.0.0.1:$port" --data "$tmp/data" >"$tmp/server.log" 2>&1 & spid=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
[ -n "${FLOOR:-}" ] && cc -O2 -shared -fPIC -o "$tmp/floor.so" "$(dirname "$0")/floor.c" -lpthread -lrt
worker_switches() {  # context switches of every thread of the workers
  local t=0 p f
  for p in $(pgrep -P "$npid"); do
    for f in /proc/"$p"/task/*/status; do t=$((t + $(awk '/ctxt_switches/ {s += $2} END {print s + 0}' "$f"))); done
  done
  echo "$t"
}
worker_ns() {  # CPU time of every thread of the workers, ns (schedstat: finer than utime + stime's ticks)
  local p
  for p in $(pgrep -P "$npid"); do cat /proc/"$p"/task/*/schedstat; done | awk '{t += $1} END {printf "%.0f\n", t}'
}
run() {  # off|on|thread|signal [MODULE_BUILD] -> requests per CPU second of the workers, ab's
         # requests per second, the workers' context switches per 1000 requests
  local mod=${2:-$BUILD} nport user="" profile=$1 floor="" try up
  [ "$(id -u)" = 0 ] && user="user root;"
  case $1 in  # the floor settings: luaflame off, floor.c's thread started in its place
    thread | signal | ktimer)
      local how=0
      [ "$1" = signal ] && how=1
      [ "$1" = ktimer ] && how=2
      profile=off
      floor="local ffi = require 'ffi'; ffi.cdef 'int floor_start(int, int);'; package.loaded.floor = ffi.load('$tmp/floor.so'); assert(package.loaded.floor.floor_start(${HZ:-999}, $how) == 0)"
      ;;
  esac
  mkdir -p "$tmp/ngx"
  for try in 1 2 3; do  # a port taken meanwhile, or a slow start: another port
    nport=$((10000 + RANDOM % 20000)) up=""
    sed -e "s#@PREFIX@#$tmp/ngx#g" -e "s#@HERE@#$CONF#g" -e "s#@MODDIR@#$mod/collector/vm/luajit#g" \
        -e "s#@PROFILE@#$profile#g" -e "s#@HZ@#${HZ:-999}#g" -e "s#@SERVER@#http://127.0.0.1:$port#g" -e "s#@PORT@#$nport#g" \
        -e "s#@USER@#$user#g" -e "s#flush_interval = 1#flush_interval = ${FLUSH:-1}#" \
        "$CONF/nginx.conf.in" >"$tmp/ngx/nginx.conf"
    [ -n "$floor" ] && sed -i "/init_worker_by_lua_block {/a\\    $floor" "$tmp/ngx/nginx.conf"
    nginx -p "$tmp/ngx" -c "$tmp/ngx/nginx.conf" -e "$tmp/ngx/error.log" >/dev/null 2>&1 & npid=$!
    for _ in $(seq 50); do curl -sf "http://127.0.0.1:$nport/" >/dev/null && up=1 && break; sleep 0.1; done
    [ -n "$up" ] && break
    echo "nginx.sh: nginx did not answer on port $nport (try $try): $(tail -1 "$tmp/ngx/error.log")" >&2
    kill -QUIT $npid 2>/dev/null; wait $npid 2>/dev/null; npid=""
  done
  [ -n "$up" ] || return 1
  local w0 w1 rps c0 c1
  w0=$(worker_ns) c0=$(worker_switches)
  rps=$(ab -q -n "$REQS" -c 4 "http://127.0.0.1:$nport/" 2>/dev/null | awk '/^Requests per second:/ {print $4}')
  w1=$(worker_ns) c1=$(worker_switches)
  echo "$REQS $w0 $w1 $rps $c0 $c1" | awk '{printf "%.1f %s %.0f\n", $1 / (($3 - $2) / 1e9), $4, ($6 - $5) * 1000 / $1}'
  kill -QUIT "$npid"; wait "$npid" 2>/dev/null; npid=""
  [ -n "$rps" ] || { echo "nginx.sh: ab failed against $1" >&2; return 1; }
}
record() {  # LABEL SETTING [MODULE_BUILD]: one run, appended to the rounds; the bench stops on a failed run
  local out
  out=$(run "${@:2}") || exit 1
  echo "$1 $out" >>"$tmp/all"
}
for _ in $(seq "$ROUNDS"); do
  record off off
  record on on
  [ -n "${BEFORE:-}" ] && record before on "$(realpath "$BEFORE")"
  if [ -n "${FLOOR:-}" ]; then
    for f in thread signal ktimer; do record $f $f; done
  fi
done
median() { grep "^$1 " "$tmp/all" | awk -v c="${2:-2}" '{print $c}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
off=$(median off) on=$(median on)
echo "nginx (2 workers, ab -n $REQS -c 4, $ROUNDS rounds, interleaved): off $off, on $on requests per worker CPU second (medians): $(echo "$on $off" | awk '{printf "%.1f%%", ($2-$1)/$2*100}') drop"
echo "context switches per 1000 requests (every thread of the workers, medians): off $(median off 4), on $(median on 4)"
if [ -n "${BEFORE:-}" ]; then
  before=$(median before)
  echo "before (module from $BEFORE): $before requests per worker CPU second: $(echo "$before $off" | awk '{printf "%.1f%%", ($2-$1)/$2*100}') drop; $(median before 4) context switches per 1000 requests"
fi
for f in ${FLOOR:+thread signal ktimer}; do
  m=$(median "$f")
  echo "$f (floor.c, no luaflame): $m requests per worker CPU second: $(echo "$m $off" | awk '{printf "%.1f%%", ($2-$1)/$2*100}') drop; $(median "$f" 4) context switches per 1000 requests"
done
# Per round, each setting against that round's off run: the median of these
# drops is steadier than the drop of the medians when the load moves.
paired() { awk -v s="$1" '$1 == "off" {o = $2} $1 == s {print (o - $2) / o * 100}' "$tmp/all" |
  sort -n | awk '{a[NR]=$1} END {printf "%.1f%% (from %.1f%% to %.1f%%)", a[int((NR+1)/2)], a[1], a[NR]}'; }
echo "median of the per-round drops: on $(paired on)${BEFORE:+, before $(paired before)}$(for f in ${FLOOR:+thread signal ktimer}; do printf ', %s %s' "$f" "$(paired "$f")"; done)"
echo "all rounds: $(tr '\n' ' ' <"$tmp/all")"
