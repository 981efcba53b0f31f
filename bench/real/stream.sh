#!/usr/bin/env bash
# Streaming a call-heavy real program to a real luaflame-server on loopback:
# Debian's luacheck over its own sources (5 M calls, 175 k call paths) under
# `luaflame run --mode MODE --server URL`, ROUNDS times. Per run:
#   landing    seconds from the program's exit (its os.exit, stamped from
#              /proc/uptime by stream_exit.lua) to `luaflame run` returning,
#              which it does once the server has answered the finish request;
#   server CPU the server's user+sys during the run (/proc/PID/stat), and
#              per chunk (the summary line's chunk count);
#   totals     calls and samples on the server equal to the summary's
#              (calls exact, samples as recorded), run status finished.
#   bench/real/stream.sh [BUILD_DIR] [ROUNDS] [MODE]   (default build, 5, both)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
rounds=${2:-5}
mode=${3:-both}
LF=$(realpath "$build/cli/luaflame")
SERVER=$(realpath "$build/server/luaflame-server")
dpkg-query -W -f='${Status}' lua-check 2>/dev/null | grep -q "install ok installed" ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends lua-check
export LUA_PATH="/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;;"
work=$(mktemp -d)
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"

port=$(lua5.4 -e 'math.randomseed(os.time()) print(math.random(20000, 60000))')
for _ in $(seq 20); do
  "$SERVER" --listen "127.0.0.1:$port" --data "$work/data" >server.log 2>&1 & pid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""
  port=$((port + 1))
done
[ -n "$pid" ] || { echo "server did not start"; cat server.log; exit 1; }
url="http://127.0.0.1:$port"
tick=$(getconf CLK_TCK)
server_cpu() { awk -v t="$tick" '{ printf "%.2f\n", ($14 + $15) / t }' "/proc/$pid/stat"; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }
sum() { awk '{ s += $NF } END { printf "%.0f\n", s }'; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

bad=0
printf '| round | chunks | landing s | server CPU s | per chunk ms | calls (summary = server) | samples (summary = server) | status |\n'
printf '|---|---|---|---|---|---|---|---|\n'
for r in $(seq "$rounds"); do
  c0=$(server_cpu)
  "$LF" run --lua 5.4 --mode "$mode" --server "$url" --name "stream-bench-$r" \
    "$here/stream_exit.lua" /usr/bin/luacheck /usr/share/lua/5.1/luacheck >/dev/null 2>err.txt || true
  end=$(uptime_s)
  c1=$(server_cpu)
  exit_at=$(grep -o 'program exit at [0-9.]*' err.txt | awk '{print $4}')
  landing=$(echo "$end - $exit_at" | bc -l)
  chunks=$(grep -o 'streamed [0-9]* chunks' err.txt | awk '{print $2}')
  calls=$(grep -o '[0-9]* calls traced' err.txt | awk '{print $1}')
  samples=$(grep -o '[0-9]* recorded over' err.txt | awk '{print $1}')
  id=$(curl -sf "$url/api/runs?name=stream-bench-$r" | lua5.4 -e 'print(io.read("a"):match("\"id\":(%d+)"))')
  status=$(curl -sf "$url/api/runs/$id" | lua5.4 -e 'print(io.read("a"):match("\"status\":\"(%a+)\""))')
  s_calls=$(curl -sf "$url/api/runs/$id/profile.folded?metric=calls" | sum)
  s_samples=$([ "$mode" = both ] && curl -sf "$url/api/runs/$id/profile.folded?metric=samples" | sum || echo "${samples:-}")
  cpu=$(echo "$c1 - $c0" | bc -l)
  if [ "$calls" != "$s_calls" ] || [ "${samples:-}" != "${s_samples:-}" ] || [ "$status" != finished ]; then
    bad=1
    grep -v 'program exit' err.txt | sed 's/^/  /'
  fi
  printf '| %s | %s | %.2f | %.2f | %.0f | %s = %s | %s = %s | %s |\n' "$r" "$chunks" "$landing" "$cpu" \
    "$(echo "1000 * $cpu / ${chunks:-1}" | bc -l)" "$calls" "$s_calls" "${samples:-}" "${s_samples:-}" "$status"
  echo "$landing $cpu" >>figures.txt
done
echo "median landing $(cut -d' ' -f1 figures.txt | median) s (goal <= 2 s); median server CPU $(cut -d' ' -f2 figures.txt | median) s per run"
echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
exit $bad
