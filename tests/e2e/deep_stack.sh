#!/usr/bin/env bash
# Regression (issue 27): a stack deeper than the server's --max-depth made the
# server refuse the first chunk whole: "streamed 0 chunks", and the run stayed
# live with nothing in it. The collector now folds what lies deeper than the
# server takes (the server says its limit when the run is created) into one
# "[luaflame] deeper frames cut" frame and sends the rest: every sample and
# every call reaches the server, the same totals as the local file, which
# keeps the whole stack. Against the real server at --max-depth 64 and a
# recursion 300 deep, in both mode (samples, time, calls).
# usage: deep_stack.sh LUAFLAME LUAFLAME_SERVER LUA
set -uo pipefail
luaflame=$1 server=$2 lua=$3
source "$(dirname "$0")/../support/server.sh"
lf_e2e_server "$server" --max-depth 64
cd "$tmp" || exit 1
# 300 deep, 2000 times: enough samples at 999 Hz.
printf 'local function rec(n) if n == 0 then local x = 0 for i = 1, 2000 do x = x + i end return x end return 1 + rec(n - 1) end\nlocal s = 0\nfor i = 1, 3000 do s = s + rec(300) end\nprint("deep", s > 0)\n' > deep.lua
"$luaflame" run --mode both --server "$url" --name deep -o deep.folded deep.lua > out.txt 2> err.txt
rc=$?
fails=0
[ $rc = 0 ] && [ "$(cat out.txt)" = "deep	true" ] || { echo "FAIL: status $rc, output $(cat out.txt): $(cat err.txt)"; fails=1; }
! grep -q "streaming failed" err.txt && [ ! -e deep.undelivered.folded ] ||
  { echo "FAIL: streaming: $(cat err.txt)"; fails=1; }
run=$(curl -sf "$url/api/runs?name=deep")
id=$(echo "$run" | "$lua" -e 'print(io.read("a"):match("\"id\":(%d+)"))')
status=$(echo "$run" | "$lua" -e 'print(io.read("a"):match("\"status\":\"(%a+)\""))')
[ "$status" = finished ] || { echo "FAIL: the run is '$status': $run"; fails=1; }
sum() { awk '{ s += $NF } END { printf "%.0f\n", s }'; }
for metric in samples time calls; do
  file=deep.folded; [ $metric = samples ] || file=deep.$metric.folded
  here=$(sum < "$file")
  curl -sf "$url/api/runs/$id/profile.folded?metric=$metric" > server.$metric.folded
  there=$(sum < server.$metric.folded)
  deepest=$(awk -F';' '{ if (NF > d) d = NF } END { print d + 0 }' server.$metric.folded)
  echo "$metric: local $here, server $there, deepest server stack $deepest frames"
  [ "$here" = "$there" ] && [ "$here" -gt 0 ] || { echo "FAIL: $metric totals differ"; fails=1; }
  [ "$deepest" -le 64 ] || { echo "FAIL: $metric: a stack deeper than 64 on the server"; fails=1; }
  grep -q 'deeper frames cut' server.$metric.folded || { echo "FAIL: $metric: no cut frame"; fails=1; }
done
[ $fails = 0 ] && echo "PASS: a stack deeper than the server takes is cut, nothing lost" || exit 1
