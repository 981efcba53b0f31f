# Helpers of tests/ship/podman_compose_test.sh (sourced after ../lib.sh):
# images made here (no registry is reached), waits, and the checks of issue 31.

# Debian 12 base images from debootstrap (what debian:12 and debian:12-slim
# are made from), unless they are there.
pm_base_images() {
  podman image exists docker.io/library/debian:12 && podman image exists docker.io/library/debian:12-slim \
    && { pass "base images debian:12 and debian:12-slim are there"; return 0; }
  command -v debootstrap >/dev/null || { fail "no debian:12 image and no debootstrap to make one"; return 1; }
  local rootfs; rootfs="$(mktemp -d /var/tmp/lf-rootfs.XXXXXX)"
  debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >"$SHIP_TMP/debootstrap.log" 2>&1 \
    || { fail "debootstrap: $(tail -3 "$SHIP_TMP/debootstrap.log")"; rm -rf "$rootfs"; return 1; }
  tar -C "$rootfs" -c . | podman import - docker.io/library/debian:12 >/dev/null \
    && podman tag docker.io/library/debian:12 docker.io/library/debian:12-slim
  local rc=$?
  rm -rf "$rootfs"
  [ $rc = 0 ] && pass "base images made with debootstrap and podman import" || fail "podman import"
  return $rc
}

# pm_build TAG DOCKERFILE: builds TAG unless it is there (LF_REBUILD=1 builds
# anyway). podman's default format (OCI), which drops HEALTHCHECK: the compose
# files state their checks themselves.
pm_build() {
  if podman image exists "$1" && [ -z "${LF_REBUILD:-}" ]; then pass "image $1 is there (LF_REBUILD=1 builds it again)"; return 0; fi
  local t0=$SECONDS
  podman build -f "$2" -t "$1" . >"$SHIP_TMP/build-${1%%:*}.log" 2>&1 \
    || { fail "podman build $1: $(tail -5 "$SHIP_TMP/build-${1%%:*}.log")"; return 1; }
  pass "podman build $1 ($2): $((SECONDS - t0)) s, $(podman image inspect -f '{{.Size}}' "$1") bytes"
}

# The image compose.scale.yaml names, or a stand-in of Debian's PostgreSQL 15.
pm_postgres() {
  podman image exists docker.io/library/postgres:15-bookworm && { pass "postgres:15-bookworm is there"; return 0; }
  pm_build docker.io/library/postgres:15-bookworm tests/ship/podman/postgres.Dockerfile
}

# pm_wait_health URL [SECONDS]: /healthz answers 200.
pm_wait_health() {
  local i
  for i in $(seq "${2:-60}"); do
    curl -fsS -o /dev/null --max-time 2 "$1/healthz" 2>/dev/null && return 0
    sleep 1
  done
  return 1
}

