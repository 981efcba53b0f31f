#!/usr/bin/env bash
# The collector on Lua 5.1, 5.2 and 5.3 (collector/vm/puc built for each)
# against that version's stock interpreter: the 5.4 suite's known answers,
# on the version's own runner and its luaflame.so (docs/collector.md,
# "Every Lua"). 5.4 itself: runner_test.sh; LuaJIT: jit_test.sh.
# Usage: puc_test.sh LUAFLAME_LUA5.X LUA5.X MODULE_DIR DATA_DIR LUAFLAME
set -u
. "$(dirname "$0")/vm_test_lib.sh"
vm_test_setup "$@"
v=${LUA#lua}                    # 5.1, 5.2, 5.3
CLI=$(realpath "$5")            # the luaflame command: its Lua 5.4 is the reference of 3b
sum() { awk '{s+=$NF} END {print s+0}'; }

# 1. Same stdout, stderr and exit status as lua5.X, in every mode it has.
vm_parity "luaflame-$LUA" "$LF"

# 2. A 75/25 split of CPU time between two functions, sampled and timed in
# that ratio.
cat > "$work/split.lua" <<'LUA'
local function spin(n) local s = 0 for i = 1, n do s = s + (i * i) % 7 end return s end
local function three() return (spin(3e5)) end
local function one() return (spin(1e5)) end
local t = 0
for _ = 1, 60 do t = t + three() + one() end
print(t > 0)
LUA
for mode in sample both; do
  (cd "$work" && "$LF" --mode "$mode" -o split.folded split.lua > /dev/null 2> split.err) || fail "split ($mode): $(cat "$work/split.err")"
  for f in split.folded $([ "$mode" = both ] && echo split.time.folded); do
    a=$(grep ';three split.lua:2;spin split.lua:1' "$work/$f" | sum)
    b=$(grep ';one split.lua:3;spin split.lua:1' "$work/$f" | sum)
    all=$(sum < "$work/$f")
    awk -v a="$a" -v b="$b" -v all="$all" 'BEGIN { r = a / (a + b + 1e-9);
      exit !(a + b > 0.9 * all && r > 0.68 && r < 0.82) }' ||
      fail "split ($mode, $f): three $a one $b of $all (want 75% +-7): $(head -c 600 "$work/$f")"
  done
done

# 2b. --lines charges the line the thread was on (5.1: no goto).
if [ "$v" != 5.1 ]; then vm_lines_check "$LF"; else LINES_GOTO=0 vm_lines_check "$LF"; fi

# 2c. Two functions defined on one line are two frames.
vm_oneline_check "$LF"

# 2d. Finalizers and the program's own hook: charged to their functions,
# at the normal cost (5.2 marks no finalizer: one frame names it).
case $v in
  5.3) vm_finalizer_check "finalize fin.lua:2;spin fin.lua:1" "$LF" ;;
  *) vm_finalizer_check "[gc] finalizer" "$LF" ;;
esac
if [ "$v" = 5.3 ]; then vm_gc_work_check "finalize gcfin.lua:2;spin gcfin.lua:1" "$LF"; else vm_gc_work_check "[gc] finalizer" "$LF"; fi
if [ "$v" = 5.1 ]; then vm_program_hook_check "[hook] program hook" "$LF"; else vm_program_hook_check "my_hook hook.lua:1" "$LF"; fi
vm_hook_before_start_check
vm_sethook_again_check "$LF"

