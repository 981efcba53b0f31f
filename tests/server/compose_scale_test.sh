#!/usr/bin/env bash
# compose.scale.yaml as Debian's docker-compose reads it (the balancer itself
# runs in test_server_multi): PostgreSQL, two servers on it, nginx on
# 127.0.0.1:8080, in their own file (podman-compose 1.0.3 knows no profiles).
#   compose_scale_test.sh REPO_ROOT
set -uo pipefail
cd "$1" || exit 1
command -v docker-compose >/dev/null || { echo "FAIL: docker-compose is not installed" >&2; exit 1; }
unset LUAFLAME_TOKEN LUAFLAME_PG_PASSWORD COMPOSE_PROFILES
docker-compose -f compose.scale.yaml config -q || { echo "FAIL: docker-compose config refuses compose.scale.yaml" >&2; exit 1; }
docker-compose -f compose.scale.yaml config | python3 -c '
import sys, yaml
cfg = yaml.safe_load(sys.stdin)
svc = cfg["services"]
fails = []
def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok: fails.append(what)
prof = lambda n: svc.get(n, {}).get("profiles", [])
check(sorted(svc) == ["lb", "postgres", "server-a", "server-b"], "scale: postgres, server-a, server-b, lb, and nothing else")
check(all(prof(n) == [] for n in svc), "no profiles (podman-compose 1.0.3 would ignore them)")
# docker-compose 1.x writes "127.0.0.1:8080:8080/tcp", compose v2 the long form.
def port(p):
    if isinstance(p, str): return p.split("/")[0]
    return "%s:%s:%s" % (p.get("host_ip"), p.get("published"), p.get("target"))
ports = lambda n: [port(p) for p in svc[n].get("ports", [])]
check(ports("lb") == ["127.0.0.1:8080:8080"], "nginx published on 127.0.0.1:8080 only")
check(ports("server-a") == [] and ports("server-b") == [] and "ports" not in svc["postgres"], "servers and PostgreSQL not published")
for n in ("server-a", "server-b"):
    env = svc[n]["environment"]
    check(env.get("LUAFLAME_STORE", "").startswith("postgresql://luaflame:") and env["LUAFLAME_STORE"].endswith("@postgres:5432/luaflame"), n + " stores in the postgres service")
    check(svc[n]["depends_on"]["postgres"]["condition"] == "service_healthy", n + " waits for a healthy PostgreSQL")
    check("--listen" in svc[n]["command"] and "0.0.0.0:8080" in svc[n]["command"], n + " listens on 8080 in its container")
check(all(svc["lb"]["depends_on"][n]["condition"] == "service_healthy" for n in ("server-a", "server-b")), "nginx waits for both servers")
check(svc["lb"]["build"]["dockerfile"] == "docker/lb/Dockerfile", "nginx image from docker/lb/Dockerfile")
sys.exit(1 if fails else 0)
' || exit 1
! grep -q 'COMPOSE_PROFILES=' .env || { echo "FAIL: .env still sets COMPOSE_PROFILES" >&2; exit 1; }
echo "ok: .env sets no profiles"
grep -q 'luaflame-lb' docker/lb/Dockerfile || { echo "FAIL: the balancer does not run docker/lb/start.sh" >&2; exit 1; }
echo "ok: the balancer runs start.sh (names resolved again every second)"
grep -q '^FROM debian:12-slim' docker/lb/Dockerfile && grep -q 'install .*nginx' docker/lb/Dockerfile \
  || { echo "FAIL: docker/lb/Dockerfile is not Debian 12's nginx" >&2; exit 1; }
echo "ok: the load balancer is Debian 12's nginx"
echo "ok: all checks passed"
