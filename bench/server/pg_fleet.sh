#!/usr/bin/env bash
# The fleet benchmark (store_bench fleet) on PostgreSQL, with one and with two
# "servers" (store_bench processes, each a Store on the same database: the second
# takes half the services), plus the database's own CPU (postmaster and its
# backends, from /proc) and disk. A fresh PostgreSQL per configuration
# (bench/server/pg_temp.sh). Prints everything; bounded by the arguments.
#   bench/server/pg_fleet.sh BUILD_DIR [DAYS] [INTERVAL] [SERVICES] [STACKS]
set -euo pipefail
build="${1:?BUILD_DIR}"; days="${2:-30}"; interval="${3:-14400}"; services="${4:-50}"; stacks="${5:-500}"
here="$(cd "$(dirname "$0")" && pwd)"
bench="$build/bench/server/store_bench"
tick="$(getconf CLK_TCK)"
# utime+stime+cutime+cstime of the postmaster (backends that ended are in its children's times)
# plus those of its live children, in seconds.
pg_cpu() {
  local pm; pm="$(head -1 "$1/data/postmaster.pid")"
  { awk '{print $14+$15+$16+$17}' "/proc/$pm/stat"
    for c in $(pgrep -P "$pm"); do awk '{print $14+$15}' "/proc/$c/stat" 2>/dev/null || true; done
  } | awk -v t="$tick" '{s+=$1} END {printf "%.1f", s/t}'
}
for n in 1 2; do
  dir="$(mktemp -d /tmp/lf-pgfleet-XXXXXX)"; rmdir "$dir"
  url="$("$here/pg_temp.sh" start "$dir")"
  trap '"$here/pg_temp.sh" stop "$dir"' EXIT
  echo "== PostgreSQL, $n server(s): $services services, $days days, interval $interval s, $stacks stacks"
  c0="$(pg_cpu "$dir")"; t0="$(date +%s.%N)"
  if [ "$n" = 1 ]; then
    "$bench" --store "$url" fleet --services "$services" --days "$days" --interval "$interval" --stacks "$stacks"
  else
    half=$((services / 2))
    "$bench" --store "$url" fleet --services "$half" --days "$days" --interval "$interval" --stacks "$stacks" \
      > "$dir.a" 2>&1 &
    a=$!
    "$bench" --store "$url" fleet --services "$((services - half))" --first "$half" --days "$days" \
      --interval "$interval" --stacks "$stacks" > "$dir.b" 2>&1
    wait "$a"
    echo "-- server A"; cat "$dir.a"; echo "-- server B"; cat "$dir.b"; rm -f "$dir.a" "$dir.b"
  fi
  t1="$(date +%s.%N)"
  sleep 2  # the bench's backends end and are reaped: their CPU moves into the postmaster's cutime
  c1="$(pg_cpu "$dir")"
  echo "wall $(echo "$t1 - $t0" | bc) s; PostgreSQL CPU $(echo "$c1 - $c0" | bc) s;" \
       "database $(psql -At "$url" -c "SELECT pg_database_size(current_database())") bytes;" \
       "buckets $(psql -At "$url" -c "SELECT COUNT(*) FROM buckets") rows"
  "$here/pg_temp.sh" stop "$dir"; trap - EXIT
done
