#!/bin/sh
# Where the collector's CPU goes, per thread: bench/jit/cpu.lua under
# luaflame-luajit at 999 Hz (and, with BEFORE_BUILD_DIR, that build's too),
# interleaved; perf stat --per-thread gives each thread's CPU time and
# context switches: the Lua thread (the program, LuaJIT's signal handler,
# the callback) and the timer thread. Medians over ROUNDS.
# Usage: bench/jit/threads.sh BUILD_DIR [ROUNDS] [BEFORE_BUILD_DIR]
set -eu
BUILD=${1:?usage: threads.sh BUILD_DIR [ROUNDS] [BEFORE_BUILD_DIR]}
ROUNDS=${2:-7}
BEFORE=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && cp "$TMP/all" "$KEEP"; rm -rf "$TMP"' EXIT
one() {  # KIND BUILD: one run; appends "KIND lua_ms lua_cs timer_ms timer_cs"
  "$(ls "$2/cli/luaflame-luajit" "$2/cli/luaflame-jit" "$2/collector/vm/luajit/luaflame-luajit" "$2/collector/jit/luaflame-luajit" 2>/dev/null | head -n1)" -q --hz 999 -o "$TMP/p.folded" "$HERE/cpu.lua" >/dev/null &
  pid=$!
  perf stat --per-thread -e task-clock,context-switches -p "$pid" -o "$TMP/s" 2>/dev/null || true
  wait "$pid"
  # The Lua thread is the process's first (tid = pid); the busiest other one is the timer.
  awk -v k="$1" -v pid="$pid" '
    /task-clock/ { split($1, a, "-"); t = a[length(a)]; ms[t] = $2 }
    /context-switches/ { split($1, a, "-"); t = a[length(a)]; cs[t] = $2 }
    END { tm = 0; tc = 0
      for (t in ms) if (t != pid && ms[t] > tm) { tm = ms[t]; tc = cs[t] }
      printf "%s %s %s %s %s\n", k, ms[pid], cs[pid], tm, tc }' "$TMP/s" >>"$TMP/all"
}
for r in $(seq "$ROUNDS"); do
  one after "$BUILD"
  [ -n "$BEFORE" ] && one before "$BEFORE"
done
median() { grep "^$1 " "$TMP/all" | awk -v c="$2" '{print $c}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for k in after before; do
  grep -q "^$k " "$TMP/all" || continue
  echo "$k: Lua thread $(median $k 2) ms CPU, $(median $k 3) context switches; timer thread $(median $k 4) ms CPU, $(median $k 5) context switches (medians of $ROUNDS)"
done
