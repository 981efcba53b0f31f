# The one way the shell tests start luaflame-server (sourced): on 127.0.0.1
# port 0, so the system chooses a port no one holds, and the port is read
# from the server's own --port-file. A /healthz answer therefore always comes
# from this test's server, never from another test's that took a port first
# (ctest -j2 runs two at once). The C++ tests do the same in
# tests/server/harness.cpp, the browser tests in tests/browser/harness.mjs.
#
#   lf_server_start DIR BINARY [FLAGS...]
#       starts BINARY --listen 127.0.0.1:0 --port-file DIR/port --data DIR/data
#       FLAGS, its output in DIR/server.log; waits (15 s at most) for /healthz;
#       sets LF_SERVER_PID, LF_PORT and LF_URL; returns 1 (log on stderr) if it
#       did not come up. LF_SERVER_WRAP (an array), if set, goes before BINARY.
#   lf_server_stop      TERM, then KILL after 5 s; safe to call twice.

lf_server_start() {
  local dir=$1 bin=$2
  shift 2
  mkdir -p "$dir/data"
  rm -f "$dir/port"
  local wrap=()
  [ -n "${LF_SERVER_WRAP+x}" ] && wrap=("${LF_SERVER_WRAP[@]}")
  "${wrap[@]}" "$bin" --listen 127.0.0.1:0 --port-file "$dir/port" --data "$dir/data" "$@" \
    >"$dir/server.log" 2>&1 &
  LF_SERVER_PID=$!
  LF_PORT="" LF_URL=""
  local _
  for _ in $(seq 300); do
    kill -0 "$LF_SERVER_PID" 2>/dev/null || break
    [ -z "$LF_PORT" ] && [ -s "$dir/port" ] && LF_PORT=$(cat "$dir/port") && LF_URL="http://127.0.0.1:$LF_PORT"
    if [ -n "$LF_PORT" ] && curl -fsS --max-time 2 "$LF_URL/healthz" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.05
  done
  echo "luaflame-server did not come up:" >&2
  cat "$dir/server.log" >&2
  lf_server_stop
  return 1
}

lf_server_stop() {
  [ -n "${LF_SERVER_PID:-}" ] || return 0
  kill -TERM "$LF_SERVER_PID" 2>/dev/null
  local _
  for _ in $(seq 50); do kill -0 "$LF_SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$LF_SERVER_PID" 2>/dev/null
  wait "$LF_SERVER_PID" 2>/dev/null
  LF_SERVER_PID=""
}

# An end-to-end test's start: a temporary folder ($tmp), a server in it
# started with `lf_server_start` (binary and arguments as given; its URL in
# $url), both gone when the script exits. Exits 1 when the server does not start.
lf_e2e_server() {
  tmp=$(mktemp -d)
  trap 'lf_server_stop; rm -rf "$tmp"' EXIT
  lf_server_start "$tmp/srv" "$@" || { echo "FAIL: server did not start"; exit 1; }
  url=$LF_URL
}

# A loopback port no socket uses now, for a program that takes no port 0
# (nginx, HAProxy): a port in use would answer the test in its place. Picked
# below the kernel's ephemeral range (ip_local_port_range), where port-0
# servers and every outgoing connection of the other tests take theirs: a
# port picked from inside it was taken by one of those between the check and
# nginx's bind (CI, "bind() to 127.0.0.1:42582 failed (98)"). A race with
# another lf_free_port remains: nginx_test.sh retries on a failed bind.
lf_free_port() {
  local p lo=32768
  read -r lo _ < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  [ "$lo" -gt 12000 ] || lo=32768
  for _ in $(seq 100); do
    p=$((10000 + RANDOM % (lo - 10000)))
    command -v ss >/dev/null || break
    ss -Htan "sport = :$p" | grep -q . || break
  done
  echo "$p"
}
