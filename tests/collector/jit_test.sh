#!/usr/bin/env bash
# The LuaJIT collector against the real luajit (docs/luajit.md): the 5.4
# collector's known-answer programs run under both VMs from one suite.
# Usage: jit_test.sh LUAFLAME_JIT LUAJIT MODULE_DIR DATA_DIR
set -u
. "$(dirname "$0")/vm_test_lib.sh"
vm_test_setup "$@"

# 1. Same stdout, stderr and exit status as luajit, in every mode (error
# parity: messages, tracebacks, errors in resume and wrap, os.exit).
PARITY_MASK_ADDRESSES=1 PARITY_MODES="sample trace both" vm_parity luaflame-luajit "$LF"  # no alloc mode on LuaJIT

# 2. Exact calls in trace mode, through coroutines of both kinds (the
# 5.4 suite's trace/*.calls.folded are made by its in-process harness).
cat > "$work/calls.lua" <<'LUA'
local function work(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function tail(n) return work(n) end
local gen = coroutine.wrap(function() while true do coroutine.yield(work(10)) end end)
local co = coroutine.create(function() while true do coroutine.yield(tail(10)) end end)
for _ = 1, 30 do gen() coroutine.resume(co) end
for _ = 1, 7 do pcall(error, "x") end
LUA
(cd "$work" && "$LF" --mode trace -o t.folded calls.lua 2> t.err)
# ... with each call named from LuaJIT's own objects (jlayout.hpp's reads
# verified at start on this LuaJIT), not through lua_getinfo.
! grep -q "calls named through lua_getinfo" "$work/t.err" ||
  fail "trace: LuaJIT's layout not verified: $(cat "$work/t.err")"
for want in 'calls.lua calls.lua:0;\[C\] <wrapped coroutine>;<anon> calls.lua:3;work calls.lua:1 30' \
            'calls.lua calls.lua:0;\[C\] coroutine.resume;<anon> calls.lua:4;work calls.lua:1 30' \
            'calls.lua calls.lua:0;\[C\] pcall 7' 'calls.lua calls.lua:0;\[C\] pcall;\[C\] error 7'; do
  grep -q "^$want\$" "$work/t.calls.folded" || fail "trace calls: no <$want> in $(cat "$work/t.calls.folded")"
done

# ... and a coroutine's calls hang under the resume that ran them: a
# generator resumed from two places, and coroutines made over and over from
# two places (a new one often takes a dead one's address).
cat > "$work/resumers.lua" <<'LUA'
local function work() local s = 0 for i = 1, 2000 do s = s + i end return s end
local gen = coroutine.create(function() while true do work() coroutine.yield() end end)
local function p() coroutine.resume(gen) end
local function q() coroutine.resume(gen) end
for _ = 1, 100 do p() q() end
local function a_work() return work() + 1 end
local function b_work() return work() + 2 end
local function from_a() coroutine.resume(coroutine.create(a_work)) end
local function from_b() coroutine.resume(coroutine.create(b_work)) end
for _ = 1, 150 do from_a() collectgarbage() from_b() collectgarbage() end
LUA
(cd "$work" && "$LF" --mode trace -o r.folded resumers.lua 2> r.err) || fail "resumers: $(cat "$work/r.err")"
for want in 'p resumers.lua:3;\[C\] coroutine.resume;<anon> resumers.lua:2;work resumers.lua:1 100' \
            'q resumers.lua:4;\[C\] coroutine.resume;<anon> resumers.lua:2;work resumers.lua:1 100' \
            'from_a resumers.lua:8;\[C\] coroutine.resume;a_work resumers.lua:6 150' \
            'from_b resumers.lua:9;\[C\] coroutine.resume;b_work resumers.lua:7 150'; do
  grep -q "^resumers.lua resumers.lua:0;$want\$" "$work/r.calls.folded" ||
    fail "trace calls: no <$want> in $(cat "$work/r.calls.folded")"
done

# ... and goes on after the program sets its own hook (LuaJIT's hook is one
# per state: the program's replaced luaflame's, and every later moment went
# to `[C] debug.sethook`): the program's hook gets its events as without
# luaflame (the parity above), debug.gethook says what the program set, and
# the calls after the sethook are traced (jhooks.cpp).
cp "$DATA/runner/program_hook.lua" "$work/ph.lua"
(cd "$work" && "$LF" -q --mode trace -o ph.folded ph.lua > ph.out 2> ph.err) || fail "program hook: $(cat "$work/ph.err")"
[ "$(cat "$work/ph.out")" = "$(cd "$work" && "$LUA" ph.lua)" ] || fail "program hook: output <$(cat "$work/ph.out")>"
for want in 'ph.lua ph.lua:0;a ph.lua:7 1000' 'ph.lua ph.lua:0;\[C\] pcall 5'; do
  grep -q "^$want\$" "$work/ph.calls.folded" || fail "program hook: no <$want> in $(cat "$work/ph.calls.folded")"
done
out=$(cd "$work" && "$LF" -q --mode trace -o gh.folded /dev/stdin <<'LUA'
local function f() end
debug.sethook(f, "cl", 7)
local h, m, c = debug.gethook()
print(h == f, m, c)
debug.sethook()
print(debug.gethook())
LUA
)
[ "$out" = "$(printf 'true\tcl\t7\nnil\t\t0')" ] || fail "program hook: debug.gethook said <$out>"

# 3. Sample mode with the JIT on: a 75/25 split of CPU time between two
# functions the JIT compiles lands in compiled code ([JIT]) in that ratio.
cat > "$work/split.lua" <<'LUA'
local function spin(n) local s = 0 for i = 1, n do s = s + (i * i) % 7 end return s end
local function three() local r = spin(3e6) return r end
local function one() local r = spin(1e6) return r end
local t = 0
for _ = 1, 100 do t = t + three() + one() end
print(t > 0)
LUA
(cd "$work" && "$LF" -o split.folded split.lua > /dev/null 2> split.err) || fail "split: $(cat "$work/split.err")"
a=$(grep '^split.lua [^;]*;three split.lua:2;spin split.lua:1;\[JIT\] ' "$work/split.folded" | awk '{s+=$NF} END {print s+0}')
b=$(grep '^split.lua [^;]*;one split.lua:3;spin split.lua:1;\[JIT\] ' "$work/split.folded" | awk '{s+=$NF} END {print s+0}')
all=$(awk '{s+=$NF} END {print s+0}' "$work/split.folded")
awk -v a="$a" -v b="$b" -v all="$all" 'BEGIN {
  r = a / (a + b); exit !(a + b > 0.9 * all && a + b >= 200 && r > 0.65 && r < 0.85) }' ||
  fail "split: three $a one $b of $all samples (want 75% +-10 of the [JIT] samples): $(cat "$work/split.folded")"
