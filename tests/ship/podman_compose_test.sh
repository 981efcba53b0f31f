#!/usr/bin/env bash
# compose.yaml and compose.scale.yaml run for real with podman and
# podman-compose 1.0.3 (Debian 12's), as issue 31 asked: a script run by hand
# (a cold run builds images for 5 to 10 minutes), skipped with a reason where
# no engine is. docs/ship.md ("Running compose for real") says how and what it
# showed. It needs root, podman, podman-compose, and for the base images
# debootstrap and a Debian mirror (no registry is reached).
#   tests/ship/podman_compose_test.sh [single|scale|all]   (default all)
# Ports 127.0.0.1:8080 and 8081 must be free. Projects lfship and lfscale are
# removed (with their volumes) at the end.
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$here/lib.sh"
source "$here/podman/lib.sh"
what="${1:-all}"
cd "$root" || exit 1
for tool in podman podman-compose; do
  command -v "$tool" >/dev/null || { echo "skipped: $tool is not installed (apt-get install podman podman-compose)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (podman's rootful network, debootstrap)"; exit 77; }
if curl -s -o /dev/null --max-time 1 127.0.0.1:8080; then
  echo "FAIL: 127.0.0.1:8080 is taken: stop what listens there first" >&2; exit 1
fi
pm_base_images || exit 1
pm_build luaflame:local docker/Dockerfile || exit 1
export LUAFLAME_TOKEN=ship-$$
unset LUAFLAME_PUBLIC_URL LUAFLAME_PG_PASSWORD COMPOSE_PROFILES

single() {
  pc() { podman-compose -p lfship -f compose.yaml "$@"; }
  trap 'pc down -v >/dev/null 2>&1' RETURN
  run_cmd up pc up -d
  expect_rc 0 "podman-compose up -d (compose.yaml)"
  pm_wait_health http://127.0.0.1:8080 || { fail "the server never answered /healthz: $(podman logs lfship_server_1 2>&1 | tail -5)"; return; }
  pass "the server answers on 127.0.0.1:8080"
  pm_check_volumes lfship lfship_data
  pm_wait_runs http://127.0.0.1:8080 demo 1 || fail "no live demo run with samples"
  pm_wait_runs http://127.0.0.1:8080 nginx-demo 2 \
    || fail "nginx-demo: no 2 runs with samples (token: LUAFLAME_TOKEN): $(podman logs lfship_nginx-demo_1 2>&1 | tail -5)"
  for c in lfship_server_1 lfship_nginx-demo_1; do
    run_cmd hc podman healthcheck run "$c"
    expect_rc 0 "$c: its compose health check passes (an OCI build has none of its own)"
  done
  run_cmd hcdemo podman healthcheck run lfship_demo_1
  expect_match "$ERR" "no defined healthcheck" "the demo has no health check (nothing listens in it)"
  pm_check_upload http://127.0.0.1:8080 "http://127.0.0.1:8080/runs/"
  run_cmd down pc down
  run_cmd up2 pc up -d server
  pm_wait_health http://127.0.0.1:8080 || fail "the server did not come back"
  local runs; runs=$(curl -fsS "127.0.0.1:8080/api/runs?name=ci")
  expect_match "$runs" '"name":"ci"' "the upload survived down and up (the named volume)"
}

scale() {
  pm_build luaflame-lb:local docker/lb/Dockerfile || return
  pm_postgres || return
  pc() { podman-compose -p lfscale -f compose.scale.yaml "$@"; }
  trap 'pc down -v >/dev/null 2>&1' RETURN
  run_cmd up pc up -d
  expect_rc 0 "podman-compose up -d (compose.scale.yaml)"
  pm_wait_health http://127.0.0.1:8080 120 \
    || { fail "the balancer never answered /healthz: $(podman logs lfscale_lb_1 2>&1 | tail -5)"; return; }
  pass "the balancer answers on 127.0.0.1:8080"
  pm_check_volumes lfscale lfscale_pgdata
  pm_check_upload http://127.0.0.1:8080 "http://127.0.0.1:8080/runs/"
  pm_follow_restart lfscale
}

case "$what" in
  single) single ;;
  scale) scale ;;
  all) single; scale ;;
  *) echo "usage: $0 [single|scale|all]" >&2; exit 2 ;;
esac
ship_finish
