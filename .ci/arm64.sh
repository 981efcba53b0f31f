#!/usr/bin/env bash
# arm64 job: cross-builds the collector and its in-process unit tests with
# Debian's g++-aarch64-linux-gnu against Debian's arm64 Lua 5.4 and
# cpp-httplib, then runs them under qemu-user-static (the arm64 virtual
# counter as the tracer's clock, the luaint probe on arm64's Lua). Installs
# what it needs (adds the arm64 architecture to dpkg). Bounded: measured
# 8.6 min in all on a loaded 2-core VM (build + 28 test cases under qemu;
# the two timing-sensitive share comparisons are left to the native run);
# each step has a timeout, 25 min at most.
#   .ci/arm64.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

arm64_pkgs=(g++-aarch64-linux-gnu qemu-user-static nlohmann-json3-dev doctest-dev
            liblua5.4-dev:arm64 libcpp-httplib-dev:arm64)
dpkg --print-foreign-architectures | grep -qx arm64 || { dpkg --add-architecture arm64; apt-get update -q; }
missing=()
for p in "${arm64_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
CXX=aarch64-linux-gnu-g++
flags=(-std=c++17 -O1 -g0 -Wall -Wextra -Werror -pthread
       -Icollector/include -Iwire/include -I/usr/include/lua5.4 -I/usr/include/aarch64-linux-gnu
       -DLUAFLAME_TEST_DATA="\"$PWD/tests/data\"")
srcs=(wire/wire.cpp collector/*.cpp)
objs=()
for s in "${srcs[@]}"; do
  [ "$s" = collector/lua_entry.cpp ] && continue
  o="$out/$(echo "$s" | tr / _).o"
  timeout 300 "$CXX" "${flags[@]}" -c "$s" -o "$o"
  objs+=("$o")
done
timeout 300 "$CXX" "${flags[@]}" -DDOCTEST_CONFIG_IMPLEMENT_WITH_MAIN -c tests/collector/test_collector.cpp -o "$out/test.o"
"$CXX" -pthread -o "$out/test_collector" "$out/test.o" "${objs[@]}" \
  -L/usr/lib/aarch64-linux-gnu -llua5.4 -lcpp-httplib -lssl -lcrypto -lz -lbrotlidec -lbrotlienc -ldl -lm
file "$out/test_collector" | grep -q aarch64
# Under emulation the CPU clocks run ~10x slower and the machine is shared:
# the timing-sensitive shares (sampled vs traced) are left to the native run.
cd "$out"
QEMU_LD_PREFIX=/ timeout 900 qemu-aarch64-static ./test_collector \
  -tce="sample: self shares within 5 points*,sample: a function with three quarters*"
echo "arm64: collector tests passed"
