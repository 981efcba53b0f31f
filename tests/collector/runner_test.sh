#!/usr/bin/env bash
# Integration: `luaflame run` against the real lua5.4, and luaflame.so from
# a stock lua5.4. Usage: runner_test.sh LUAFLAME LUA MODULE_DIR DATA_DIR
set -u
. "$(dirname "$0")/vm_test_lib.sh"
vm_test_setup "$@"

# 1. Same stdout, stderr and exit status as lua5.4, in every mode.
vm_parity luaflame "$LF" run

# 2. A script on standard input ('-').
a=$(echo 'print("stdin", ...)' | "$LUA" - x y 2>&1; echo "rc=$?")
b=$(cd "$work" && echo 'print("stdin", ...)' | "$LF" run -q - x y 2>&1; echo "rc=$?")
[ "$a" = "$b" ] || fail "stdin script: <$a> vs <$b>"

# 2b. Everything after the script name is the script's, untouched, even when it
# looks like luaflame's own options (argument parsing is CLI11's prefix mode).
a=$(cd "$work" && echo 'print(select("#", ...), ...)' > args.lua && "$LUA" args.lua --hz 5 -- -q "two words" --help -o)
b=$(cd "$work" && "$LF" run -q -o args.folded args.lua --hz 5 -- -q "two words" --help -o)
[ "$a" = "$b" ] || fail "script arguments: <$a> vs <$b>"
b=$(cd "$work" && "$LF" run -q -o args.folded -- args.lua -x)
[ "$b" = "$(printf '1\t-x')" ] || fail "-- before the script: <$b>"
# Regression (issue 27): --tag K=V right before the script took the script as a
# second tag ("no script given"); each --tag takes one value.
b=$(cd "$work" && "$LF" run -q -o args.folded --tag a=b --tag c=d args.lua -x 2>&1)
[ "$b" = "$(printf '1\t-x')" ] || fail "--tag before the script: <$b>"

# 3. Output files: the first metric in the file, the others beside it.
(cd "$work" && rm -f *.folded && "$LF" run -q --mode both --hz 999 -o out.folded "$DATA/runner/ok.lua" > /dev/null)
[ -e "$work/out.folded" ] || fail "--mode both: out.folded missing"  # may be empty: ok.lua runs < 1 ms
for f in out.time.folded out.calls.folded; do
  [ -s "$work/$f" ] || fail "--mode both: $f missing or empty"
done
grep -q '^ok.lua [^;]*ok.lua:0;\[C\] tostring 1000$' "$work/out.calls.folded" ||
  fail "calls: tostring should be called 1000 times: $(cat "$work/out.calls.folded")"
grep -q ';' "$work/out.time.folded" || fail "time: no stacks"

# 4. os.exit still writes the profile; the report goes to stderr.
(cd "$work" && rm -f *.folded && "$LF" run --mode trace -o exit.folded "$DATA/runner/exit_code.lua" > /dev/null 2> report.txt)
[ -s "$work/exit.folded" ] || fail "os.exit: exit.folded not written"
grep -q "luaflame: trace mode" "$work/report.txt" || fail "os.exit: no report: $(cat "$work/report.txt")"

# 5. Options: bad values are refused with a clear message and status 2.
out=$("$LF" run --hz fast "$DATA/runner/ok.lua" 2>&1); rc=$?
[ $rc = 2 ] && [[ $out == *"option 'hz'"* ]] || fail "--hz fast: rc=$rc <$out>"
out=$("$LF" run --hz 50000 "$DATA/runner/ok.lua" 2>&1); rc=$?  # issue 27: 50 kHz hung the program
[ $rc = 2 ] && [[ $out == *"from 1 to 10000"* ]] || fail "--hz 50000: rc=$rc <$out>"
out=$(LUAFLAME_CLOCK=sundial "$LF" run "$DATA/runner/ok.lua" 2>&1); rc=$?
[ $rc = 2 ] && [[ $out == *LUAFLAME_CLOCK* ]] || fail "LUAFLAME_CLOCK=sundial: rc=$rc <$out>"