# Samples recorded per ms of the thread's CPU: 0.8 to 1.2 at 999 Hz (a late
# wake-up of the timer on a busy machine makes fewer, heavier samples, never fewer periods).
rate=$(sed -n 's/.* \([0-9]*\) recorded over \([0-9.]*\) s of clock.*/\1 \2/p' "$work/split.err")
awk -v r="$rate" 'BEGIN { split(r, v, " "); x = v[1] / (v[2] * 1000); exit !(x >= 0.8 && x <= 1.2) }' ||
  fail "split: $rate (samples, s of CPU): want 0.8 to 1.2 samples per ms: $(cat "$work/split.err")"
# Regression: the summary named LuaJIT's sampler "kernel timer"; our timer thread sends the signals.
grep -q 'recorded over [0-9.]* s of clock; polling thread)' "$work/split.err" ||
  fail "split: the summary does not name the timer thread: $(cat "$work/split.err")"

# 4. Coroutines sit under their resumer, in both kinds.
cat > "$work/co.lua" <<'LUA'
local function work(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local gen = coroutine.wrap(function() while true do coroutine.yield(work(2e5)) end end)
local co = coroutine.create(function() while true do coroutine.yield(work(2e5)) end end)
for _ = 1, 300 do gen() coroutine.resume(co) end
LUA
(cd "$work" && "$LF" -q -o co.folded co.lua)
grep -q '^co.lua co.lua:0;\[C\] <wrapped coroutine>;<anon> co.lua:2;work co.lua:1;' "$work/co.folded" ||
  fail "wrap: not under its resumer: $(cat "$work/co.folded")"
grep -q '^co.lua co.lua:0;\[C\] coroutine.resume;<anon> co.lua:3;work co.lua:1;' "$work/co.folded" ||
  fail "resume: not under its resumer: $(cat "$work/co.folded")"

# 5. require "luaflame" from a stock luajit: the same API and summary.
out=$(cd "$work" && LUA_CPATH="$MODDIR/?.so" "$LUA" -e '
  local lf = require "luaflame"
  local function f() local s = 0 for i = 1, 1e5 do s = s + i end return s end
  local sum, r = lf.profile(function() for _ = 1, 20 do f() end return 7 end, {mode = "both"})
  print(r, sum.mode, sum.calls >= 21, sum.metrics[1], sum.metrics[3], sum.fast_paths_off ~= nil)
  print(pcall(lf.start, {bogus = 1}))
  print(pcall(lf.start, {mode = "alloc"}))
  print(pcall(lf.stop))' 2>&1)
want="7	both	true	samples	calls	true
false	luaflame.start: unknown option 'bogus'"
[[ $out == "$want"* ]] || fail "module: <$out>"
[[ $out == *"alloc mode is not available with LuaJIT"* ]] || fail "alloc refusal: <$out>"
[[ $out == *"luaflame.stop: luaflame is not running"* ]] || fail "stop when stopped: <$out>"

# Regression: os.exit(true, true) killed luaflame-luajit by SIGPROF. lua_close
# stops LuaJIT's profiler (restoring the action it found, by default the
# one that ends the process) before the finalizer that stops our timer
# thread runs; a signal sent in between ended the run (3 of 8 runs with
# 300,000 finalizers to run at close, 5 kHz). The guard installed before
# LuaJIT's profiler starts takes those signals now.
cat > "$work/gcexit.lua" <<'LUA'
local keep, mt = {}, {__gc = function() local x = 0 for i = 1, 200 do x = x + i end end}
for i = 1, 300000 do keep[i] = setmetatable({}, mt) end
local x = 0
for i = 1, 1e7 do x = x + i % 7 end
print("done", x > 0)
os.exit(true, true)
LUA
for i in 1 2 3 4 5 6; do
  (cd "$work" && "$LF" -q --hz 5000 -o gcexit.folded gcexit.lua > gcexit.out 2> gcexit.err)
  rc=$?
  [[ $rc == 0 && $(cat "$work/gcexit.out") == "done	true" ]] ||
    fail "os.exit(true, true) under 5 kHz sampling, run $i: status $rc, <$(cat "$work/gcexit.out" "$work/gcexit.err")>"
done

# 7. fork with Debian's lua-posix (its 5.1 build, which luajit loads; issue 27):
# the child runs on unprofiled and reports nothing of the parent's (one summary,
# the parent's); both print what they print unprofiled, status 0.
cat > "$work/fork.lua" <<'LUA'
local unistd, wait = require "posix.unistd", require "posix.sys.wait"
local function spin(n) local x = 0 for i = 1, n do x = x + i % 3 end return x end
spin(3e6)
local pid = unistd.fork()
if pid == 0 then spin(3e6) print("child") io.stdout:flush() os.exit(0) end
local _, how, status = wait.wait(pid)
spin(3e6)
print("parent", how, status)
LUA
if "$LUA" -e 'require "posix.unistd"' 2>/dev/null; then
  a=$(cd "$work" && "$LUA" fork.lua 2>&1; echo "rc=$?")
  # Under the sanitize job: no leak check in this run. LeakSanitizer in a child
  # forked from a threaded process cannot stop the threads it inherited the
  # records of ("Running thread ... was not suspended"), a report of its own.
  b=$(cd "$work" && ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" "$LF" -o fork.folded fork.lua 2> fork.err; echo "rc=$?")
  [ "$a" = "$b" ] || fail "fork: <$a> vs <$b>"
  [ "$(grep -c '^luaflame: sample mode' "$work/fork.err")" = 1 ] || fail "fork: summaries: <$(cat "$work/fork.err")>"
else
  fail "fork: lua-posix is not installed (scripts/install-deps.sh --test installs it)"
fi

# Finalizers: their periods told by the handler (jsampler.cpp, g_gc), none
# lost at stop (vm_test_lib.sh: vm_finalizer_check). LuaJIT's own profiler
# makes no count hook: no program hook check here (a count hook does not
# fire in compiled code).
vm_finalizer_check "[gc] finalizer" "$LF"

vm_test_end "LuaJIT collector"
