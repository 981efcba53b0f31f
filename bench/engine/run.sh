#!/usr/bin/env bash
# Engine benchmark: `luaflame svg` (and flamegraph.pl, when given) on
# generated Lua-like folded stacks. Prints medians of wall time and peak RSS
# (/usr/bin/time -v), SVG size, frames drawn and bytes per drawn frame.
#
#   bench/engine/run.sh BUILD_DIR [RUNS]
#   FLAMEGRAPH_PL=/tmp/fg/flamegraph.pl bench/engine/run.sh build 5
#
# Environment: STACKS (default 200000), OUT (default bench/out/engine),
# FG_RUNS (flamegraph.pl runs, default 3; it takes half a minute each).
# flamegraph.pl is not part of this repository: fetch it yourself and point
# FLAMEGRAPH_PL at it.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [RUNS]}
runs=${2:-5}
stacks=${STACKS:-200000}
out=${OUT:-bench/out/engine}
mkdir -p "$out"
input=$out/stacks-$stacks.folded
[ -s "$input" ] || "$build/bench/engine/gen_folded" --stacks "$stacks" >"$input"
echo "input: $input: $(wc -c <"$input") bytes, $(wc -l <"$input") stacks"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# measure NAME RUNS CMD...: runs CMD (stdout to $out/NAME.svg) RUNS times.
measure() {
  local name=$1 n=$2; shift 2
  local times=() rss=() cpus=()
  for ((i = 0; i < n; i++)); do
    /usr/bin/time -v "$@" >"$out/$name.svg" 2>"$out/$name.time" || true
    times+=("$(awk -F': ' '/Elapsed \(wall clock\)/ {split($2, t, ":"); print (length(t) == 3) ? t[1]*3600+t[2]*60+t[3] : t[1]*60+t[2]}' "$out/$name.time")")
    rss+=("$(awk -F': ' '/Maximum resident set size/ {print $2}' "$out/$name.time")")
    cpus+=("$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {printf "%.2f", u+s}' "$out/$name.time")")
  done
  local t c m bytes frames
  t=$(printf '%s\n' "${times[@]}" | median)
  c=$(printf '%s\n' "${cpus[@]}" | median)
  m=$(printf '%s\n' "${rss[@]}" | median)
  bytes=$(wc -c <"$out/$name.svg")
  frames=$(grep -c '<title>' "$out/$name.svg" || true)
  printf '%-24s wall %6.2f s  cpu %6.2f s  (wall runs: %s)  peak RSS %5d MB  SVG %6.1f MB  frames %8d  %4.0f B/frame\n' \
    "$name" "$t" "$c" "${times[*]}" $((m / 1024)) "$(echo "$bytes / 1048576" | bc -l)" "$frames" \
    "$(echo "$bytes / ($frames + 0.000001)" | bc -l)"
}

measure luaflame "$runs" "$build/cli/luaflame" svg "$input"
measure luaflame-minwidth0 "$runs" "$build/cli/luaflame" svg --minwidth 0 "$input"
if [ -n "${FLAMEGRAPH_PL:-}" ]; then
  measure flamegraph.pl "${FG_RUNS:-3}" perl "$FLAMEGRAPH_PL" "$input"
  measure flamegraph.pl-minwidth0 "${FG_RUNS:-3}" perl "$FLAMEGRAPH_PL" --minwidth 0 "$input"
fi
