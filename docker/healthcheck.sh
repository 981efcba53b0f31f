#!/usr/bin/env bash
# luaflame-healthcheck [HOST:PORT]: exits 0 when luaflame-server answers
# GET /healthz with 200 and {"status":"ok"}, else 1 with the reason on stderr.
# Plain bash (/dev/tcp), so the slim runtime image needs no curl. The address
# defaults to 127.0.0.1 and the port of $LUAFLAME_HEALTH_ADDR, else 8080.
set -uo pipefail
addr="${1:-${LUAFLAME_HEALTH_ADDR:-127.0.0.1:8080}}"
host="${addr%:*}"
port="${addr##*:}"
timeout_s="${LUAFLAME_HEALTH_TIMEOUT:-3}"

# Connects, asks, and reads the whole answer within the time limit.
answer="$(timeout "$timeout_s" bash -c '
  exec 3<>"/dev/tcp/$1/$2" || exit 1
  printf "GET /healthz HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n" "$1:$2" >&3
  cat <&3' _ "$host" "$port" 2>/dev/null)"
if [ -z "$answer" ]; then
  echo "luaflame-healthcheck: no answer from $host:$port within ${timeout_s}s" >&2
  exit 1
fi
status_line="${answer%%$'\r'*}"
case "$status_line" in
  "HTTP/1."?" 200"*) ;;
  *) echo "luaflame-healthcheck: $host:$port answered '$status_line'" >&2; exit 1 ;;
esac
body="${answer#*$'\r\n\r\n'}"
if [[ "$body" != *'"status"'*'"ok"'* ]]; then
  echo "luaflame-healthcheck: unexpected body: ${body:0:200}" >&2
  exit 1
fi
exit 0
