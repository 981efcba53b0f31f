#!/usr/bin/env bash
# The gates that keep the tree clean (issue 15), for CI:
#   1. clang-format --dry-run --Werror over every C/C++ source (.clang-format)
#   2. a full build with -DLUAFLAME_WERROR=ON (-Wall -Wextra as errors)
#   3. clang-tidy (.clang-tidy) over every .cpp, with the build's compile
#      commands (-p build-lint), in parallel; headers through HeaderFilterRegex
# All three run even when one fails; the exit status is non-zero when any did.
# Installs what it needs (scripts/install-deps.sh --lint). The last full CI
# run (fresh clone, 2 idle cores, 35a271f): 1099 s, 771 s of it clang-tidy.
#   .ci/lint.sh [format|build|tidy ...]   (default: all three)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${LUAFLAME_LINT_BUILD:-$root/build-lint}
jobs=$(nproc 2>/dev/null || echo 2)
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(format build tidy)

if [ "$(id -u)" = 0 ]; then scripts/install-deps.sh --lint >/dev/null || exit 1; fi
for tool in clang-format clang-tidy cmake; do
  command -v "$tool" >/dev/null || { echo "lint: $tool missing (scripts/install-deps.sh --lint)" >&2; exit 1; }
done

# Every tracked C/C++ source of ours.
mapfile -t sources < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp')
mapfile -t units < <(git ls-files '*.c' '*.cpp')

failed=()
step_format() {
  echo "== clang-format --dry-run --Werror (${#sources[@]} files)"
  clang-format --dry-run --Werror "${sources[@]}" 2>&1 | grep -E '^[^ ].*: (error|warning):' | sort -u |
    sed -E 's/:[0-9]+:[0-9]+: (error|warning): / /' | uniq -c | sed 's/^/  /'
  clang-format --dry-run --Werror "${sources[@]}" >/dev/null 2>&1
}
# The build is the one scripts/test.sh makes (Release, every target), plus
# -Werror and compile_commands.json: .ci/run points LUAFLAME_LINT_BUILD at
# build/, so the test job reuses it. When it fails, $build/.lint-build-failed
# says so (.ci/run then lets the test job build without -Werror).
# ccache only when CCACHE_DIR is set, as in fuzz.sh and sanitizers.sh: on a
# fresh clone the cache is empty and each build has other flags, so it only
# adds its own cost.
step_build() {
  echo "== build with LUAFLAME_WERROR=ON in $build"
  local launcher=()
  [ -n "${CCACHE_DIR:-}" ] && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  mkdir -p "$build" && touch "$build/.lint-build-failed"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DLUAFLAME_WERROR=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
        "${launcher[@]}" >/dev/null || return 1
  timeout 1200 cmake --build "$build" -j"$jobs" -- -k 2>&1 | grep -E 'error|warning|Error' | head -80
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] && rm -f "$build/.lint-build-failed"
  return "$rc"
}
step_tidy() {
  echo "== clang-tidy -p $build over ${#units[@]} files, $jobs at a time"
  [ -f "$build/compile_commands.json" ] || { echo "lint: no $build/compile_commands.json (run the build step)" >&2; return 1; }
  # Only the files this build compiles (fuzz/ needs clang and -DLUAFLAME_FUZZ=ON:
  # .ci/fuzz.sh builds those with -Werror-clean clang instead).
  local db; db=$(grep -o '"file": *"[^"]*"' "$build/compile_commands.json" | sed 's/.*"\([^"]*\)"$/\1/')
  local -a todo=()
  for f in "${units[@]}"; do
    grep -qxF "$root/$f" <<<"$db" || continue
    [[ -z ${TIDY_ONLY:-} || $f =~ $TIDY_ONLY ]] && todo+=("$f")  # TIDY_ONLY: a path regex
  done
  echo "   ${#todo[@]} of ${#units[@]} files to check (fuzz/ is not in this build; TIDY_ONLY filters)"
  local out; out=$(mktemp -d)
  # One clang-tidy per file; a file's findings go to its own log, printed after.
  # -std: GCC 12 compiles C++17 by default, so CMake writes no -std flag, and
  # clang 14's default (C++14) would not know std::string_view. gnu++20, as
  # clang 14 rejects in C++17 what GCC 12 takes there (lambdas capturing
  # structured bindings: server/render.cpp:109, tests/server/test_http.cpp:290).
  printf '%s\n' "${todo[@]}" | timeout "${TIDY_TIMEOUT:-2400}" xargs -P "$jobs" -I{} sh -c \
    'f="$1"; log="$2/$(echo "$f" | tr / _).log"; clang-tidy -p "$3" --quiet --extra-arg=-std=gnu++20 "$f" >"$log" 2>&1 || echo "$f" >>"$2/failed"' \
    _ {} "$out" "$build"
  local xrc=$? rc=0
  # timeout: 124; xargs: 123 when a clang-tidy failed (those are listed below).
  if [ $xrc -ne 0 ] && [ $xrc -ne 123 ]; then
    echo "lint: clang-tidy stopped (exit $xrc; 124: over TIDY_TIMEOUT=${TIDY_TIMEOUT:-2400} s)" >&2
    rc=1
  fi
  if [ -s "$out/failed" ]; then
    rc=1
    while read -r f; do
      echo "-- $f"; grep -E 'warning:|error:' "$out/$(echo "$f" | tr / _).log" | sort -u | head -40
    done <"$out/failed"
  fi
  rm -rf "$out"
  return $rc
}

for s in "${steps[@]}"; do
  start=$SECONDS
  if "step_$s"; then echo "   ok ($((SECONDS - start)) s)"; else echo "   FAILED ($((SECONDS - start)) s)"; failed+=("$s"); fi
done
[ ${#failed[@]} -eq 0 ] || { echo "lint: failed: ${failed[*]}" >&2; exit 1; }
echo "lint: all gates pass"
