#!/bin/sh
# LuaJIT collector overhead and sample rate, side by side and interleaved:
# plain luajit, luajit -jp=i1 (jit.p at 1 kHz) and luaflame-jit at 999 Hz,
# ROUNDS rounds of each, medians of the CPU time (user + sys) each took.
# Usage: bench/jit/run.sh BUILD_DIR [ROUNDS]
set -eu
BUILD=${1:?usage: run.sh BUILD_DIR [ROUNDS]}
ROUNDS=${2:-7}
HERE=$(cd "$(dirname "$0")" && pwd)
JIT="$BUILD/collector/jit/luaflame-jit"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cpu() {  # CPU seconds (user + sys) of a command, its output dropped
  /usr/bin/env time -f '%U %S' -o "$TMP/t" "$@" >/dev/null 2>>"$TMP/err"
  awk '{print $1 + $2}' "$TMP/t"
}
for r in $(seq "$ROUNDS"); do
  echo "plain $(cpu luajit "$HERE/cpu.lua")" >>"$TMP/all"
  echo "jp $(cpu luajit -jp=i1,"$TMP/jp.txt" "$HERE/cpu.lua")" >>"$TMP/all"
  echo "luaflame $(cpu "$JIT" -q --hz 999 -o "$TMP/p.folded" "$HERE/cpu.lua")" >>"$TMP/all"
done
median() { grep "^$1 " "$TMP/all" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
P=$(median plain)
for k in plain jp luaflame; do
  M=$(median "$k")
  echo "$k: median $M s CPU over $ROUNDS runs ($(echo "$M $P" | awk '{printf "%.3f", $1/$2}')x plain)"
done
# Samples per ms of CPU: luaflame's summary, and jit.profile at i1 (jp_rate.lua).
"$JIT" --hz 999 -o "$TMP/p.folded" "$HERE/cpu.lua" 2>&1 >/dev/null | grep 'Hz delivered' |
  sed 's/.*(\([0-9]*\) events, \([0-9]*\) asked, \([0-9]*\) recorded over \([0-9.]*\) s.*/luaflame: \1 events, \3 samples recorded, \2 asked: /' |
  tr -d '\n'
"$JIT" --hz 999 -o "$TMP/p.folded" "$HERE/cpu.lua" 2>&1 >/dev/null | grep -o '[0-9.]* Hz delivered' |
  awk '{printf "%.3f events/ms of CPU\n", $1/1000}'
(cd "$HERE" && luajit jp_rate.lua cpu.lua >/dev/null)
grep -o 'JIT\]\|interp\]\|compiler\]\|GC\]' "$TMP/p.folded" | sort | uniq -c | tr -s ' ' | sed 's/^/vm-state frames (paths):/' || true
