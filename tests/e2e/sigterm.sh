#!/usr/bin/env bash
# Regression (issue 27): SIGTERM (docker compose stop, kill) killed `luaflame
# run` before it finished its run, which stayed LIVE on the server for an
# hour. Now the run is finished with what it holds and the process still dies
# of SIGTERM, as lua5.4 does (status 143), in every mode: the streamed run is
# marked finished with samples in it, the local file is written.
# usage: sigterm.sh LUAFLAME LUAFLAME_SERVER LUA
set -uo pipefail
luaflame=$1 server=$2 lua=$3
source "$(dirname "$0")/../support/server.sh"
lf_e2e_server "$server"
cd "$tmp" || exit 1
printf 'local x = 0\nlocal function spin() for i = 1, 1e5 do x = x + i %% 7 end end\nwhile true do spin() end\n' > loop.lua
fails=0
# The process dies of SIGTERM: bash reports 128 + 15.
term_after() {  # seconds command...: runs it, TERM after `seconds`, prints the status
  local s=$1; shift
  "$@" > out.txt 2> err.txt & local p=$!
  sleep "$s"; kill -TERM $p; wait $p; echo $?
}
rc=$(term_after 0.5 "$lua" loop.lua)
[ "$rc" = 143 ] || { echo "FAIL: lua5.4 itself: status $rc"; fails=1; }
for mode in sample both trace; do
  rm -f term.*folded
  rc=$(term_after 1.5 "$luaflame" run --mode $mode --server "$url" --name "term-$mode" -o term.folded loop.lua)
  [ "$rc" = 143 ] || { echo "FAIL: $mode: status $rc, not 143 as unprofiled: $(cat err.txt)"; fails=1; }
  grep -q 'terminated (SIGTERM)' err.txt || { echo "FAIL: $mode: no line said why: $(cat err.txt)"; fails=1; }
  [ -s term.folded ] || { echo "FAIL: $mode: term.folded not written"; fails=1; }
  run=$(curl -sf "$url/api/runs?name=term-$mode")
  status=$(echo "$run" | "$lua" -e 'print(io.read("a"):match("\"status\":\"(%a+)\""))')
  [ "$status" = finished ] || { echo "FAIL: $mode: the run is '$status' on the server: $run"; fails=1; }
  id=$(echo "$run" | "$lua" -e 'print(io.read("a"):match("\"id\":(%d+)"))')
  stacks=$(curl -sf "$url/api/runs/$id/profile.folded" | grep -c 'spin ')
  [ "$stacks" -ge 1 ] || { echo "FAIL: $mode: no spin stack in the server's run"; fails=1; }
  echo "$mode: status $rc, server run $id $status, $(wc -l < term.folded) local stacks"
done
[ $fails = 0 ] && echo "PASS: SIGTERM finishes the run and dies as unprofiled" || exit 1
