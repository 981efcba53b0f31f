#!/usr/bin/env bash
# nginx worker throughput with and without the LuaJIT collector at 999 Hz
# streaming to luaflame-server, side by side and interleaved: ROUNDS rounds
# of `ab -n REQUESTS -c 4` against each. The figure is requests per second
# of the workers' CPU time (all their threads, the collector's included,
# from /proc/PID/stat): on a shared machine ab's requests per second of wall
# time move by +-30% with the neighbours' load, the workers' CPU per request
# does not. ab's wall-clock rate is printed too, and the workers' context
# switches per 1000 requests (every thread: a timer thread's wake-ups show).
# With BEFORE=OTHER_BUILD_DIR, a third setting: the collector module built
# there, in the same rounds ("before"), for a side-by-side comparison.
# Usage: [HZ=999] [FLUSH=1] [BEFORE=DIR] bench/jit/nginx.sh BUILD_DIR [ROUNDS] [REQUESTS]  (FLUSH: flush_interval, s)
set -u
BUILD=$(realpath "${1:?usage: nginx.sh BUILD_DIR [ROUNDS] [REQUESTS]}") ROUNDS=${2:-5} REQS=${3:-30000}
CONF=$(cd "$(dirname "$0")/../../tests/nginx" && pwd)
tmp=$(mktemp -d); chmod 755 "$tmp"
spid="" npid=""
trap '[ -n "$npid" ] && kill -QUIT $npid; [ -n "$spid" ] && kill $spid; wait; rm -rf "$tmp"' EXIT
port=$((20000 + RANDOM % 40000))
"$BUILD/server/luaflame-server" --listen "127.0.0.1:$port" --data "$tmp/data" >"$tmp/server.log" 2>&1 & spid=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
worker_switches() {  # context switches of every thread of the workers
  local t=0 p f
  for p in $(pgrep -P "$npid"); do
    for f in /proc/"$p"/task/*/status; do t=$((t + $(awk '/ctxt_switches/ {s += $2} END {print s + 0}' "$f"))); done
  done
  echo "$t"
}
worker_ticks() {  # utime + stime of the workers, in clock ticks
  local t=0 p
  for p in $(pgrep -P "$npid"); do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  echo "$t"
}
run() {  # PROFILE [MODULE_BUILD] -> requests per CPU second of the workers, ab's requests per second,
         # the workers' context switches per 1000 requests
  local mod=${2:-$BUILD} nport=$((20000 + RANDOM % 40000)) user=""
  [ "$(id -u)" = 0 ] && user="user root;"
  mkdir -p "$tmp/ngx"
  sed -e "s#@PREFIX@#$tmp/ngx#g" -e "s#@HERE@#$CONF#g" -e "s#@MODDIR@#$mod/collector/jit#g" \
      -e "s#@PROFILE@#${1%%:*}#g" -e "s#@HZ@#${HZ:-999}#g" -e "s#@SERVER@#http://127.0.0.1:$port#g" -e "s#@PORT@#$nport#g" \
      -e "s#@USER@#$user#g" -e "s#flush_interval = 1#flush_interval = ${FLUSH:-1}#" \
      "$CONF/nginx.conf.in" >"$tmp/ngx/nginx.conf"
  nginx -p "$tmp/ngx" -c "$tmp/ngx/nginx.conf" -e "$tmp/ngx/error.log" >/dev/null 2>&1 & npid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$nport/" >/dev/null && break; sleep 0.1; done
  local w0 w1 rps c0 c1
  w0=$(worker_ticks) c0=$(worker_switches)
  rps=$(ab -q -n "$REQS" -c 4 "http://127.0.0.1:$nport/" 2>/dev/null | awk '/^Requests per second:/ {print $4}')
  w1=$(worker_ticks) c1=$(worker_switches)
  echo "$REQS $w0 $w1 $(getconf CLK_TCK) $rps $c0 $c1" |
    awk '{printf "%.1f %s %.0f\n", $1 / (($3 - $2) / $4), $5, ($7 - $6) * 1000 / $1}'
  kill -QUIT $npid; wait $npid 2>/dev/null; npid=""
}
for r in $(seq "$ROUNDS"); do
  echo "off $(run off)" >>"$tmp/all"
  echo "on $(run on)" >>"$tmp/all"
  [ -n "${BEFORE:-}" ] && echo "before $(run on "$(realpath "$BEFORE")")" >>"$tmp/all"
done
median() { grep "^$1 " "$tmp/all" | awk -v c="${2:-2}" '{print $c}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
off=$(median off) on=$(median on)
echo "nginx (2 workers, ab -n $REQS -c 4, $ROUNDS rounds, interleaved): off $off, on $on requests per worker CPU second (medians): $(echo "$on $off" | awk '{printf "%.1f%%", ($2-$1)/$2*100}') drop"
echo "context switches per 1000 requests (every thread of the workers, medians): off $(median off 4), on $(median on 4)"
if [ -n "${BEFORE:-}" ]; then
  before=$(median before)
  echo "before (module from $BEFORE): $before requests per worker CPU second: $(echo "$before $off" | awk '{printf "%.1f%%", ($2-$1)/$2*100}') drop; $(median before 4) context switches per 1000 requests"
fi
echo "all rounds: $(tr '\n' ' ' <"$tmp/all")"