# 6. require "luaflame" from a stock lua5.4, options from the environment.
cat > "$work/mod.lua" <<'LUA'
local lf = require "luaflame"
assert(not lf.running())
local ok, err = pcall(lf.start, {hz = "x"})
assert(not ok and err:find("option 'hz' must be a number"), err)
lf.start{output = "mod.folded"}
assert(lf.running())
local function spin(n) local x = 0 for i = 1, n do x = x + i % 3 end return x end
spin(3000000)
local s = lf.stop()
assert(s.mode == "trace", "LUAFLAME_MODE should give trace, got " .. tostring(s.mode))
assert(s.calls > 0 and s.files[1] == "mod.folded" and s.files[2] == "mod.calls.folded")
assert(s.hook_ns > 0 and s.memory_bytes > 0)
lf.start{mode = "sample"}
spin(20000000)
local s2 = lf.stop()
assert(s2.sample_events > 0 and s2.samples >= s2.sample_events, "no samples")
print("module ok", s2.hz_delivered > 0)
LUA
out=$(cd "$work" && LUAFLAME_MODE=trace LUA_CPATH="$MODDIR/?.so" "$LUA" mod.lua 2>&1)
[ "$out" = "module ok	true" ] || fail "module: <$out>"
grep -q '^mod.lua mod.lua:0;spin mod.lua:7 1$' "$work/mod.calls.folded" || fail "module: calls file: $(cat "$work/mod.calls.folded")"

# 7. A module session never stopped ends with the state (lua_close) and writes its file.
(cd "$work" && LUA_CPATH="$MODDIR/?.so" "$LUA" -e 'require("luaflame").start{mode="trace", output="atclose.folded"} local t = {} for i = 1, 10 do t[i] = i end')
[ -s "$work/atclose.folded" ] || fail "session left running: atclose.folded not written at lua_close"

# 8. Ctrl-C: "interrupted!" as lua5.4 reports it, status 1.
printf 'local x = 0\nwhile true do x = x + 1 end\n' > "$work/loop.lua"
for cmd in "$LUA" "$LF run -q --mode trace -o $work/int.folded"; do
  (cd "$work" || exit; $cmd loop.lua 2> int.err & pid=$!; sleep 0.5; kill -INT $pid; wait $pid; echo $? > int.rc)
  [ "$(cat "$work/int.rc")" = 1 ] && [ "$(head -1 "$work/int.err")" = "lua5.4: interrupted!" ] ||
    fail "SIGINT ($cmd): status $(cat "$work/int.rc"), <$(head -1 "$work/int.err")>"
done

# 9. An output path that is not a regular file (a FIFO here; /dev/null as root
# was replaced by a regular file, issue 27) is written in place, not renamed over.
mkfifo "$work/pipe.folded"
(cat "$work/pipe.folded" > "$work/from_pipe.txt" &)
"$LF" run -q --mode trace -o "$work/pipe.folded" "$DATA/runner/ok.lua" > /dev/null
sleep 0.2
[ -p "$work/pipe.folded" ] || fail "-o FIFO: the FIFO was replaced"
grep -q 'tostring' "$work/from_pipe.txt" || fail "-o FIFO: nothing came through: $(cat "$work/from_pipe.txt")"

# 10. --lines charges the line the thread was on (vm_test_lib.sh: vm_lines_check).
vm_lines_check "$LF" run

# 11. Two functions defined on one line are two frames (vm_test_lib.sh: vm_oneline_check).
vm_oneline_check "$LF" run

# 12. Finalizers and the program's own hook (vm_test_lib.sh: vm_finalizer_check, vm_gc_work_check, vm_program_hook_check).
vm_finalizer_check "finalize fin.lua:2;spin fin.lua:1" "$LF" run
vm_gc_work_check "finalize gcfin.lua:2;spin gcfin.lua:1" "$LF" run
vm_program_hook_check "my_hook hook.lua:1" "$LF" run
vm_hook_before_start_check
vm_sethook_again_check "$LF" run

# 12. The main chunk's locals are live at stop (vm_test_lib.sh: vm_chunk_live_check).
vm_chunk_live_check "$LF" run

