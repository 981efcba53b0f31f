#!/bin/sh
# The one sanitizer build of CI, shared by the fuzz job (.ci/fuzz.sh: the
# libFuzzer targets) and the sanitize job (.ci/sanitizers.sh: the whole suite):
# clang with AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer's
# coverage instrumentation (fuzzer-no-link) on every object, -O1, line tables
# only (-gline-tables-only: all a sanitizer report needs, file:line in every frame), in
# build-asan/ (SAN_BUILD), tests and fuzz targets on, benchmarks off. Whichever
# job runs first compiles it; the other finds it up to date. Through ccache
# (CMakeLists.txt) like every build here. Prints how long it took.
#   .ci/asan-build.sh [TARGET...]     (default: every target)
set -eu
cd "$(dirname "$0")/.."
BUILD=${SAN_BUILD:-build-asan}
command -v clang++ >/dev/null || { echo "asan-build.sh: clang++ missing (scripts/install-deps.sh --fuzz)"; exit 1; }
SAN="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -gline-tables-only"
LINK="-fsanitize=address,undefined"
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
start=$(date +%s)
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG= -DCMAKE_CXX_FLAGS_DEBUG= \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" -DCMAKE_EXE_LINKER_FLAGS="$LINK" \
  -DCMAKE_SHARED_LINKER_FLAGS="$LINK" -DLUAFLAME_FUZZ=ON -DLUAFLAME_TESTS=ON -DLUAFLAME_BENCH=OFF \
  -DLUAFLAME_WERROR=OFF -DLUAFLAME_STATIC_LIBSTDCXX=OFF >/dev/null
if [ $# -gt 0 ]; then cmake --build "$BUILD" -j"${JOBS:-2}" --target "$@"
else cmake --build "$BUILD" -j"${JOBS:-2}"; fi
echo "asan-build.sh: $BUILD built in $(( $(date +%s) - start )) s"
