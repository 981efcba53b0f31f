#!/usr/bin/env bash
# The build steps of docker/Dockerfile, as a script so the test suite runs the
# very same steps on the host (no Docker engine there):
#
#   docker/build.sh [SRC] [BUILD] [PREFIX]
#
# Configures SRC (default: this repository) in BUILD (default SRC/build-docker)
# in Release without tests or benchmarks, builds the three things the image
# ships, and installs them under PREFIX (default /usr/local) with
# docker/install.sh (which the test suite runs alone on its own build):
#   PREFIX/bin/luaflame-server        the server
#   PREFIX/bin/luaflame               the command line (run, svg, diff, push, compare)
#   PREFIX/bin/luaflame-healthcheck   GET /healthz without curl (the image's HEALTHCHECK)
#   PREFIX/bin/luaflame-demo          the compose demo: a Lua workload under `luaflame run`, in a loop
#   PREFIX/lib/lua/5.4/luaflame.so    require "luaflame" (on lua5.4's default cpath for /usr/local)
#   PREFIX/share/luaflame/web/        the pages (luaflame-server --web)
#   PREFIX/share/luaflame/demo/       the demo's Lua workload
# JOBS (default: the number of CPUs) sets the build's parallelism.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "${1:-$here/..}" && pwd)"
build="${2:-$src/build-docker}"
prefix="${3:-/usr/local}"
jobs="${JOBS:-$(nproc)}"

cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLUAFLAME_TESTS=OFF -DLUAFLAME_BENCH=OFF
cmake --build "$build" -j"$jobs" --target luaflame-server luaflame luaflame_lua

# The LuaJIT module too, where LuaJIT is installed (docs/luajit.md).
cmake --build "$build" -j"$jobs" --target luaflame_lua_jit 2>/dev/null || true
bash "$here/install.sh" "$src" "$build" "$prefix"
