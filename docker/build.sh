#!/usr/bin/env bash
# The build steps of docker/Dockerfile, as a script so the test suite runs the
# very same steps on the host (no Docker engine there):
#
#   docker/build.sh [SRC] [BUILD] [PREFIX]
#
# Configures SRC (default: this repository) in BUILD (default SRC/build-docker)
# in Release without tests or benchmarks, builds the three things the image
# ships, and installs them under PREFIX (default /usr/local):
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

# install(1) -s strips: the image carries no debug information.
install -D -s -m 755 "$build/server/luaflame-server" "$prefix/bin/luaflame-server"
install -D -s -m 755 "$build/cli/luaflame" "$prefix/bin/luaflame"
install -D -s -m 644 "$build/collector/luaflame.so" "$prefix/lib/lua/5.4/luaflame.so"
install -D -m 755 "$here/healthcheck.sh" "$prefix/bin/luaflame-healthcheck"
install -D -m 755 "$here/demo/run.sh" "$prefix/bin/luaflame-demo"
install -D -m 644 "$here/demo/workload.lua" "$prefix/share/luaflame/demo/workload.lua"
rm -rf "$prefix/share/luaflame/web"
mkdir -p "$prefix/share/luaflame"
cp -R "$src/web" "$prefix/share/luaflame/web"
# The browser tests' packages live beside the pages in some checkouts: not shipped.
rm -rf "$prefix/share/luaflame/web/node_modules"
# The LuaJIT module and the nginx demo (docs/luajit.md), where LuaJIT is installed.
if cmake --build "$build" -j"$jobs" --target luaflame_lua_jit 2>/dev/null; then
  install -D -s -m 644 "$build/collector/jit/luaflame.so" "$prefix/lib/lua/5.1/luaflame.so"
  install -D -m 755 "$here/demo/nginx-demo.sh" "$prefix/bin/luaflame-nginx-demo"
  install -D -m 644 "$here/demo/nginx.conf.in" "$prefix/share/luaflame/nginx-demo/nginx.conf.in"
  install -D -m 644 "$here/demo/handler.lua" "$prefix/share/luaflame/nginx-demo/handler.lua"
fi
echo "installed luaflame into $prefix"
