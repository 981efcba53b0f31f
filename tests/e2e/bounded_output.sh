#!/usr/bin/env bash
# Bounded output: a traced 100,000-deep recursion (about 100 GB of folded
# text uncut) is cut at max_output with a "[luaflame] truncated" frame that
# keeps the totals; the default output (luaflame.svg) stays bounded too; a
# file that cannot be written is named with its reason, and `luaflame run`
# exits 3 only when the program itself succeeded (else the program's status).
# usage: bounded_output.sh LUAFLAME LUA5.4 DEEP_RECURSION.lua
set -uo pipefail
luaflame=$1 lua=$2 deep=$(realpath "$3")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fails=0 passes=0
check() { if eval "$2"; then passes=$((passes + 1)); else echo "FAIL: $1"; fails=$((fails + 1)); fi; }

"$lua" "$deep" >lua.out 2>lua.err; lua_rc=$?
limit=8000000
"$luaflame" run -q --mode trace -o deep.folded --max_output $limit "$deep" >lf.out 2>lf.err; rc=$?
check "status $rc, lua5.4 $lua_rc" '[ $rc = $lua_rc ]'
check "stdout differs" 'cmp -s lua.out lf.out'
for f in deep.folded deep.calls.folded; do
  size=$(stat -c %s $f 2>/dev/null || echo missing)
  check "$f: $size bytes, limit $limit" '[ "$size" != missing ] && [ "$size" -le $limit ]'
  check "$f: no truncated frame" 'grep -q "\[luaflame\] truncated [0-9]*$" $f'
  check "$f: no message naming it" 'grep -q "$f: cut at the output limit" lf.err'
done
# Totals kept: every call counted once, dropped levels in the truncated frame.
calls=$(awk '{ s += $NF } END { print s }' deep.calls.folded)
check "calls file sums to $calls, not 100004 (100,000 levels, the chunk, print, tonumber, ...)" '[ "$calls" -ge 100001 ]'
"$luaflame" run --mode trace -o again.folded --max_output $limit "$deep" >/dev/null 2>again.err
traced=$(grep -o '[0-9]* calls traced' again.err | cut -d' ' -f1)
calls2=$(awk '{ s += $NF } END { print s }' again.calls.folded)
check "summary says $traced calls, file holds $calls2" '[ "$traced" = "$calls2" ]'

# The default output: luaflame.svg, bounded by the default limit.
"$luaflame" run -q --mode trace "$deep" >/dev/null 2>svg.err; rc=$?
size=$(stat -c %s luaflame.svg 2>/dev/null || echo missing)
check "luaflame.svg: rc $rc, $size bytes ($(cat svg.err))" '[ $rc = 0 ] && [ "$size" != missing ] && [ "$size" -le 536870912 ]'
check "luaflame.svg not an SVG" 'tail -c 10 luaflame.svg | grep -q "</svg>"'

# Failures to write: named, with the reason; status 3 only when the program succeeded.
"$luaflame" run -q --mode trace -o /nonexistent-dir/p.svg "$deep" 10 >/dev/null 2>err1; rc=$?
check "unwritable, program ok: rc $rc <$(cat err1)>" '[ $rc = 3 ] && grep -q "/nonexistent-dir/p.svg.*No such file or directory" err1'
echo 'error("boom")' >fail.lua
"$luaflame" run -q --mode trace -o /nonexistent-dir/p.svg fail.lua >/dev/null 2>err2; rc=$?
check "unwritable, program failed: rc $rc (the program's 1)" '[ $rc = 1 ] && grep -q "/nonexistent-dir/p.svg" err2'
# pprof: written by the engine's write_pprof, read back by `luaflame svg` (and go tool pprof when installed).
"$luaflame" run -q --mode trace -o p.pb.gz "$deep" 10 >/dev/null 2>err3; rc=$?
check "pprof written: rc $rc <$(cat err3)>" '[ $rc = 0 ] && [ "$(head -c 2 p.pb.gz | od -An -tx1 | tr -d " ")" = 1f8b ]'
"$luaflame" svg p.pb.gz >p.svg 2>err4; rc=$?
check "pprof read back by luaflame svg: rc $rc <$(cat err4)>" '[ $rc = 0 ] && grep -q "</svg>" p.svg && [ "$(grep -c "<title>" p.svg)" -gt 3 ]'
if command -v go >/dev/null; then
  types=$(go tool pprof -raw p.pb.gz 2>&1 | sed -n '/^Samples:/{n;p;q}')
  check "go tool pprof reads the sample types: <$types>" 'echo "$types" | grep -q "cpu/nanoseconds"'
fi
echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
