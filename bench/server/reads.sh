#!/bin/sh
# Server CPU of the reads of one run page over HTTP, cold (a fresh server per round, so no
# tree, table or SVG cache helps): details, graph, function table, timeline, a range graph,
# and the live-run listing. For a store made by store_bench (bench/server/store_bench.cpp).
#   bench/server/reads.sh BUILD_DIR DATA_DIR RUN_ID FROM_S UNTIL_S [ROUNDS]
#   bench/server/reads.sh BUILD_DIR postgresql://... RUN_ID FROM_S UNTIL_S [ROUNDS] [POSTMASTER_PID]
# With a PostgreSQL store and its postmaster's pid, the CPU of the postmaster and its children
# (backends...) over each request is printed apart ("database CPU").
set -eu
build=$1 data=$2 run=$3 from=$4 until=$5 rounds=${6:-3} pgpid=${7:-}
# CPU time of every thread of the server in ns (schedstat: finer than the 10 ms of /proc/PID/stat).
cpu_ns() { cat /proc/$1/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'; }
db_ns() {
  [ -n "$pgpid" ] || { echo 0; return; }
  for p in $pgpid $(cat /proc/$pgpid/task/$pgpid/children); do cat /proc/$p/schedstat 2>/dev/null || true; done |
    awk '{s += $1} END {printf "%.0f", s}'
}
case "$data" in
  postgresql://*|postgres://*) where="--store $data --data $(mktemp -d /tmp/lf-reads-XXXXXX)" ;;
  *) where="--data $data" ;;
esac
r=0
while [ $r -lt "$rounds" ]; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  # Retention off (the benchmark's simulated days may lie past the default 30 days).
  "$build/server/luaflame-server" --listen 127.0.0.1:$port $where --log-level warn --stale-minutes 0 \
    --resolutions 1s:0,10s:0,1m:0,10m:0,1h:0,1d:0 \
    --retention-interval 86400 &
  pid=$!
  S=http://127.0.0.1:$port
  i=0; until curl -sf "$S/healthz" >/dev/null; do i=$((i+1)); [ $i -lt 100 ] || exit 1; sleep 0.1; done
  for u in "/api/runs/$run" "/api/runs/$run/flamegraph.svg" "/api/runs/$run/functions" "/api/runs/$run/timeline" \
           "/api/runs/$run/flamegraph.svg?from=$from&until=$until" "/api/runs?status=live"; do
    d0=$(db_ns); c0=$(cpu_ns $pid)
    w=$(curl -s -o /dev/null -w '%{time_total}' "$S$u")
    c1=$(cpu_ns $pid); d1=$(db_ns)
    echo "round $r $u: server CPU $(awk "BEGIN {printf \"%.1f\", ($c1 - $c0) / 1e6}") ms," \
      "database CPU $(awk "BEGIN {printf \"%.1f\", ($d1 - $d0) / 1e6}") ms, wall ${w} s"
  done
  kill $pid; wait $pid 2>/dev/null || true
  r=$((r+1))
done
