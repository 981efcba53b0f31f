#!/usr/bin/env bash
# Installs the dependencies, builds, and starts luaflame-server on
# http://127.0.0.1:8080 with its store in ./data (override with LUAFLAME_DATA,
# the address with LUAFLAME_LISTEN). build/ is configured with the options
# scripts/test.sh sets too (scripts/build-env.sh), so either may run first;
# only the three programs are built here.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
source scripts/build-env.sh
cmake -S . -B build "${LUAFLAME_CMAKE_OPTIONS[@]}" >/dev/null
# Everything, so that the README's `luaflame run --lua V` and `luaflame attach`
# (its shim and each Lua's module) work after this command alone.
cmake --build build -j"$(nproc)"
exec build/server/luaflame-server --listen "${LUAFLAME_LISTEN:-127.0.0.1:8080}" \
  --data "${LUAFLAME_DATA:-data}" "$@"
