#!/usr/bin/env bash
# The compose file as a compose client reads it (Debian's docker-compose; no
# engine needed): valid, and saying what docs/ship.md promises.
#   compose_test.sh REPO_ROOT
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
root="$1"
cd "$root" || exit 1
if ! command -v docker-compose >/dev/null; then
  echo "FAIL: docker-compose is not installed (scripts/install-deps.sh --test installs it)" >&2
  exit 1
fi
# A user's LUAFLAME_TOKEN would show in the output; the checks below want the default.
unset LUAFLAME_TOKEN

run_cmd config docker-compose -f compose.yaml config -q
expect_rc 0 "docker-compose config -q accepts compose.yaml"
run_cmd services docker-compose -f compose.yaml config --services
expect_match "$OUT" "^server$|(^|[[:space:]])server($|[[:space:]])" "a server service"
expect_match "$OUT" "(^|[[:space:]])demo($|[[:space:]])" "a demo service"
run_cmd volumes docker-compose -f compose.yaml config --volumes
expect_match "$OUT" "^data$" "a named volume"

run_cmd full docker-compose -f compose.yaml config
cfg="$OUT"
expect_match "$cfg" "127\.0\.0\.1:8080:8080" "the server is published on 127.0.0.1:8080 only"
expect_match "$cfg" "dockerfile: docker/Dockerfile" "both services build docker/Dockerfile"
expect_match "$cfg" "data:/data" "the store is the named volume at /data"
expect_match "$cfg" "condition: service_healthy" "the demo waits for a healthy server"
expect_match "$cfg" "luaflame-healthcheck" "the server has a health check"
expect_match "$cfg" "LUAFLAME_SERVER: http://server:8080" "the demo streams to the server service"
expect_match "$cfg" "0\.0\.0\.0:8080" "the server listens on every interface inside its container"

# The image side of the same promises.
df="$root/docker/Dockerfile"
expect_match "$(cat "$df")" "^FROM debian:12 AS build" "build stage on Debian 12"
expect_match "$(cat "$df")" "^FROM debian:12-slim" "runtime stage on Debian 12 slim"
expect_match "$(cat "$df")" "bash scripts/install-deps.sh" "the build stage uses the README's install script"
expect_match "$(cat "$df")" "bash docker/build.sh" "the build stage runs docker/build.sh (what the tests run)"
expect_match "$(cat "$df")" "^USER 10001" "the runtime runs as a non-root user"
expect_match "$(cat "$df")" "^HEALTHCHECK " "the image has a health check"

# Issue 31, as podman 4.3 with podman-compose 1.0.3 ran it: every service
# states its own health check (an OCI build drops the image's), nginx-demo
# gets the token, no profiles (podman-compose ignores them and started both
# sets), and no VOLUME in the image (an anonymous volume per service per `up`).
LUAFLAME_TOKEN=t0k docker-compose -f compose.yaml config >"$SHIP_TMP/cfg.yaml" 2>"$SHIP_TMP/cfg.err"
python3 - "$SHIP_TMP/cfg.yaml" <<'PY' || fail "compose.yaml per service (above)"
import sys, yaml
svc = yaml.safe_load(open(sys.argv[1]))["services"]
bad = []
def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok: bad.append(what)
check(sorted(svc) == ["demo", "nginx-demo", "server"], "services: server, demo, nginx-demo")
check(all("profiles" not in s for s in svc.values()), "no profiles")
for n, s in svc.items():
    test = s.get("healthcheck", {}).get("test")
    check(bool(test), n + " states its health check: " + str(test))
check(svc["demo"]["healthcheck"]["test"] == ["NONE"], "demo: nothing to probe, no check")
check("127.0.0.1:8081" in svc["nginx-demo"]["healthcheck"]["test"], "nginx-demo: probed on its own port 8081")
for n in ("demo", "nginx-demo"):
    check(svc[n]["environment"].get("LUAFLAME_TOKEN") == "t0k", n + " gets LUAFLAME_TOKEN")
sys.exit(1 if bad else 0)
PY
check_subst() {  # podman-compose 1.0.3 leaves ${VAR:-} (an empty default) as it is
  if grep -n '\${[A-Za-z_]*:\?-}' "$1"; then fail "$1: \${VAR:-} reaches the container literally under podman-compose"
  else pass "$1: no \${VAR:-} (podman-compose 1.0.3 would not substitute it)"; fi
}
check_subst "$root/compose.yaml"
check_subst "$root/compose.scale.yaml"
expect_match "$(grep -A0 'LUAFLAME_PUBLIC_URL' "$SHIP_TMP/cfg.yaml")" "http://127\.0\.0\.1:8080" "the server's links are absolute (LUAFLAME_PUBLIC_URL)"
if grep -q '^VOLUME' "$df"; then fail "docker/Dockerfile declares a VOLUME"; else pass "no VOLUME in the image"; fi
expect_match "$(cat "$root/docker/demo/nginx.conf.in")" "^env LUAFLAME_TOKEN;" "nginx passes LUAFLAME_TOKEN to its workers"
ship_finish
