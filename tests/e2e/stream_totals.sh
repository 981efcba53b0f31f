#!/usr/bin/env bash
# End to end: a run streamed by `luaflame run` appears on the real server with
# the same totals, per metric, as the folded files written locally, marked
# finished as soon as luaflame has exited, with at least MIN_STACKS distinct
# call paths (a big tree goes as several self-contained chunks).
# usage: stream_totals.sh LUAFLAME LUAFLAME_SERVER WORKLOAD.lua [EXPECT_STDOUT [MIN_STACKS [MODE [ARG]]]]
set -euo pipefail
luaflame=$1 server=$2 workload=$3 expect=${4:-"done e2e-arg"} min_stacks=${5:-1} mode=${6:-both} arg=${7:-e2e-arg}
tmp=$(mktemp -d)
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# The server on a loopback port of its choosing (tests/support/server.sh).
source "$(dirname "$0")/../support/server.sh"
lf_server_start "$tmp/srv" "$server" || { echo "FAIL: server did not start"; exit 1; }
pid=$LF_SERVER_PID url=$LF_URL

cd "$tmp"
start=$(date +%s.%N)
# The local files are cut at 32 MiB (totals kept in "[luaflame] truncated"):
# writing 256 MB of folded text beside a server on the same disk stalls
# the server's own writes for seconds, which this test is not about.
"$luaflame" run --mode "$mode" --server "$url" --output out.folded --max_output 33554432 --name e2e \
  --tag branch=main --flush_interval 0.5 "$workload" "$arg" >stdout.txt 2>stderr.txt || true
echo "luaflame run took $(lua5.4 -e "print(string.format('%.2f', $(date +%s.%N) - $start))") s: $(grep -E 'streamed|wrote out.folded' stderr.txt | tr '\n' ' ')"
grep -q "$expect" stdout.txt || { echo "FAIL: workload output: $(cat stdout.txt)"; exit 1; }
! grep -q "streaming failed" stderr.txt || { echo "FAIL: $(cat stderr.txt)"; exit 1; }
[ ! -e out.undelivered.folded ] || { echo "FAIL: chunks were not delivered"; cat stderr.txt; exit 1; }

id=$(curl -sf "$url/api/runs?name=e2e" | lua5.4 -e 'print(io.read("a"):match("\"id\":(%d+)"))')
[ -n "$id" ] && [ "$id" != nil ] || { echo "FAIL: run not listed"; exit 1; }

sum() { awk '{ s += $NF } END { printf "%.0f\n", s }'; }
fails=0 passes=0
metrics="samples time calls"; [ "$mode" = trace ] && metrics="time calls"; [ "$mode" = sample ] && metrics=samples
first=${metrics%% *}
for metric in $metrics; do
  file=out.folded; [ "$metric" = "$first" ] || file=out.$metric.folded
  local_total=$(sum <"$file")
  server_total=$(curl -sf "$url/api/runs/$id/profile.folded?metric=$metric" | sum)
  if [ "$local_total" = "$server_total" ] && [ "$local_total" != 0 ]; then
    passes=$((passes + 1))
  else
    echo "FAIL: $metric: local $local_total, server $server_total"; fails=$((fails + 1))
  fi
done
run=$(curl -sf "$url/api/runs/$id")
status=$(echo "$run" | lua5.4 -e 'print(io.read("a"):match("\"status\":\"(%a+)\""))')
stacks=$(echo "$run" | lua5.4 -e 'print(io.read("a"):match("\"stacks\":(%d+)"))')
chunks=$(grep -o 'streamed [0-9]* chunks' stderr.txt | cut -d' ' -f2)
if [ "$stacks" -ge "$min_stacks" ]; then passes=$((passes + 1))
else echo "FAIL: $stacks stacks on the server, expected at least $min_stacks"; fails=$((fails + 1)); fi
# More than 16,384 paths cannot go in one chunk: several, each self-contained.
if [ "$min_stacks" -le 16384 ] || [ "${chunks:-0}" -ge $((min_stacks / 16384)) ]; then passes=$((passes + 1))
else echo "FAIL: $min_stacks paths in ${chunks:-0} chunks"; fails=$((fails + 1)); fi
if [ "$status" = finished ]; then passes=$((passes + 1)); else echo "FAIL: status $status"; fails=$((fails + 1)); fi
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
