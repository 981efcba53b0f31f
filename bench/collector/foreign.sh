#!/usr/bin/env bash
# Code that runs with hooks off (issue 27): a program whose time is in 3,000
# finalizers per collectgarbage(), and one whose count hook does most of its
# work. Wall time of the program unprofiled (lua5.4) and under each luaflame
# given, interleaved round by round; medians. With two builds (before and
# after a change) the rows compare side by side in one run.
# usage: bench/collector/foreign.sh ROUNDS LUAFLAME [LUAFLAME...]
set -euo pipefail
rounds=$1; shift
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/finalizers.lua" <<'LUA'
local function spin(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end
local function finalize(o) spin(4000) end
for round = 1, 4 do
  for i = 1, 3000 do setmetatable({}, {__gc = finalize}) end
  collectgarbage()
end
LUA
cat > "$tmp/program_hook.lua" <<'LUA'
local function my_hook() local x = 0 for i = 1, 400 do x = x + i end end
debug.sethook(my_hook, "", 1000)
local x = 0
for i = 1, 2e7 do x = x + i % 3 end
debug.sethook()
LUA
secs() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo $(((e - s) / 1000000)); }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for prog in finalizers program_hook; do
  : > "$tmp/plain"
  for b in "$@"; do : > "$tmp/$(echo "$b" | md5sum | cut -c1-8)"; done
  for _ in $(seq "$rounds"); do
    secs lua5.4 "$tmp/$prog.lua" >> "$tmp/plain"
    for b in "$@"; do
      secs "$b" run -q --mode sample --hz 999 -o "$tmp/out.folded" "$tmp/$prog.lua" \
        >> "$tmp/$(echo "$b" | md5sum | cut -c1-8)"
    done
  done
  echo "$prog: lua5.4 $(median < "$tmp/plain") ms"
  for b in "$@"; do
    echo "$prog: $b --mode sample --hz 999: $(median < "$tmp/$(echo "$b" | md5sum | cut -c1-8)") ms"
  done
done
