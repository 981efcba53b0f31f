#!/usr/bin/env bash
# Code that runs with hooks off (issue 27): a program whose time is in 3,000
# finalizers per collectgarbage(), and one whose count hook does most of its
# work. Wall time of the program unprofiled (the version's own interpreter),
# and under each luaflame given at 1 Hz (its runner, next to no sampling) and
# at 999 Hz, interleaved round by round; medians. With two builds (before and
# after a change) the rows compare side by side in one run.
# Every run on one CPU (BENCH_CPU, default the last): on the 2-core VM one
# core ran this program 1.5-1.75x slower than the other for minutes at a time
# (2026-12-07: lua5.2 0.60-0.62 s on CPU 0, 0.34-0.36 s on CPU 1), so where
# the scheduler put a run decided its time.
# usage: [LUAS="5.1 5.2 5.3 5.4 luajit"] [BENCH_CPU=N] bench/collector/foreign.sh ROUNDS LUAFLAME [LUAFLAME...]
#   LUAS: the versions (luaflame run --lua V); default 5.4.
set -euo pipefail
rounds=$1; shift
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# The tests' finalizer program (userdata from newproxy where the VM has it:
# 5.1 and LuaJIT finalize no table; tables with __gc after).
cp "$(dirname "$0")/../../tests/data/collector/foreign/fin.lua" "$tmp/finalizers.lua"
cat > "$tmp/program_hook.lua" <<'LUA'
local function my_hook() local x = 0 for i = 1, 400 do x = x + i end end
debug.sethook(my_hook, "", 1000)
local x = 0
for i = 1, 2e7 do x = x + i % 3 end
debug.sethook()
LUA
cpu=${BENCH_CPU:-$(($(nproc) - 1))}
secs() { local s e; s=$(date +%s%N); taskset -c "$cpu" "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(((e - s) / 1000000)); }
# Medians of each column and of the per-round ratios (this VM slows down in
# bursts of seconds: a round's runs share one, so its ratios hold).
summary() {
  awk -v vm="$1" '{ p[NR] = $1; o[NR] = $2; n[NR] = $3; r1[NR] = $3 / $1; r2[NR] = $3 / $2 }
    function med(a, k, i, j, t) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
      if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return a[int((k + 1) / 2)] }
    END { printf "%s %d ms; --hz 1: %d ms; --hz 999: %d ms; per round, 999 Hz over %s %.2fx, over --hz 1 %.2fx\n",
      vm, med(p, NR), med(o, NR), med(n, NR), vm, med(r1, NR), med(r2, NR) }'
}
key() { echo "$*" | md5sum | cut -c1-8; }
for v in ${LUAS:-5.4}; do
  vm=lua$v; [ "$v" = luajit ] && vm=luajit
  for prog in finalizers program_hook; do
    for b in "$@"; do : > "$tmp/$(key "$b")"; done
    for _ in $(seq "$rounds"); do
      plain=$(secs "$vm" "$tmp/$prog.lua")
      for b in "$@"; do
        one=$(secs "$b" run --lua "$v" -q --mode sample --hz 1 -o "$tmp/out.folded" "$tmp/$prog.lua")
        nine=$(secs "$b" run --lua "$v" -q --mode sample --hz 999 -o "$tmp/out.folded" "$tmp/$prog.lua")
        echo "$plain $one $nine" >> "$tmp/$(key "$b")"
      done
    done
    for b in "$@"; do echo "$v $prog, $b: $(summary "$vm" < "$tmp/$(key "$b")")"; done
  done
done
