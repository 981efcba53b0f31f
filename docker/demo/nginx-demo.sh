#!/usr/bin/env bash
# luaflame-nginx-demo: the compose file's `nginx-demo` service (docs/luajit.md).
# Runs Debian's nginx with ngx_http_lua (LuaJIT), the collector started in
# every worker by init_worker_by_lua_block and streaming to the server (one
# live run per worker, tagged with pid and host). Each worker also serves
# itself a request's work every 20 ms from a timer, so the runs fill without
# a load tool; `curl http://127.0.0.1:8081/` adds real requests.
# Settings (environment):
#   LUAFLAME_SERVER  the server (default http://server:8080)
#   LUAFLAME_TOKEN   the server's write token, when it has one
#   DEMO_PORT        nginx's port (default 8081)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
share="$(cd "$here/../share/luaflame/nginx-demo" && pwd)"
prefix="$(mktemp -d)"
user=""; [ "$(id -u)" = 0 ] && user="user root;"
sed -e "s#@PREFIX@#$prefix#g" -e "s#@SHARE@#$share#g" -e "s#@USER@#$user#g" \
    -e "s#@SERVER@#${LUAFLAME_SERVER:-http://server:8080}#g" -e "s#@PORT@#${DEMO_PORT:-8081}#g" \
    -e "s#@CPATH@#$here/../lib/lua/5.1#g" "$share/nginx.conf.in" >"$prefix/nginx.conf"
# Wait (at most DEMO_WAIT seconds, 120) for the server: the workers start
# their profiles once, at start (podman-compose 1.0.3 ignores depends_on's condition).
addr="${LUAFLAME_SERVER:-http://server:8080}"; addr="${addr#*://}"; addr="${addr%%/*}"
for _ in $(seq "${DEMO_WAIT:-120}"); do
  LUAFLAME_HEALTH_TIMEOUT=1 "$here/luaflame-healthcheck" "$addr" 2>/dev/null && break
  sleep 1
done
exec nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log"
