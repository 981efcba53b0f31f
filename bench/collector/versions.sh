#!/usr/bin/env bash
# The collector's cost on every Lua (issue 29): Debian's luacheck over
# penlight's sources, run by each version's stock interpreter and by
# `luaflame run --lua V` in sample mode at 1 kHz and in trace mode.
#   bench/collector/versions.sh [BUILD_DIR] [ROUNDS]   (VERSIONS="5.3 5.4": only those)
# Prints one table (docs/collector.md, "Every Lua: cost"):
#   instructions (callgrind, the whole process): trace / plain is exact (the
#     trace's work does not depend on time). Sampling's work does: under
#     valgrind the CPU clock runs ~50x slower per instruction, so the sampler
#     fires ~50x more often per instruction. Its cost is therefore given as
#     instructions per sample event, (Ir at 1 kHz - Ir at 1 Hz) / (events at
#     1 kHz - events at 1 Hz), times the sample events of a native run, over
#     the plain run's instructions: the instructions a native run at 1 kHz adds.
#   CPU time (user + sys, native): ROUNDS rounds (default 5) of plain,
#     sample and trace interleaved, medians, and their ratios to plain.
# Versions without an interpreter or a runner are left out, and said so.
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
LF=$(realpath "$build/cli/luaflame")
lp="/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;;"
target=(/usr/bin/luacheck -q /usr/share/lua/5.1/pl)
[ -f /usr/share/lua/5.1/luacheck/init.lua ] || { echo "versions.sh: lua-check is not installed" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

interp() { [ "$1" = luajit ] && echo luajit || echo "lua$1"; }
run_plain() { env LUA_PATH="$lp" "$(interp "$1")" "${target[@]}" > /dev/null 2>&1 || true; }
run_lf() {  # run_lf V MODE HZ [summary file]
  env LUA_PATH="$lp" "$LF" run --lua "$1" --mode "$2" --hz "$3" -o "$work/p.folded" "${target[@]}" \
    > /dev/null 2> "${4:-/dev/null}" || true
}
cpu() {  # cpu COMMAND...: user + sys seconds of one run (luacheck exits 1 on warnings)
  /usr/bin/time -o "$work/time" -f '%U %S' "$@" > /dev/null 2>&1 || true
  tail -1 "$work/time" | awk '{printf "%.3f", $1 + $2}'
}
median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ir() {  # ir COMMAND...: instructions of the whole process (all threads)
  valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$work/cg.%p" "$@" > /dev/null 2> "$work/vg.err" || true
  local total=0 f
  for f in "$work"/cg.*; do total=$((total + $(awk '/^summary:/ {print $2}' "$f"))); done
  rm -f "$work"/cg.*
  echo "$total"
}
events() { sed -n 's/.*(\([0-9]*\) events,.*/\1/p' "$1" | head -1; }

printf '| Lua | plain Ir | trace Ir | trace | Ir per sample | sample 1 kHz (Ir) | plain CPU | sample 1 kHz CPU | trace CPU |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for v in ${VERSIONS:-5.1 5.2 5.3 5.4 luajit}; do
  if ! command -v "$(interp "$v")" > /dev/null || ! "$LF" run --lua list | grep -q "^$v "; then
    echo "| $v | not installed | | | | | | | |"; continue
  fi
  : > plain.t; : > sample.t; : > trace.t
  for _ in $(seq "$rounds"); do
    cpu env LUA_PATH="$lp" "$(interp "$v")" "${target[@]}" >> plain.t; echo >> plain.t
    cpu env LUA_PATH="$lp" "$LF" run --lua "$v" -q --hz 1000 -o "$work/p.folded" "${target[@]}" >> sample.t; echo >> sample.t
    cpu env LUA_PATH="$lp" "$LF" run --lua "$v" -q --mode trace -o "$work/p.folded" "${target[@]}" >> trace.t; echo >> trace.t
  done
  p=$(median < plain.t) s=$(median < sample.t)
  t=$(median < trace.t)
  run_lf "$v" sample 1000 native.sum
  native_events=$(events native.sum)
  plain_ir=$(ir env LUA_PATH="$lp" "$(interp "$v")" "${target[@]}")
  hi_ir=$(ir env LUA_PATH="$lp" "$LF" run --lua "$v" --hz 1000 -o "$work/p.folded" "${target[@]}")
  hi_ev=$(events "$work/vg.err")
  lo_ir=$(ir env LUA_PATH="$lp" "$LF" run --lua "$v" --hz 1 -o "$work/p.folded" "${target[@]}")
  lo_ev=$(events "$work/vg.err")
  per=$(awk -v a="$hi_ir" -v b="$lo_ir" -v x="$hi_ev" -v y="$lo_ev" 'BEGIN { printf "%.0f", (x > y) ? (a - b) / (x - y) : 0 }')
  sample_x=$(awk -v per="$per" -v n="$native_events" -v p="$plain_ir" -v c="$lo_ir" 'BEGIN { printf "%.3f", (c + per * n) / p }')
  tr_ir=$(ir env LUA_PATH="$lp" "$LF" run --lua "$v" --mode trace -o "$work/p.folded" "${target[@]}")
  tr_x=$(awk -v a="$tr_ir" -v p="$plain_ir" 'BEGIN { printf "%.2fx", a / p }')
  t_x=$(awk -v a="$t" -v p="$p" 'BEGIN { printf "%.3f s (%.2fx)", a, a / p }')
  printf '| %s | %s | %s | %s | %s | %sx | %s s | %s s (%.2fx) | %s |\n' "$v" "$plain_ir" "$tr_ir" "$tr_x" "$per" \
    "$sample_x" "$p" "$s" "$(awk -v a="$s" -v b="$p" 'BEGIN { print a / b }')" "$t_x"
done
