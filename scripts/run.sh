#!/usr/bin/env bash
# Installs the dependencies, builds, and starts luaflame-server on
# http://127.0.0.1:8080 with its store in ./data (override with LUAFLAME_DATA).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLUAFLAME_TESTS=OFF -DLUAFLAME_BENCH=OFF
cmake --build build -j"$(nproc)" --target luaflame-server luaflame luaflame_lua
exec build/server/luaflame-server --listen "${LUAFLAME_LISTEN:-127.0.0.1:8080}" \
  --data "${LUAFLAME_DATA:-data}" "$@"
