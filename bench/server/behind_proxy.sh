#!/usr/bin/env bash
# Every client behind one proxy address (issue 31): the balancer of the scale
# set (docker/lb/start.sh + nginx.conf, the host's nginx) in front of one
# luaflame-server, UPLOADERS upload threads and READERS graph readers through
# it for SECONDS, once with the server trusting the proxy (--trusted-proxy
# 127.0.0.1: the per-client limits key on X-Forwarded-For) and once without
# (every request counts against the proxy's one address: the issue measured
# 78,874 answers 503 in 60 s, and one log line per refusal).
#
#   bench/server/behind_proxy.sh BUILD_DIR [SECONDS]   (default 30)
# Each load thread is a client of its own behind the proxy (server_load
# --clients-from: X-Forwarded-For 10.N.x.y, which nginx passes on and adds to).
# Environment: UPLOADERS (50), READERS (20), OUT (bench/out/server).
# Prints per configuration: requests and failures per kind, and the server's
# log lines.
set -euo pipefail
build=${1:?usage: behind_proxy.sh BUILD_DIR [SECONDS]}
secs=${2:-30}
out=${OUT:-bench/out/server}
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$out"
small=$out/stacks-2000.folded
[ -s "$small" ] || "$build/bench/engine/gen_folded" --stacks 2000 --seed 7 >"$small"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

one() {  # one LABEL SERVER_FLAGS...: a server, the balancer, the load; prints the figures
  local label="$1"; shift
  local tmp port lbport spid lpid
  tmp=$(mktemp -d /tmp/luaflame-proxy-XXXXXX)
  port=$(free_port)
  "$build/server/luaflame-server" --listen "127.0.0.1:$port" --data "$tmp/data" "$@" >"$tmp/server.log" 2>&1 &
  spid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  lbport=$(free_port)
  chmod 777 "$tmp"
  sed -e "s#listen 8080;#listen 127.0.0.1:$lbport;#" \
      -e "s#access_log /dev/stdout;#access_log off; client_body_temp_path $tmp/body; proxy_temp_path $tmp/proxy;#" \
      "$root/docker/lb/nginx.conf" >"$tmp/nginx.conf"
  LB_SERVERS="127.0.0.1:$port" LB_CONF_DIR="$tmp" sh "$root/docker/lb/start.sh" -p "$tmp/" \
    -g "daemon off; pid $tmp/nginx.pid; error_log $tmp/error.log;" 2>"$tmp/lb.log" &
  lpid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$lbport/healthz" >/dev/null && break; sleep 0.1; done
  local id
  id=$(curl -sf --data-binary @"$small" "http://127.0.0.1:$lbport/api/runs?name=proxy" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  "$build/bench/server/server_load" --port "$lbport" --mode upload --file "$small" \
    --seconds "$secs" --threads "${UPLOADERS:-50}" --clients-from 1 >"$tmp/up.txt" 2>&1 &
  local up=$!
  "$build/bench/server/server_load" --port "$lbport" --mode svg-cached --run "$id" \
    --seconds "$secs" --threads "${READERS:-20}" --clients-from 2 >"$tmp/read.txt" 2>&1 || true
  wait "$up" || true
  echo "== $label"
  cat "$tmp/up.txt" "$tmp/read.txt"
  echo "server log lines: $(wc -l <"$tmp/server.log"); refusal lines: $(grep -c 'refus' "$tmp/server.log" || true)"
  kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null || true
  kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null || true
  rm -rf "$tmp"
}

one "trusting the proxy (--trusted-proxy 127.0.0.1)" --log-level warn --trusted-proxy 127.0.0.1
one "not trusting it (every client is 127.0.0.1)" --log-level warn
