#!/bin/sh
# LuaJIT collector overhead and sample rate, side by side and interleaved:
# plain luajit, luajit -jp=i1 (jit.p at 1 kHz), luaflame-luajit --hz 1 (the
# control: the runner and LuaJIT's profiler, almost no samples) and at
# 999 Hz, and with BEFORE_BUILD_DIR the luaflame-luajit built there at 999 Hz
# too; ROUNDS rounds of each, medians of the CPU time (user + sys, every
# thread) each took, from perf stat's task-clock (0.01 ms) where perf
# runs, else time(1)'s (10 ms).
# Usage: bench/jit/run.sh BUILD_DIR [ROUNDS] [BEFORE_BUILD_DIR]
set -eu
BUILD=${1:?usage: run.sh BUILD_DIR [ROUNDS] [BEFORE_BUILD_DIR]}
ROUNDS=${2:-7}
BEFORE=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
JIT="$BUILD/cli/luaflame-luajit"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if perf stat -x, -e task-clock -o "$TMP/t" true 2>/dev/null; then
  cpu() {  # CPU seconds (every thread) of a command, its output dropped
    perf stat -x, -e task-clock -o "$TMP/t" "$@" >/dev/null 2>>"$TMP/err"
    awk -F, '/task-clock/ {printf "%.4f\n", $1 / 1000}' "$TMP/t"
  }
else
  cpu() {
    /usr/bin/env time -f '%U %S' -o "$TMP/t" "$@" >/dev/null 2>>"$TMP/err"
    awk '{print $1 + $2}' "$TMP/t"
  }
fi
KINDS="plain jp hz1 luaflame"
[ -n "$BEFORE" ] && KINDS="$KINDS before"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  P=$(cpu luajit "$HERE/cpu.lua")
  echo "plain $P 1" >>"$TMP/all"
  for k in $KINDS; do
    case $k in
      plain) continue ;;
      jp) T=$(cpu luajit -jp=i1,"$TMP/jp.txt" "$HERE/cpu.lua") ;;
      hz1) T=$(cpu "$JIT" -q --hz 1 -o "$TMP/p.folded" "$HERE/cpu.lua") ;;
      luaflame) T=$(cpu "$JIT" -q --hz 999 -o "$TMP/p.folded" "$HERE/cpu.lua") ;;
      before) T=$(cpu "$(ls "$BEFORE/cli/luaflame-luajit" "$BEFORE/cli/luaflame-jit" "$BEFORE/collector/vm/luajit/luaflame-luajit" "$BEFORE/collector/jit/luaflame-luajit" 2>/dev/null | head -n1)" -q --hz 999 -o "$TMP/p.folded" "$HERE/cpu.lua") ;;
    esac
    echo "$k $T $(echo "$T $P" | awk '{printf "%.4f", $1 / $2}')" >>"$TMP/all"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { grep "^$1 " "$TMP/all" | awk -v c="$2" '{print $c}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# The fastest run too: the neighbours' load only ever adds time.
least() { grep "^$1 " "$TMP/all" | awk '{print $2}' | sort -n | head -1; }
P=$(median plain 2)
for k in $KINDS; do
  M=$(median "$k" 2)
  echo "$k: median $M s CPU over $ROUNDS runs ($(echo "$M $P" | awk '{printf "%.3f", $1/$2}')x plain; median of per-round ratios $(median "$k" 3)x; fastest $(least "$k") s, $(echo "$(least "$k") $(least plain)" | awk '{printf "%.3f", $1/$2}')x the fastest plain)"
done
[ -n "${KEEP:-}" ] && cp "$TMP/all" "$KEEP"  # every run: kind, CPU s, ratio to the round's plain
# Samples per ms of CPU: luaflame's summary, and jit.profile at i1 (jp_rate.lua).
"$JIT" --hz 999 -o "$TMP/p.folded" "$HERE/cpu.lua" 2>&1 >/dev/null | grep 'Hz delivered' |
  sed 's/.*(\([0-9]*\) events, \([0-9]*\) asked, \([0-9]*\) recorded over \([0-9.]*\) s.*/luaflame: \1 events, \3 samples recorded, \2 asked: /' |
  tr -d '\n'
"$JIT" --hz 999 -o "$TMP/p.folded" "$HERE/cpu.lua" 2>&1 >/dev/null | grep -o '[0-9.]* Hz delivered' |
  awk '{printf "%.3f events/ms of CPU\n", $1/1000}'
(cd "$HERE" && luajit jp_rate.lua cpu.lua >/dev/null)
grep -o 'JIT\]\|interp\]\|compiler\]\|GC\]' "$TMP/p.folded" | sort | uniq -c | tr -s ' ' | sed 's/^/vm-state frames (paths):/' || true
