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
ship_finish
