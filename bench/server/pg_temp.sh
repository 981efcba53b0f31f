#!/usr/bin/env bash
# A throwaway PostgreSQL for benchmarks (the tests start their own from C++,
# tests/server/pg_harness.cpp): initdb + pg_ctl into DIR, as user postgres when
# run as root, listening on 127.0.0.1 only.
#   bench/server/pg_temp.sh start DIR [PORT]   prints the store URL (postgresql://...)
#   bench/server/pg_temp.sh url DIR            prints it again
#   bench/server/pg_temp.sh db DIR NAME        creates database NAME, prints its URL
#   bench/server/pg_temp.sh stop DIR           stops it and removes DIR
# fsync stays on (the default): the figures are those of a durable store.
set -euo pipefail
cmd="${1:?start|url|db|stop}"
dir="${2:?DIR}"
bin="${LUAFLAME_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)}"
[ -x "$bin/initdb" ] || { echo "pg_temp: PostgreSQL is not installed (apt-get install postgresql)" >&2; exit 1; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
url() { echo "postgresql://luaflame@127.0.0.1:$(cat "$dir/port")/${1:-luaflame}"; }
case "$cmd" in
  start)
    port="${3:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    as_pg "$bin/initdb" -D "$dir/data" -U luaflame -A trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
    echo "$port" > "$dir/port"
    as_pg "$bin/createdb" -h 127.0.0.1 -p "$port" -U luaflame luaflame
    url ;;
  url) url ;;
  db)
    as_pg "$bin/createdb" -h 127.0.0.1 -p "$(cat "$dir/port")" -U luaflame "${3:?NAME}"
    url "$3" ;;
  stop)
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null || true
    rm -rf "$dir" ;;
  *) echo "pg_temp: start|url|db|stop" >&2; exit 2 ;;
esac
