#!/bin/sh
# The stand-in PostgreSQL's start (postgres.Dockerfile): a cluster made on the
# first start with POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB, password
# logins from the network, then the server in the foreground as `postgres`.
set -eu
data=/var/lib/postgresql/data
mkdir -p "$data" /run/postgresql
chown postgres:postgres "$data" /run/postgresql
chmod 700 "$data"
if [ ! -s "$data/PG_VERSION" ]; then
  pw=$(mktemp) && printf '%s\n' "${POSTGRES_PASSWORD:?}" >"$pw" && chown postgres "$pw"
  su postgres -c "initdb -D $data -U '${POSTGRES_USER:-postgres}' --pwfile=$pw -A scram-sha-256" >/dev/null
  rm -f "$pw"
  echo "host all all 0.0.0.0/0 scram-sha-256" >>"$data/pg_hba.conf"
  su postgres -c "pg_ctl -D $data -o '-c listen_addresses=' -w start" >/dev/null
  [ "${POSTGRES_DB:-}" = "" ] || su postgres -c "PGPASSWORD='$POSTGRES_PASSWORD' createdb -h /run/postgresql -U '${POSTGRES_USER:-postgres}' '$POSTGRES_DB'"
  su postgres -c "pg_ctl -D $data -m fast -w stop" >/dev/null
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$data" -c listen_addresses='*'
