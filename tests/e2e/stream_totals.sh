#!/usr/bin/env bash
# End to end: a run streamed by `luaflame run` appears on the real server with
# the same totals, per metric, as the folded files written locally.
# usage: stream_totals.sh LUAFLAME LUAFLAME_SERVER WORKLOAD.lua
set -euo pipefail
luaflame=$1 server=$2 workload=$3
tmp=$(mktemp -d)
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# A loopback port: start at a random one and move on while it is taken.
port=$(lua5.4 -e 'print(math.random(20000, 60000))')
for _ in $(seq 20); do
  "$server" --listen "127.0.0.1:$port" --data "$tmp/data" >"$tmp/server.log" 2>&1 & pid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""
  port=$((port + 1))
done
[ -n "$pid" ] || { echo "FAIL: server did not start"; cat "$tmp/server.log"; exit 1; }
url="http://127.0.0.1:$port"

cd "$tmp"
"$luaflame" run --mode both --server "$url" --output out.folded --name e2e \
  --tag branch=main --flush_interval 0.5 "$workload" e2e-arg >stdout.txt 2>stderr.txt
grep -q "done e2e-arg" stdout.txt || { echo "FAIL: workload output: $(cat stdout.txt)"; exit 1; }
[ ! -e out.undelivered.folded ] || { echo "FAIL: chunks were not delivered"; cat stderr.txt; exit 1; }

id=$(curl -sf "$url/api/runs?name=e2e" | lua5.4 -e 'print(io.read("a"):match("\"id\":(%d+)"))')
[ -n "$id" ] && [ "$id" != nil ] || { echo "FAIL: run not listed"; exit 1; }

sum() { awk '{ s += $NF } END { printf "%.0f\n", s }'; }
fails=0 passes=0
for metric in samples time calls; do
  file=out.folded; [ "$metric" = samples ] || file=out.$metric.folded
  local_total=$(sum <"$file")
  server_total=$(curl -sf "$url/api/runs/$id/profile.folded?metric=$metric" | sum)
  if [ "$local_total" = "$server_total" ] && [ "$local_total" != 0 ]; then
    passes=$((passes + 1))
  else
    echo "FAIL: $metric: local $local_total, server $server_total"; fails=$((fails + 1))
  fi
done
status=$(curl -sf "$url/api/runs/$id" | lua5.4 -e 'print(io.read("a"):match("\"status\":\"(%a+)\""))')
if [ "$status" = finished ]; then passes=$((passes + 1)); else echo "FAIL: status $status"; fails=$((fails + 1)); fi
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
