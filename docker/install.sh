#!/usr/bin/env bash
# The install step of docker/build.sh: copies what BUILD holds (already built:
# luaflame-server, luaflame, luaflame.so, and the other Lua versions' runners
# and modules where they were built) and the pages, the demo and the health check from SRC under PREFIX.
# Builds nothing: the test suite (tests/ship, ship.host.build) runs it on the
# very build it tests instead of compiling the project a second time.
#   docker/install.sh SRC BUILD PREFIX
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$1" && pwd)" build="$2" prefix="$3"
for f in server/luaflame-server cli/luaflame collector/luaflame.so collector/libluaflame-http.so \
  collector/libluaflame-pprof.so; do
  [ -s "$build/$f" ] || { echo "install.sh: $build/$f is not built" >&2; exit 1; }
done

# install(1) -s strips: the image carries no debug information.
install -D -s -m 755 "$build/server/luaflame-server" "$prefix/bin/luaflame-server"
install -D -s -m 755 "$build/cli/luaflame" "$prefix/bin/luaflame"
install -D -s -m 644 "$build/collector/luaflame.so" "$prefix/lib/lua/5.4/luaflame.so"
# Every Lua (docs/collector.md): the runners `luaflame run --lua V` execs, beside
# luaflame, and each version's module at that version's cpath. 5.1's cpath is
# LuaJIT's too: LuaJIT's module is installed there (below), Lua 5.1's under
# lib/luaflame/lua5.1 (LUA_CPATH names it).
for v in 5.1 5.2 5.3; do
  [ -s "$build/cli/luaflame-lua$v" ] || continue
  install -D -s -m 755 "$build/cli/luaflame-lua$v" "$prefix/bin/luaflame-lua$v"
  dest="$prefix/lib/lua/$v/luaflame.so"
  [ "$v" = 5.1 ] && dest="$prefix/lib/luaflame/lua5.1/luaflame.so"
  install -D -s -m 644 "$build/collector/lua$v/luaflame.so" "$dest"
done
# The HTTP transport (collector/http/transport.h) that luaflame push and the
# collector's stream load on first use, where they look for it.
install -D -s -m 644 "$build/collector/libluaflame-http.so" "$prefix/lib/luaflame/libluaflame-http.so"
# The pprof writer (collector/pprof/pprof_writer.h) that the collector loads to
# write a .pb.gz file, beside the transport.
install -D -s -m 644 "$build/collector/libluaflame-pprof.so" "$prefix/lib/luaflame/libluaflame-pprof.so"
# luaflame attach's shim (docs/attach.md), where luaflame looks for it.
[ -s "$build/collector/libluaflame-attach.so" ] &&
  install -D -s -m 644 "$build/collector/libluaflame-attach.so" "$prefix/lib/luaflame/libluaflame-attach.so"
[ -s "$build/cli/luaflame-luajit" ] && install -D -s -m 755 "$build/cli/luaflame-luajit" "$prefix/bin/luaflame-luajit"
install -D -m 755 "$here/healthcheck.sh" "$prefix/bin/luaflame-healthcheck"
install -D -m 755 "$here/demo/run.sh" "$prefix/bin/luaflame-demo"
install -D -m 644 "$here/demo/workload.lua" "$prefix/share/luaflame/demo/workload.lua"
rm -rf "$prefix/share/luaflame/web"
mkdir -p "$prefix/share/luaflame"
cp -R "$src/web" "$prefix/share/luaflame/web"
# The browser tests' packages live beside the pages in some checkouts: not shipped.
rm -rf "$prefix/share/luaflame/web/node_modules"
# The LuaJIT module and the nginx demo (docs/luajit.md), where it was built.
if [ -s "$build/collector/vm/luajit/luaflame.so" ]; then
  install -D -s -m 644 "$build/collector/vm/luajit/luaflame.so" "$prefix/lib/lua/5.1/luaflame.so"
  install -D -m 755 "$here/demo/nginx-demo.sh" "$prefix/bin/luaflame-nginx-demo"
  install -D -m 644 "$here/demo/nginx.conf.in" "$prefix/share/luaflame/nginx-demo/nginx.conf.in"
  install -D -m 644 "$here/demo/handler.lua" "$prefix/share/luaflame/nginx-demo/handler.lua"
fi
echo "installed luaflame into $prefix"
