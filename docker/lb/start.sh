#!/bin/sh
# The balancer of the compose profile `scale`: nginx (docker/lb/nginx.conf) in
# front of the servers named in LB_SERVERS.
#
# nginx resolves an upstream's names once, when it loads its configuration: a
# server container that restarted came back at a new address and got no
# traffic, and requests kept waiting on the dead one until the balancer was
# restarted (issue 31). So this script resolves the names itself every
# LB_RESOLVE_SECONDS, writes the upstream block (upstream.conf, beside
# nginx.conf) with the addresses it found, leaving out a name that does not
# resolve (a stopped container), and reloads nginx when they change. A reload
# lets requests in flight finish on the old workers.
#
# Environment:
#   LB_SERVERS          "NAME:PORT ..." (default "server-a:8080 server-b:8080")
#   LB_RESOLVE_SECONDS  how often to resolve them (default 1)
#   LB_CONF_DIR         where nginx.conf is and upstream.conf goes (default /etc/nginx)
#   LB_RESOLVE          a command printing NAME's IPv4 addresses, one per line
#                       (default: getent ahostsv4; tests give their own)
# Arguments: nginx's own (default: -g 'daemon off; error_log /dev/stderr;').
set -eu
conf_dir=${LB_CONF_DIR:-/etc/nginx}
servers=${LB_SERVERS:-server-a:8080 server-b:8080}
every=${LB_RESOLVE_SECONDS:-1}

resolve() {
  if [ -n "${LB_RESOLVE:-}" ]; then
    $LB_RESOLVE "$1" 2>/dev/null || true
  else
    getent ahostsv4 "$1" 2>/dev/null | awk '{print $1}' || true
  fi
}

# The upstream block for the addresses the names have now.
render() {
  echo "upstream luaflame {"
  found=0
  for s in $servers; do
    for a in $(resolve "${s%:*}" | sort -u); do
      echo "  server $a:${s##*:} max_fails=1 fail_timeout=5s;  # ${s%:*}"
      found=1
    done
  done
  # None resolves: nginx needs a server; a down one answers 502 at once.
  [ "$found" = 1 ] || echo "  server 127.0.0.1:9 down;"
  echo "  keepalive 32;"
  echo "}"
}

render >"$conf_dir/upstream.conf"
[ "$#" -gt 0 ] || set -- -g 'daemon off; error_log /dev/stderr;'
nginx -c "$conf_dir/nginx.conf" "$@" &
pid=$!
trap 'kill -QUIT "$pid" 2>/dev/null' TERM INT QUIT
while kill -0 "$pid" 2>/dev/null; do
  sleep "$every" &
  wait $! || true
  next=$(render)
  if [ "$next" != "$(cat "$conf_dir/upstream.conf")" ]; then
    printf '%s\n' "$next" >"$conf_dir/upstream.conf"
    echo "lb: servers now:$(printf '%s\n' "$next" | awk '/^  server /{printf " %s", $2}')" >&2
    kill -HUP "$pid" 2>/dev/null || true
  fi
done
wait "$pid"
