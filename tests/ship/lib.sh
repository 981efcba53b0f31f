# Helpers the ship tests share (sourced): a real luaflame-server on a free
# loopback port with a fresh data folder, stopped when the test exits, and
# small assertions that say what they expected.
set -uo pipefail

SHIP_TMP="$(mktemp -d "${TMPDIR:-/tmp}/luaflame-ship.XXXXXX")"
SHIP_SERVER_PID=""
SHIP_FAILED=0

ship_cleanup() {
  if [ -n "$SHIP_SERVER_PID" ]; then
    kill -TERM "$SHIP_SERVER_PID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$SHIP_SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SHIP_SERVER_PID" 2>/dev/null
  fi
  [ -n "${SHIP_KEEP:-}" ] && echo "kept $SHIP_TMP" >&2 || rm -rf "$SHIP_TMP"
}
trap ship_cleanup EXIT

fail() { echo "FAIL: $*" >&2; SHIP_FAILED=1; }
pass() { echo "ok: $*"; }

source "$(dirname "${BASH_SOURCE[0]}")/../support/server.sh"

# start_server BINARY [FLAGS...]: sets SHIP_URL (http://127.0.0.1:PORT) and
# SHIP_DATA (tests/support/server.sh: port 0, read from the server's port
# file). With SHIP_AS_UID set (and root), the server runs as that user, as in
# the image.
start_server() {
  local bin="$1"; shift
  SHIP_DATA="$SHIP_TMP/server/data"
  mkdir -p "$SHIP_DATA"
  LF_SERVER_WRAP=(env -u LUAFLAME_TOKEN -u LUAFLAME_SERVER)  # the server reads LUAFLAME_* too
  if [ -n "${SHIP_AS_UID:-}" ]; then
    chmod 755 "$SHIP_TMP"
    chown "$SHIP_AS_UID:$SHIP_AS_UID" "$SHIP_TMP/server" "$SHIP_DATA"
    LF_SERVER_WRAP=(setpriv --reuid="$SHIP_AS_UID" --regid="$SHIP_AS_UID" --clear-groups "${LF_SERVER_WRAP[@]}")
  fi
  lf_server_start "$SHIP_TMP/server" "$bin" --log-level warn "$@" || return 1
  SHIP_SERVER_PID=$LF_SERVER_PID
  SHIP_URL=$LF_URL
  ln -sf "$SHIP_TMP/server/server.log" "$SHIP_TMP/server.log"
}

# run_cmd NAME CMD...: runs CMD with stdout in $SHIP_TMP/NAME.out, stderr in
# NAME.err, and its exit status in RC.
run_cmd() {
  local name="$1"; shift
  "$@" >"$SHIP_TMP/$name.out" 2>"$SHIP_TMP/$name.err"
  RC=$?
  OUT="$(cat "$SHIP_TMP/$name.out")"
  ERR="$(cat "$SHIP_TMP/$name.err")"
}

expect_rc() {  # expect_rc WANT WHAT
  if [ "$RC" -eq "$1" ]; then pass "$2: exit $RC"
  else fail "$2: exit $RC, wanted $1; stdout: ${OUT:0:600} stderr: ${ERR:0:600}"; fi
}
expect_match() {  # expect_match TEXT REGEX WHAT
  if grep -Eq -- "$2" <<<"$1"; then pass "$3"
  else fail "$3: /$2/ not found in: ${1:0:800}"; fi
}
expect_empty() {  # expect_empty TEXT WHAT
  if [ -z "$1" ]; then pass "$2"; else fail "$2: got '${1:0:400}'"; fi
}
expect_no_match() {
  if grep -Eq -- "$2" <<<"$1"; then fail "$3: /$2/ found in: ${1:0:800}"
  else pass "$3"; fi
}

# Values out of the server's JSON answers without a JSON tool (none is a
# project dependency): the first "KEY": value, good enough for flat answers.
json_num() {  # json_num JSON KEY: the first number after "KEY":
  printf '%s' "$1" | grep -Eo "\"$2\"[[:space:]]*:[[:space:]]*-?[0-9.eE+-]+" | head -n1 | sed -E 's/.*:[[:space:]]*//'
}
json_str() {  # json_str JSON KEY: the first string after "KEY":
  printf '%s' "$1" | grep -Eo "\"$2\"[[:space:]]*:[[:space:]]*\"[^\"]*\"" | head -n1 | sed -E 's/.*:[[:space:]]*"//; s/"$//'
}

ship_finish() {
  if [ "$SHIP_FAILED" -ne 0 ]; then
    echo "--- server log ---" >&2; cat "$SHIP_TMP/server.log" 2>/dev/null | tail -n 40 >&2
    exit 1
  fi
  exit 0
}
