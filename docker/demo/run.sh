#!/usr/bin/env bash
# luaflame-demo: the compose file's `demo` service. Runs the demo workload
# under `luaflame run`, streaming to the server every second, round after
# round, so the server always has a live run to watch and finished ones to
# compare. Settings (environment):
#   LUAFLAME_SERVER  the server (default http://server:8080, the compose service)
#   DEMO_NAME        the runs' name (default demo)
#   DEMO_SECONDS     CPU seconds per round (default 120)
#   DEMO_ROUNDS      rounds before exiting (default 0: forever)
#   DEMO_WORKLOAD    the Lua script (default: the installed workload.lua)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
server="${LUAFLAME_SERVER:-http://server:8080}"
name="${DEMO_NAME:-demo}"
seconds="${DEMO_SECONDS:-120}"
rounds="${DEMO_ROUNDS:-0}"
# A clean path: the frames of the profile show it.
workload="${DEMO_WORKLOAD:-$(cd "$here/../share/luaflame/demo" 2>/dev/null && pwd)/workload.lua}"
luaflame="${LUAFLAME_BIN:-$here/luaflame}"
[ -x "$luaflame" ] || luaflame=luaflame
# luaflame run reads LUAFLAME_* itself; the flags below are the settings.
unset LUAFLAME_SERVER

# `docker compose stop` sends TERM to this script only: pass it on to the
# profiled run so it ends (and sends what it has), then stop.
child=""
stop() { [ -n "$child" ] && kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null; exit 0; }
trap stop TERM INT

# Wait (at most DEMO_WAIT seconds, 120) for the server: an engine that starts
# the services at once (podman-compose 1.0.3 ignores depends_on's condition)
# must not cost the first round.
wait_server() {
  local addr="${server#*://}" hc="$here/luaflame-healthcheck"
  addr="${addr%%/*}"
  [ -x "$hc" ] || hc=luaflame-healthcheck
  for _ in $(seq "${DEMO_WAIT:-120}"); do
    LUAFLAME_HEALTH_TIMEOUT=1 "$hc" "$addr" 2>/dev/null && return 0
    sleep 1
  done
  echo "luaflame-demo: $server did not answer /healthz; going on" >&2
}
wait_server

round=0
failed=0
while [ "$rounds" -eq 0 ] || [ "$round" -lt "$rounds" ]; do
  round=$((round + 1))
  echo "luaflame-demo: round $round: $workload for ${seconds}s -> $server (name $name)"
  "$luaflame" run --server "$server" --name "$name" --tags "round=$round" \
      --flush-interval 1 -- "$workload" "$seconds" &
  child=$!
  if ! wait "$child"; then
    failed=1
    echo "luaflame-demo: round $round failed" >&2
    [ "$rounds" -eq 0 ] && sleep 5
  fi
  child=""
done
exit "$failed"
