#!/usr/bin/env bash
# What a newcomer does, on a fresh clone of this checkout's HEAD: README's two
# commands in README's order.
#   1. bash scripts/run.sh, until /healthz answers. The one liberty taken: the
#      address, LUAFLAME_LISTEN=127.0.0.1:0 with --port-file (run.sh passes
#      its arguments to the server), so it never collides with a server of
#      another test or of the machine's owner on 8080.
#   2. bash scripts/test.sh with a small selection (ctest -R, the wire tests):
#      it must build the tests, run every test of the selection, say so, and
#      exit 0. Today's bug it guards: run.sh cached LUAFLAME_TESTS=OFF and
#      test.sh then ran no test and exited 0.
#   3. bash scripts/test.sh with a selection that matches no test: must fail.
# Both builds go through ccache (scripts/build-env.sh), so they take the
# suite's own objects instead of compiling the project again.
# usage: newcomer_test.sh REPO_ROOT        (exit 77: not a git checkout)
set -uo pipefail
root=$1
source "$(dirname "$0")/lib.sh"
git -C "$root" rev-parse --verify -q HEAD >/dev/null || { echo "SKIP: $root is not a git checkout"; exit 77; }
clone="$SHIP_TMP/clone"
git clone -q "$root" "$clone" || { fail "git clone"; ship_finish; }
cd "$clone" || exit 1
unset LUAFLAME_TOKEN LUAFLAME_SERVER LUAFLAME_DATA

# 1. Command 1, until /healthz answers.
LUAFLAME_LISTEN=127.0.0.1:0 bash scripts/run.sh --port-file "$SHIP_TMP/port" --log-level warn \
  >"$SHIP_TMP/run.out" 2>&1 &
SHIP_SERVER_PID=$!
up=""
for _ in $(seq 2400); do  # 20 minutes at most: a cold cache compiles everything
  kill -0 "$SHIP_SERVER_PID" 2>/dev/null || break
  if [ -s "$SHIP_TMP/port" ] && curl -fsS --max-time 2 "http://127.0.0.1:$(cat "$SHIP_TMP/port")/healthz" \
       >/dev/null 2>&1; then
    up=yes; break
  fi
  sleep 0.5
done
[ -n "$up" ] && pass "command 1 (scripts/run.sh) serves /healthz after $SECONDS s" ||
  { fail "command 1 never answered /healthz"; tail -n 40 "$SHIP_TMP/run.out" >&2; }
ship_cleanup_server() {
  kill -TERM "$SHIP_SERVER_PID" 2>/dev/null; wait "$SHIP_SERVER_PID" 2>/dev/null; SHIP_SERVER_PID=""
}
ship_cleanup_server
[ -d data ] && pass "its store is ./data, as README says" || fail "no ./data after command 1"

# 2. Command 2 with a small selection: every selected test ran and passed.
run_cmd test bash scripts/test.sh -R '^wire: '
expect_rc 0 "command 2 (scripts/test.sh -R '^wire: ')"
selected=$(ctest --test-dir build -N -R '^wire: ' | sed -n 's/^Total Tests: *//p')
[ "${selected:-0}" -gt 0 ] && pass "the selection holds $selected tests" || fail "the selection holds no test"
expect_match "$OUT" "100% tests passed, 0 tests failed out of $selected\$" "ctest ran all $selected"
expect_match "$OUT" "test.sh: $selected of $selected registered tests ran: $selected passed" "test.sh says so"
[ "$RC" -eq 0 ] || tail -n 40 "$SHIP_TMP/test.out" "$SHIP_TMP/test.err" >&2

# 3. A selection that matches nothing must fail, never report success.
run_cmd none bash scripts/test.sh -R '^no such test$'
[ "$RC" -ne 0 ] && pass "command 2 that runs no test fails (exit $RC)" ||
  fail "command 2 ran no test and exited 0"
ship_finish
