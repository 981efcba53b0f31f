#!/usr/bin/env bash
# The Dockerfile's steps on the host (no Docker engine here), and smoke tests
# of what they produce. One step per CTest test:
#
#   host_build_test.sh build  REPO_ROOT WORK BUILD
#                                              docker/install.sh from the suite's own BUILD
#                                              into WORK/prefix (the install step of
#                                              docker/build.sh: nothing is compiled again),
#                                              then the runtime package check the Dockerfile runs
#   host_build_test.sh server REPO_ROOT WORK   the installed server starts (as uid 10001, the
#                                              image's user, when run as root), /healthz answers,
#                                              luaflame-healthcheck agrees, pages are served
#   host_build_test.sh module REPO_ROOT WORK   lua5.4 loads the installed luaflame.so
#   host_build_test.sh demo   REPO_ROOT WORK   luaflame-demo streams a run the server shows
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
step="$1"; root="$2"; work="$3"
prefix="$work/prefix"
unset LUAFLAME_TOKEN LUAFLAME_SERVER

need_prefix() {
  [ -x "$prefix/bin/luaflame-server" ] || { echo "FAIL: $prefix is not built (the build step failed?)" >&2; exit 1; }
}

case "$step" in
build)
  rm -rf "$prefix"
  run_cmd build bash "$root/docker/install.sh" "$root" "$4" "$prefix"
  expect_rc 0 "docker/install.sh"
  [ "$RC" -eq 0 ] || { tail -n 40 "$SHIP_TMP/build.out" "$SHIP_TMP/build.err" >&2; exit 1; }
  for f in bin/luaflame-server bin/luaflame bin/luaflame-healthcheck bin/luaflame-demo \
           lib/lua/5.4/luaflame.so lib/luaflame/libluaflame-http.so lib/luaflame/libluaflame-pprof.so \
           share/luaflame/demo/workload.lua; do
    [ -s "$prefix/$f" ] && pass "installed $f" || fail "missing $prefix/$f"
  done
  [ -d "$prefix/share/luaflame/web" ] && pass "installed the pages" || fail "no $prefix/share/luaflame/web"
  run_cmd deps bash "$root/docker/runtime-deps.sh" --check "$root/docker/runtime-packages.txt" \
    "$prefix/bin/luaflame-server" "$prefix/bin/luaflame" "$prefix/lib/lua/5.4/luaflame.so" \
    "$prefix/lib/luaflame/libluaflame-http.so" "$prefix/lib/luaflame/libluaflame-pprof.so"
  expect_rc 0 "docker/runtime-packages.txt is exactly what the programs load (ldd)"
  ;;

server)
  need_prefix
  run_cmd help "$prefix/bin/luaflame-server" --help
  expect_rc 0 "luaflame-server --help"
  # The image runs the server as uid 10001 with /data its own: so does this test, when it can.
  # A copy of the prefix in the (world-readable) temp folder, as the image's
  # /usr/local: the checkout may sit where that user cannot look.
  if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    SHIP_AS_UID=10001
    cp -R "$prefix" "$SHIP_TMP/usr-local" && chmod -R a+rX "$SHIP_TMP/usr-local" && prefix="$SHIP_TMP/usr-local"
  fi
  start_server "$prefix/bin/luaflame-server" --web "$prefix/share/luaflame/web" || exit 1
  pass "the installed server started and answers /healthz"
  run_cmd hc "$prefix/bin/luaflame-healthcheck" "${SHIP_URL#http://}"
  expect_rc 0 "luaflame-healthcheck passes against the running server"
  run_cmd hz curl -fsS "$SHIP_URL/healthz"
  expect_match "$OUT" '"status"[[:space:]]*:[[:space:]]*"ok"' "/healthz says ok"
  code=$(curl -sS -o /dev/null -w '%{http_code}' "$SHIP_URL/")
  [ "$code" = 200 ] && pass "the runs page is served from the installed web/" || fail "GET / answered $code"
  run_cmd push "$prefix/bin/luaflame" push "$here/data/base.folded" --server "$SHIP_URL" --name smoke
  expect_rc 0 "the installed luaflame pushes to the installed server${SHIP_AS_UID:+ (running as uid $SHIP_AS_UID)}"
  if [ -n "${SHIP_AS_UID:-}" ]; then
    owner=$(stat -c %u "/proc/$SHIP_SERVER_PID")   # setpriv and env exec: the same process
    [ "$owner" = "$SHIP_AS_UID" ] && pass "the server process runs as uid $owner" || fail "server runs as uid $owner"
  fi
  kill -TERM "$SHIP_SERVER_PID"; wait "$SHIP_SERVER_PID" 2>/dev/null; SHIP_SERVER_PID=""
  run_cmd hc2 env LUAFLAME_HEALTH_TIMEOUT=2 "$prefix/bin/luaflame-healthcheck" "${SHIP_URL#http://}"
  expect_rc 1 "luaflame-healthcheck fails once the server is gone"
  ;;

