#!/usr/bin/env bash
# Installs everything luaflame needs on Debian 12, from Debian's packages only.
#   scripts/install-deps.sh          build and runtime dependencies
#   scripts/install-deps.sh --test   also what the test suite needs (chromium,
#                                    docker-compose, valgrind, playwright-core)
#   scripts/install-deps.sh --lint   also clang-tidy and clang-format (.ci/lint.sh)
# Idempotent: safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

build_pkgs=(g++ cmake make pkg-config lua5.4 liblua5.4-dev libcpp-httplib-dev
            nlohmann-json3-dev libspdlog-dev doctest-dev libsqlite3-dev zlib1g-dev libssl-dev
            ca-certificates curl ccache)  # ccache: CMakeLists.txt compiles through it when present
# The PostgreSQL store: libpq to build it; with --test, PostgreSQL itself (the tests start
# their own) and nginx (the load balancer of the compose profile, tested on the host).
pg_pkgs=(libpq-dev)
pg_test_pkgs=(postgresql nginx)
test_pkgs=(chromium docker-compose nodejs npm procps libxml2-utils)
fuzz_pkgs=(clang libfuzzer-14-dev libclang-rt-14-dev)  # .ci/asan-build.sh: fuzz and sanitize jobs (--fuzz)
cli_pkgs=(libcli11-dev)                  # argument parsing of every `luaflame` subcommand
lint_pkgs=(clang-tidy clang-format)      # .ci/lint.sh (scripts/install-deps.sh --lint)

bench_real_pkgs=(lua-check lua-ldoc lua-busted lua-penlight lua-dkjson lua-lpeg lua-posix)  # bench/real and the collector tests: real programs under luaflame (lua-posix: fork, LuaJIT)

pprof_pkgs=(protobuf-compiler libprotobuf-dev)  # pprof codec (engine/proto)
pprof_test_pkgs=(golang-go)                     # go tool pprof, runtime/pprof in the tests

# Every Lua: the collector is built for 5.1, 5.2 and 5.3 beside 5.4 (collector/vm/puc), with
# the interpreters its tests compare against and `luaflame run --lua V` users expect.
every_lua_pkgs=(lua5.1 lua5.2 lua5.3 liblua5.1-0-dev liblua5.2-dev liblua5.3-dev)
jit_pkgs=(luajit2 libluajit2-5.1-dev)  # the LuaJIT collector (collector/vm/luajit); not libluajit-5.1-dev: it conflicts with nginx's lua module
jit_test_pkgs=(nginx libnginx-mod-http-lua apache2-utils)  # OpenResty-style nginx + ab (docs/luajit.md)
attach_test_pkgs=(nmap haproxy neovim sysbench)  # real hosts of `luaflame attach` (docs/attach.md, tests/attach)
want=("${build_pkgs[@]}" "${every_lua_pkgs[@]}" "${jit_pkgs[@]}" "${pg_pkgs[@]}" "${cli_pkgs[@]}" "${pprof_pkgs[@]}")
[ "${1:-}" = "--test" ] && want+=("${test_pkgs[@]}" "${pg_test_pkgs[@]}")
[ "${1:-}" = "--test" ] && want+=("${bench_real_pkgs[@]}")
[ "${1:-}" = "--test" ] && want+=("${jit_test_pkgs[@]}" "${attach_test_pkgs[@]}")
[ "${1:-}" = "--fuzz" ] && want+=("${fuzz_pkgs[@]}")
[ "${1:-}" = "--lint" ] && want+=("${lint_pkgs[@]}")
[ "${1:-}" = "--test" ] && want+=("${pprof_test_pkgs[@]}")

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm may come from outside Debian on some machines: accept any working npm.
if command -v npm >/dev/null 2>&1; then
  tmp=(); for p in "${missing[@]}"; do [[ $p == nodejs || $p == npm ]] || tmp+=("$p"); done
  missing=("${tmp[@]+"${tmp[@]}"}")
fi
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ "${1:-}" = "--test" ] && [ ! -d tests/browser/node_modules/playwright-core ]; then
  (cd tests/browser && npm install --no-audit --no-fund --loglevel=error)
fi
# The real clients of the pprof tests: @pyroscope/nodejs and speedscope (tests/server/pprof).
if [ "${1:-}" = "--test" ] && [ ! -d tests/server/pprof/node_modules/@pyroscope/nodejs ]; then
  (cd tests/server/pprof && npm install --no-audit --no-fund --loglevel=error)
fi
