#!/usr/bin/env bash
# Server benchmark over loopback: starts luaflame-server on a free port with a
# fresh store, then measures upload throughput (MB/s of folded text) and
# requests/s for cached, revalidated (304) and uncached flame graphs.
# Each measurement runs RUNS times for SECONDS; the median is printed.
#
#   bench/server/run.sh BUILD_DIR [RUNS]
#
# Environment: STACKS_BIG (default 50000, ~28 MB), STACKS_SMALL (default 2000),
# SECONDS_EACH (default 5), THREADS (default 2), OUT (default bench/out/server).
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [RUNS]}
runs=${2:-3}
secs=${SECONDS_EACH:-5}
threads=${THREADS:-2}
out=${OUT:-bench/out/server}
mkdir -p "$out"
big=$out/stacks-${STACKS_BIG:-50000}.folded
small=$out/stacks-${STACKS_SMALL:-2000}.folded
[ -s "$big" ] || "$build/bench/engine/gen_folded" --stacks "${STACKS_BIG:-50000}" >"$big"
[ -s "$small" ] || "$build/bench/engine/gen_folded" --stacks "${STACKS_SMALL:-2000}" --seed 7 >"$small"
echo "inputs: $big $(wc -c <"$big") bytes; $small $(wc -c <"$small") bytes"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
data=$(mktemp -d /tmp/luaflame-bench-XXXXXX)
"$build/server/luaflame-server" --listen "127.0.0.1:$port" --data "$data" --log-level warn >"$out/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

upload() { curl -sf --data-binary @"$1" "http://127.0.0.1:$port/api/runs?name=$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }
big_id=$(upload "$big" big)
small_id=$(upload "$small" small)

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
# measure LABEL FIELD ARGS...: FIELD 1 = req/s, 2 = MB/s. Also prints the
# server's own CPU time per request (load-independent on a shared machine).
measure() {
  local label=$1 field=$2; shift 2
  local vals=() cpus=()
  for ((i = 0; i < runs; i++)); do
    t0=$(cpu_ticks)
    line=$("$build/bench/server/server_load" --port "$port" --seconds "$secs" --threads "$threads" "$@")
    t1=$(cpu_ticks)
    n=$(echo "$line" | awk '{print $3}')
    cpus+=("$(echo "($t1 - $t0) * 1000 / $hz / ($n + 0.000001)" | bc -l | xargs printf '%.2f')")
    echo "  $line  server cpu $((t1 - t0)) ticks" >>"$out/runs.txt"
    if [ "$field" = 1 ]; then vals+=("$(echo "$line" | awk '{for(i=1;i<=NF;i++) if($i=="req/s") print $(i-1)}')")
    else vals+=("$(echo "$line" | awk '{for(i=1;i<=NF;i++) if($i=="MB/s") print $(i-1)}')"); fi
  done
  printf '%-44s median %8s %s  (runs: %s)  server CPU %s ms/request\n' "$label" "$(printf '%s\n' "${vals[@]}" | median)" \
    "$([ "$field" = 1 ] && echo req/s || echo MB/s)" "${vals[*]}" "$(printf '%s\n' "${cpus[@]}" | median)"
}
: >"$out/runs.txt"
measure "upload ${STACKS_BIG:-50000} stacks ($(($(wc -c <"$big") / 1000000)) MB)" 2 --mode upload --file "$big"
measure "upload ${STACKS_SMALL:-2000} stacks ($(($(wc -c <"$small") / 1000)) KB)" 2 --mode upload --file "$small"
measure "svg cached, ${STACKS_BIG:-50000}-stack run" 1 --mode svg-cached --run "$big_id"
measure "svg 304 (If-None-Match), ${STACKS_BIG:-50000}-stack run" 1 --mode svg-304 --run "$big_id"
measure "svg uncached, ${STACKS_BIG:-50000}-stack run" 1 --mode svg-uncached --run "$big_id"
measure "svg cold (load + render), ${STACKS_BIG:-50000}-stack run" 1 --mode svg-cold --run "$big_id"
measure "svg cached, ${STACKS_SMALL:-2000}-stack run" 1 --mode svg-cached --run "$small_id"
measure "svg uncached, ${STACKS_SMALL:-2000}-stack run" 1 --mode svg-uncached --run "$small_id"
measure "svg cold (load + render), ${STACKS_SMALL:-2000}-stack run" 1 --mode svg-cold --run "$small_id"
echo "store after the benchmark: $(du -sh "$data" | cut -f1); load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