# 3. Exact calls in trace mode: coroutines of both kinds, a tail call (its
# callee replaces the caller's frame, as on 5.4), pcall.
cat > "$work/calls.lua" <<'LUA'
local function work(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function tail(n) return work(n) end
local gen = coroutine.wrap(function() while true do coroutine.yield(work(10)) end end)
local co = coroutine.create(function() while true do coroutine.yield(tail(10)) end end)
for _ = 1, 30 do gen() coroutine.resume(co) end
for _ = 1, 7 do pcall(error, "x") end
LUA
(cd "$work" && "$LF" -q --mode trace -o t.folded calls.lua)
for want in 'calls.lua calls.lua:0;\[C\] <wrapped coroutine>;<anon> calls.lua:3;work calls.lua:1 30' \
            'calls.lua calls.lua:0;\[C\] coroutine.resume;<anon> calls.lua:4;tail calls.lua:2 30' \
            'calls.lua calls.lua:0;\[C\] coroutine.resume;<anon> calls.lua:4;work calls.lua:1 30' \
            'calls.lua calls.lua:0;\[C\] pcall 7' 'calls.lua calls.lua:0;\[C\] pcall;\[C\] error 7'; do
  grep -q "^$want\$" "$work/t.calls.folded" || fail "trace calls: no <$want> in $(cat "$work/t.calls.folded")"
done
! grep -q ';tail calls.lua:2;work' "$work/t.calls.folded" ||
  fail "trace calls: the tail-called function under the caller it replaced: $(cat "$work/t.calls.folded")"

# 3b. The trace's exact calls as data (trace/*.lua: tail calls, errors
# through pcall, generators, C functions): the same paths and counts as on
# Lua 5.4 (5.1's string.gmatch too, not its alias string.gfind).
for case in "$DATA"/trace/*.lua; do
  name=$(basename "$case" .lua)
  cp "$case" "$work/$name.lua"
  (cd "$work" && "$LF" -q --mode trace -o d.folded "$name.lua" > /dev/null 2>&1 &&
    sort d.calls.folded > "d.$v" &&
    "$CLI" run --lua 5.4 -q --mode trace -o e.folded "$name.lua" > /dev/null 2>&1 &&
    sort e.calls.folded > d.5.4) || fail "trace data $name: a run failed"
  cmp -s "$work/d.$v" "$work/d.5.4" ||
    fail "trace data $name: not 5.4's calls: $(diff "$work/d.5.4" "$work/d.$v" | head -20)"
done

# 4. Coroutines sit under their resumer, in both kinds.
cat > "$work/co.lua" <<'LUA'
local function work(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local gen = coroutine.wrap(function() while true do coroutine.yield(work(2e5)) end end)
local co = coroutine.create(function() while true do coroutine.yield(work(2e5)) end end)
for _ = 1, 100 do gen() coroutine.resume(co) end
LUA
(cd "$work" && "$LF" -q -o co.folded co.lua)
grep -q '^co.lua co.lua:0;\[C\] <wrapped coroutine>;<anon> co.lua:2;work co.lua:1' "$work/co.folded" ||
  fail "wrap: not under its resumer: $(cat "$work/co.folded")"
grep -q '^co.lua co.lua:0;\[C\] coroutine.resume;<anon> co.lua:3;work co.lua:1' "$work/co.folded" ||
  fail "resume: not under its resumer: $(cat "$work/co.folded")"

# 5. Allocation attribution: bytes charged to the function that allocated
# them (3 to 1; tables, not strings: 5.1 interns every string).
cat > "$work/alloc.lua" <<'LUA'
local keep = {}
local function big() for i = 1, 3000 do keep[i % 100 + 1] = {i, i, i, i} end end
local function small() for i = 1, 1000 do keep[i % 100 + 1] = {i, i, i, i} end end
for _ = 1, 20 do big() small() end
LUA
(cd "$work" && "$LF" -q --mode alloc --alloc-rate 0 -o a.folded alloc.lua) || fail "alloc mode failed"
a=$(grep ';big alloc.lua:2' "$work/a.folded" | sum)
b=$(grep ';small alloc.lua:3' "$work/a.folded" | sum)
awk -v a="$a" -v b="$b" 'BEGIN { r = a / (a + b + 1e-9); exit !(b > 0 && r > 0.7 && r < 0.8) }' ||
  fail "alloc: big $a small $b bytes (want 75% +-5): $(head -c 600 "$work/a.folded")"

# 6. require "luaflame" from a stock lua5.X: the API, the lua tag's release,
# and start/stop over and over with garbage between (regression: a stopped
# run's closer, finalized later, stopped the next run).
out=$(cd "$work" && LUA_CPATH="$MODDIR/?.so" "$LUA" -e '
  local lf = require "luaflame"
  local function f() local s = 0 for i = 1, 1e5 do s = s + i end return s end
  local sum, r = lf.profile(function() for _ = 1, 20 do f() end return 7 end, {mode = "sample", quiet = true})
  print(r, sum.mode, sum.metrics[1], sum.lua)
  local modes = {"sample", "sample+alloc", "both"}
  for i = 1, 30 do
    lf.start{mode = modes[i % #modes + 1], output = "loop.folded", quiet = true}
    local junk = {} for k = 1, 2000 do junk[k] = {k} end
    collectgarbage() collectgarbage()
    assert(lf.running(), "stopped by a finalizer at round " .. i)
    lf.stop()
  end
  print("loop ok")
  print(pcall(lf.stop))' 2>&1)
want="7	sample	samples	$($LUA -v 2>&1 | awk '{print $1, $2}')
loop ok
false	luaflame.stop: luaflame is not running"
[[ $out == "$want"* ]] || fail "module: <$out>"

# 7. The run says which Lua it came from: the summary names the release.
(cd "$work" && "$LF" -o tag.folded co.lua 2> tag.err)
grep -q "^luaflame: sample mode on Lua $v\.[0-9]" "$work/tag.err" || fail "lua release: not in $(head -c 300 "$work/tag.err")"

# 8. A real program: Debian's luacheck (written for 5.1, runs on all) over
# penlight: the same report as unprofiled, and its own functions in the graph.
if [ -f /usr/share/lua/5.1/luacheck/init.lua ] && [ -d /usr/share/lua/5.1/pl ]; then
  lp="/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;;"
  a=$(cd "$work" && LUA_PATH="$lp" "$LUA" /usr/bin/luacheck --no-color /usr/share/lua/5.1/pl 2>&1; echo "rc=$?")
  b=$(cd "$work" && LUA_PATH="$lp" "$LF" -q -o lc.folded /usr/bin/luacheck --no-color /usr/share/lua/5.1/pl 2>&1; echo "rc=$?")
  [ "$a" = "$b" ] || fail "luacheck: output differs: <$(echo "$a" | tail -3)> vs <$(echo "$b" | tail -3)>"
  grep -q 'luacheck/parser.lua' "$work/lc.folded" || fail "luacheck: no parser frames: $(head -c 400 "$work/lc.folded")"
else
  fail "luacheck or penlight is not installed (scripts/install-deps.sh --test installs them)"
fi

# The main chunk's locals are live at stop (vm_test_lib.sh: vm_chunk_live_check).
vm_chunk_live_check "$LF"

# Live bytes against the VM's own count (vm_test_lib.sh: vm_live_count_check).
vm_live_count_check "$LF"

vm_test_end "Lua $v collector"