# 13. The HTTP transport (collector/http/transport.h) is loaded to stream
# only: a run without a server maps neither it nor OpenSSL; one with a
# server (a closed port) loads it; a luaflame.so copied alone says so and
# keeps the run in its fallback file, or finds it by LUAFLAME_HTTP_LIB.
cat > "$work/mapped.lua" <<'LUA'
-- Whether a file whose path holds `name` is mapped into this process.
return function(name)
  local f = assert(io.open("/proc/self/maps"))
  local s = f:read("a")
  f:close()
  return s:find(name, 1, true) ~= nil
end
LUA
cat > "$work/transport.lua" <<'LUA'
local lf = require "luaflame"
local mapped = dofile("mapped.lua")
lf.start{output = "t1.folded"}
local before = mapped("libluaflame-http") or mapped("libssl")
lf.stop()
lf.start{server = "http://127.0.0.1:9", output = "t2.folded"}
local during = mapped("libluaflame-http")
local s = lf.stop()
print(before, during, s.stream_error, s.fallback_file ~= nil)
LUA
out=$(cd "$work" && LUA_CPATH="$MODDIR/?.so" "$LUA" transport.lua 2>&1)
case $out in
  "false	true	cannot reach http://127.0.0.1:9: connection refused"*"	true") ;;
  *) fail "transport: loaded before a stream, or not for one: <$out>" ;;
esac
mkdir -p "$work/solo" && cp "$MODDIR/luaflame.so" "$work/solo/"
out=$(cd "$work" && LUA_CPATH="$work/solo/?.so" "$LUA" transport.lua 2>&1)
case $out in
  "false	false	cannot stream to http://127.0.0.1:9: libluaflame-http.so is not installed beside luaflame"*"	true") ;;
  *) fail "transport: a module alone: <$out>" ;;
esac
out=$(cd "$work" && LUAFLAME_HTTP_LIB="$MODDIR/libluaflame-http.so" LUA_CPATH="$work/solo/?.so" "$LUA" transport.lua 2>&1)
case $out in
  "false	true	cannot reach http://127.0.0.1:9: connection refused"*"	true") ;;
  *) fail "transport: a module alone, LUAFLAME_HTTP_LIB naming the transport: <$out>" ;;
esac

# 14. The pprof writer (collector/pprof/pprof_writer.h) likewise: a run that
# writes no .pb.gz maps neither it nor libprotobuf; one that does loads it;
# a luaflame.so copied alone refuses a .pb.gz output at start, by name.
cat > "$work/pprof.lua" <<'LUA'
local lf = require "luaflame"
local mapped = dofile("mapped.lua")
lf.start{output = "p1.folded", quiet = true}
lf.stop()
local before = mapped("libprotobuf") or mapped("libluaflame-pprof")
local ok, err = pcall(lf.start, {output = "p2.pb.gz", quiet = true})
local during = mapped("libluaflame-pprof") and mapped("libprotobuf")
if ok then lf.stop() end
local f = io.open("p2.pb.gz", "rb")
print(before, during, ok, f and #f:read("a") > 0, err)
LUA
out=$(cd "$work" && rm -f p2.pb.gz && LUA_CPATH="$MODDIR/?.so" "$LUA" pprof.lua 2>&1)
[ "$out" = "false	true	true	true	nil" ] || fail "pprof writer: loaded before a .pb.gz output, or not for one: <$out>"
out=$(cd "$work" && rm -f p2.pb.gz && LUA_CPATH="$work/solo/?.so" "$LUA" pprof.lua 2>&1)
case $out in
  "false	false	false	nil	"*"option 'output': cannot write pprof: libluaflame-pprof.so is not installed beside luaflame (LUAFLAME_PPROF_LIB names it), got 'p2.pb.gz'") ;;
  *) fail "pprof writer: a module alone: <$out>" ;;
esac

# Live bytes against the VM's own count (vm_test_lib.sh: vm_live_count_check).
vm_live_count_check "$LF" run

vm_test_end "runner and module"