module)
  need_prefix
  run_cmd lua lua5.4 -e "
    package.cpath = '$prefix/lib/lua/5.4/?.so;' .. package.cpath
    local lf = require 'luaflame'
    for _, f in ipairs{'start', 'stop', 'profile', 'flush', 'folded'} do
      assert(type(lf[f]) == 'function', 'luaflame.' .. f .. ' is ' .. type(lf[f]))
    end
    print('luaflame module loaded')"
  expect_rc 0 "lua5.4 loads the installed luaflame.so with its API"
  expect_match "$OUT" "luaflame module loaded" "require 'luaflame' printed"
  # The pprof writer is found where install.sh put it (lib/luaflame/), and
  # what it wrote is read back by the installed luaflame.
  rm -f "$SHIP_TMP/m.pb.gz"
  run_cmd pprof lua5.4 -e "
    package.cpath = '$prefix/lib/lua/5.4/?.so;' .. package.cpath
    local lf = require 'luaflame'
    lf.start{mode = 'trace', output = '$SHIP_TMP/m.pb.gz', quiet = true}
    local function work() local s = 0 for i = 1, 1000 do s = s + i end return s end
    for _ = 1, 7 do work() end
    lf.stop()"
  expect_rc 0 "the installed luaflame.so writes a .pb.gz file"
  run_cmd pprof_svg "$prefix/bin/luaflame" svg "$SHIP_TMP/m.pb.gz"
  expect_match "$OUT" "<title>work [^<]*[(]7 calls," "the installed luaflame reads it back: work's 7 calls"
  ;;

demo)
  need_prefix
  start_server "$prefix/bin/luaflame-server" --web "$prefix/share/luaflame/web" || exit 1
  run_cmd demo timeout 60 env LUAFLAME_SERVER="$SHIP_URL" DEMO_ROUNDS=1 DEMO_SECONDS=3 \
    "$prefix/bin/luaflame-demo"
  expect_rc 0 "luaflame-demo: one 3-second round"
  runs=$(curl -fsS "$SHIP_URL/api/runs?name=demo")
  expect_match "$runs" '"total"[[:space:]]*:[[:space:]]*1[[:space:]]*,[[:space:]]*"total_exact"' "the server has one demo run"
  samples=$(json_num "$(printf '%s' "$runs" | grep -Eo '"samples"[[:space:]]*:[[:space:]]*\{[^}]*\}')" total)
  samples="${samples%%.*}"   # JSON numbers: 2951.0
  [ "${samples:-0}" -gt 100 ] 2>/dev/null && pass "the demo run holds $samples samples" \
    || fail "the demo run holds '${samples:-none}' samples, wanted > 100"
  ;;

nginx_demo)
  # The compose service nginx-demo (issue 31: with a token set it streamed
  # nothing, got 401 once and said nothing): installed, against a server with
  # a token, with and without LUAFLAME_TOKEN.
  need_prefix
  [ -e /usr/lib/nginx/modules/ngx_http_lua_module.so ] \
    || { fail "nginx with ngx_http_lua is not installed (scripts/install-deps.sh --test installs it)"; ship_finish; }
  start_server "$prefix/bin/luaflame-server" --token s3cret || exit 1
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  demo() {  # demo NAME [ENV...]: the installed nginx demo for 3 s after its first answer
    local name="$1"; shift
    env TMPDIR="$SHIP_TMP" LUAFLAME_SERVER="$SHIP_URL" DEMO_PORT="$port" "$@" \
      "$prefix/bin/luaflame-nginx-demo" >"$SHIP_TMP/$name.out" 2>"$SHIP_TMP/$name.err" &
    local pid=$!
    for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break; sleep 0.1; done
    curl -fsS "http://127.0.0.1:$port/" >/dev/null && pass "$name: nginx answers on port $port" \
      || fail "$name: nginx does not answer: $(tail -c 600 "$SHIP_TMP/$name.err")"
    sleep 3
    kill -QUIT "$pid" 2>/dev/null   # graceful: the workers stop their profiles
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  }
  demo refused env -u LUAFLAME_TOKEN
  expect_match "$(cat "$SHIP_TMP/refused.err")" "luaflame: streaming to http://127\.0\.0\.1:[0-9]+ stopped: POST /api/streams answered 401" \
    "without the token each worker says in nginx's log that the server refused it"
  demo streamed LUAFLAME_TOKEN=s3cret
  runs=$(curl -fsS "$SHIP_URL/api/runs?name=nginx-demo")
  # Runs and the samples in them, from the listing's JSON.
  got=$(printf '%s' "$runs" | python3 -c 'import json, sys
r = json.load(sys.stdin)["runs"]
print(len(r), sum(x.get("metrics", {}).get("samples", {}).get("total", 0) for x in r))')
  n=${got%% *}; samples=${got##* }; samples=${samples%%.*}
  [ "${n:-0}" -ge 1 ] && [ "${samples:-0}" -gt 0 ] \
    && pass "with LUAFLAME_TOKEN the workers streamed $n runs, $samples samples" \
    || fail "with LUAFLAME_TOKEN the server has '$got' (runs, samples) of nginx-demo: $(tail -c 600 "$SHIP_TMP/streamed.err")"
  ;;

*) echo "unknown step $step" >&2; exit 2 ;;
esac
ship_finish