# pm_wait_runs URL NAME N: at least N runs named NAME hold samples (60 s at most).
pm_wait_runs() {
  local i got
  for i in $(seq 60); do
    got=$(curl -fsS "$1/api/runs?name=$2" 2>/dev/null | python3 -c 'import json, sys
r = json.load(sys.stdin)["runs"]
print(sum(1 for x in r if x.get("metrics", {}).get("samples", {}).get("total", 0) > 0))' 2>/dev/null)
    if [ "${got:-0}" -ge "$3" ]; then pass "$got run(s) named $2 with samples"; return 0; fi
    sleep 1
  done
  return 1
}

# pm_check_volumes PROJECT WANTED: the project's named volume and no anonymous one.
pm_check_volumes() {
  local vols; vols=$(podman volume ls -q)
  grep -qx "$2" <<<"$vols" && pass "the named volume $2" || fail "no volume $2 (have: $vols)"
  if grep -Eq '^[0-9a-f]{64}$' <<<"$vols"; then fail "anonymous volumes: $(grep -Ec '^[0-9a-f]{64}$' <<<"$vols")"
  else pass "no anonymous volume"; fi
}

# pm_check_upload URL PREFIX: a CI upload with the token answers an absolute
# URL (starting with PREFIX) that opens; without the token, 401.
pm_check_upload() {
  local r u code
  r=$(curl -sS -H "Authorization: Bearer $LUAFLAME_TOKEN" --data-binary @"$root/tests/ship/data/base.folded" "$1/api/runs?name=ci")
  u=$(json_str "$r" url)
  [[ "$u" == "$2"* ]] && pass "the upload answers an absolute URL: $u" || fail "the upload answered '$r'"
  code=$(curl -sS -o /dev/null -w '%{http_code}' "$u")
  [ "$code" = 200 ] && pass "that URL opens (200)" || fail "GET $u answered $code"
  code=$(curl -sS -o /dev/null -w '%{http_code}' --data-binary @"$root/tests/ship/data/base.folded" "$1/api/runs?name=ci")
  [ "$code" = 401 ] && pass "without the token: 401" || fail "without the token: $code"
}

# pm_reads URL SECONDS: GETs URL every 20 ms; prints "COUNT FAILED SLOWEST_MS".
pm_reads() {
  python3 - "$1" "$2" <<'PY'
import sys, time, urllib.request
url, secs = sys.argv[1], float(sys.argv[2])
n = failed = 0
slowest = 0.0
end = time.time() + secs
while time.time() < end:
    t0 = time.time()
    try:
        ok = urllib.request.urlopen(url, timeout=10).status == 200
    except Exception:
        ok = False
    slowest = max(slowest, time.time() - t0)
    n += 1
    failed += not ok
    time.sleep(0.02)
print(n, failed, int(slowest * 1000))
PY
}

ip_of() { podman inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1"; }

# pm_follow_restart PROJECT: server-b stops, its address is taken, it starts
# again at another; the balancer follows, and no read fails or stalls.
pm_follow_restart() {
  local p="$1" b="$1_server-b_1" url old new r
  url="http://127.0.0.1:8080/api/runs/$(json_str "$(curl -fsS "127.0.0.1:8080/api/runs?name=ci")" url | sed 's#.*/##')"
  old=$(ip_of "$b")
  podman stop -t 20 "$b" >/dev/null
  read -r n failed slow <<<"$(pm_reads "$url" 3)"
  [ "$failed" = 0 ] && [ "$slow" -lt 500 ] && pass "server-b stopped: $n reads, none failed, slowest $slow ms" \
    || fail "server-b stopped: $failed of $n reads failed, slowest $slow ms"
  podman run -d --rm --name "${p}_squat" --network "${p}_default" --ip "$old" docker.io/library/debian:12 sleep 600 >/dev/null \
    || { fail "could not take $old"; return; }
  podman start "$b" >/dev/null
  new=$(ip_of "$b")
  [ -n "$new" ] && [ "$new" != "$old" ] && pass "server-b restarted at $new (was $old)" || fail "server-b at '$new' (was $old)"
  for _ in $(seq 30); do podman healthcheck run "$b" >/dev/null 2>&1 && break; sleep 1; done
  local since; since=$(date +%s)
  read -r n failed slow <<<"$(pm_reads "$url" 4)"
  [ "$failed" = 0 ] && [ "$slow" -lt 500 ] && pass "server-b back: $n reads, none failed, slowest $slow ms" \
    || fail "server-b back: $failed of $n reads failed, slowest $slow ms"
  r=$(podman logs --since "$since" "$b" 2>&1 | grep -c 'GET /api/runs/')
  [ "$r" -gt 0 ] && pass "the restarted server-b answered $r of them" || fail "the restarted server-b got no reads"
  expect_match "$(podman logs "${p}_lb_1" 2>&1)" "lb: servers now:.*$new" "the balancer logged the new address"
  podman rm -f "${p}_squat" >/dev/null 2>&1
}
