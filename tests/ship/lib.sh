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

# A port nobody listens on now (the server start retries if one is taken meanwhile).
free_port() {
  local p
  for _ in $(seq 100); do
    p=$(( 20000 + RANDOM % 40000 ))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
  done
  return 1
}

# owns_port PID PORT: PID holds the socket listening on PORT (from procfs,
# no tool needed). A /healthz answer alone could come from another test's
# server that took the port first, when this one's bind failed.
owns_port() {
  local hex inode fd
  hex=$(printf '%04X' "$2")
  while read -r inode; do
    for fd in /proc/"$1"/fd/*; do
      [ "$(readlink "$fd" 2>/dev/null)" = "socket:[$inode]" ] && return 0
    done
  done < <(awk -v h=":$hex" '$2 ~ h"$" && $4 == "0A" {print $10}' /proc/net/tcp)
  return 1
}

# start_server BINARY [FLAGS...]: sets SHIP_URL (http://127.0.0.1:PORT) and
# SHIP_DATA; waits until /healthz answers (10 s at most). With SHIP_AS_UID
# set (and root), the server runs as that user, as in the image.
start_server() {
  local bin="$1"; shift
  SHIP_DATA="$SHIP_TMP/data"
  mkdir -p "$SHIP_DATA"
  local wrap=()
  if [ -n "${SHIP_AS_UID:-}" ]; then
    chmod 755 "$SHIP_TMP"
    chown "$SHIP_AS_UID:$SHIP_AS_UID" "$SHIP_DATA"
    wrap=(setpriv --reuid="$SHIP_AS_UID" --regid="$SHIP_AS_UID" --clear-groups)
  fi
  local port attempt
  for attempt in 1 2 3 4 5; do
    port="$(free_port)" || { echo "no free port" >&2; return 1; }
    # The server reads LUAFLAME_* too: give it a clean environment for those.
    "${wrap[@]}" env -u LUAFLAME_TOKEN -u LUAFLAME_SERVER "$bin" --listen "127.0.0.1:$port" --data "$SHIP_DATA" \
      --log-level warn "$@" >"$SHIP_TMP/server.log" 2>&1 &
    SHIP_SERVER_PID=$!
    SHIP_URL="http://127.0.0.1:$port"
    for _ in $(seq 100); do
      if curl -fsS --max-time 2 "$SHIP_URL/healthz" >/dev/null 2>&1 && owns_port "$SHIP_SERVER_PID" "$port"; then
        return 0
      fi
      kill -0 "$SHIP_SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$SHIP_SERVER_PID" 2>/dev/null; wait "$SHIP_SERVER_PID" 2>/dev/null
    SHIP_SERVER_PID=""
    echo "server did not come up on port $port (attempt $attempt):" >&2; cat "$SHIP_TMP/server.log" >&2
  done
  return 1
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
