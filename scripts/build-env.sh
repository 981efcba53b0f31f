# Sourced by every script that configures build/ (run.sh, test.sh, .ci/lint.sh):
# the one list of CMake options they all set, so that whichever runs first,
# the others find the same cache and never inherit a switched-off test suite.
# In CI (CI=true) warnings are errors (-Werror; LUAFLAME_WERROR=ON/OFF decides): the lint job's build is the
# test job's, and the newcomer test's (tests/ship) compiles with the same
# flags, so ccache serves it the same objects.
# ccache (Debian's, used by CMakeLists.txt when installed): CCACHE_BASEDIR is
# this clone, so paths in the commands are relative to it and a clone of the
# same sources in another folder hits the same cache entries.
LUAFLAME_CMAKE_OPTIONS=(-DCMAKE_BUILD_TYPE=Release -DLUAFLAME_TESTS=ON -DLUAFLAME_BENCH=ON
                        -DLUAFLAME_FUZZ=OFF -DLUAFLAME_WERROR="${LUAFLAME_WERROR:-$([ "${CI:-}" = true ] && echo ON || echo OFF)}")
export CCACHE_BASEDIR="$PWD"
export CCACHE_NOHASHDIR=1
