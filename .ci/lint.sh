#!/usr/bin/env bash
# The gates that keep the tree clean (issue 15), for CI:
#   1. clang-format --dry-run --Werror over every C/C++ source (.clang-format),
#      the walls between the server's rooms and no source file over 600
#      lines in server/, collector/, engine/ (step_walls; functions over 80
#      lines are clang-tidy's: their folders' .clang-tidy)
#   2. a full build with -DLUAFLAME_WERROR=ON (-Wall -Wextra as errors)
#   3. clang-tidy (.clang-tidy) over every .cpp, with the build's compile
#      commands (-p build-lint), in parallel; headers through HeaderFilterRegex;
#      beside the build (2 and 3 together), and skipping files whose exact
#      input passed before (a cache outside the clone: step_tidy)
# All three run even when one fails; the exit status is non-zero when any did.
# Installs what it needs (scripts/install-deps.sh --lint). The last full CI
# run (fresh clone, 2 idle cores, 35a271f): 1099 s, 771 s of it clang-tidy.
#   .ci/lint.sh [format|configure|build|tidy ...]   (default: format build tidy)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${LUAFLAME_LINT_BUILD:-$root/build-lint}
jobs=$(nproc 2>/dev/null || echo 2)
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(format walls build tidy)

if [ "$(id -u)" = 0 ]; then scripts/install-deps.sh --lint >/dev/null || exit 1; fi
for tool in clang-format clang-tidy cmake; do
  command -v "$tool" >/dev/null || { echo "lint: $tool missing (scripts/install-deps.sh --lint)" >&2; exit 1; }
done

source scripts/build-env.sh

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
# The server's rooms (docs/architecture.md): what a folder's files may not
# include. A line: FOLDER, then the include prefixes refused there; an
# exception is a whole path after '!'. The collector reaches pprof only
# through libluaflame-pprof.so (collector/pprof/): luaflame.so links no protobuf.
walls='
server/store    http/ handlers/ ingest/ views/
server/views    http/ handlers/ ingest/
server/ingest   http/ handlers/ views/ !http/error.hpp
server/http     handlers/ ingest/
collector/core  luaflame/pprof.hpp
collector/vm    luaflame/pprof.hpp
'
step_walls() {
  echo "== walls between the server's rooms; files of at most 600 lines"
  local dir bad rc=0 line
  while read -r dir rest; do
    [ -n "$dir" ] || continue
    local -a deny=() allow=()
    for w in $rest; do [[ $w == !* ]] && allow+=("${w#!}") || deny+=("$w"); done
    while IFS= read -r line; do
      local inc=${line#*#include \"}; inc=${inc%%\"*}
      for a in "${allow[@]+"${allow[@]}"}"; do [ "$inc" = "$a" ] && continue 2; done
      for d in "${deny[@]}"; do
        [[ $inc == "$d"* ]] && { echo "  ${line%%:#*}: includes $inc (not in $dir)"; rc=1; }
      done
    done < <(git grep -n '#include "' -- "$dir" || true)
  done <<<"$walls"
  # The collector's parts never include their session back: only the
  # session's own files (session*.cpp; jsession.cpp, jhost.cpp and jhooks.cpp) wire them
  # (docs/architecture.md).
  while IFS= read -r line; do
    echo "  $line: a part includes the session (only session*.cpp may)"; rc=1
  done < <(git grep -l '#include "vm/puc/session.hpp"' -- collector ':!collector/vm/puc/session*.cpp' || true)
  while IFS= read -r line; do
    echo "  $line: a part includes the session (only jsession.cpp, jhost.cpp and jhooks.cpp may)"; rc=1
  done < <(git grep -l '#include "vm/luajit/jsession.hpp"' -- collector ':!collector/vm/luajit/jsession.cpp' \
             ':!collector/vm/luajit/jhost.cpp' ':!collector/vm/luajit/jhooks.cpp' || true)
  # No file over 600 lines where the components live (issue 28).
  local n f
  while read -r n f; do
    [ "$f" = total ] || [ "$n" -le 600 ] || { echo "  $f: $n lines (over 600)"; rc=1; }
  done < <(git ls-files -z -- 'server/*' 'collector/*' 'engine/*' |
    grep -zE '\.(c|cc|cpp|h|hpp)$' | xargs -0 wc -l)
  return $rc
}
# The build is the one scripts/test.sh makes (scripts/build-env.sh: Release,
# every target, through ccache), with -Werror and compile_commands.json:
# .ci/run points LUAFLAME_LINT_BUILD at build/, so the test job reuses it.
# When it fails, $build/.lint-build-failed says so (.ci/run then lets the
# test job build without -Werror).
configure() {
  mkdir -p "$build" && touch "$build/.lint-build-failed"
  cmake -S . -B "$build" "${LUAFLAME_CMAKE_OPTIONS[@]}" -DLUAFLAME_WERROR=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
        >/dev/null
}
step_build() {
  echo "== build with LUAFLAME_WERROR=ON in $build"
  configure || return 1
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
  # A cache of clean verdicts outside the clone (.ci/tidy_keys.py: a key per
  # file over its preprocessed text, command and the configuration): a file
  # whose key has passed before is not checked again; with no cache (a new
  # machine) every file is. LUAFLAME_TIDY_CACHE=off checks every file always.
  local cache=${LUAFLAME_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/luaflame/tidy}
  local out; out=$(mktemp -d)
  if [ "$cache" != off ] && mkdir -p "$cache" && command -v python3 >/dev/null; then
    python3 .ci/tidy_keys.py "$build" "$root" "${todo[@]}" >"$out/keys" || : >"$out/keys"
    local -a left=()
    local key f
    while read -r key f; do
      if [ "$key" != none ] && [ -e "$cache/$key" ]; then continue; fi
      left+=("$f")
    done <"$out/keys"
    [ -s "$out/keys" ] || left=("${todo[@]}")
    echo "   $(( ${#todo[@]} - ${#left[@]} )) passed before with the same input (cache $cache): ${#left[@]} to run"
    todo=("${left[@]+"${left[@]}"}")
  fi
  # One clang-tidy per file; a file's findings go to its own log, printed after.
  # -std: GCC 12 compiles C++17 by default, so CMake writes no -std flag
  # (cxx_std_17), and clang 14's default (C++14) would not know
  # std::string_view: gnu++17, the standard the build compiles (and the
  # sanitizer build's clang is given). gnu++20 was used while clang 14 rejected
  # two lambdas capturing structured bindings that GCC 12 took; gone now, and
  # C++20's library headers made each file 17% longer to read (cli/cmd_run.cpp:
  # 114,072 preprocessed lines against 97,380) and its clang-tidy 13% slower.
  [ ${#todo[@]} -gt 0 ] || printf '' >"$out/none"
  [ ${#todo[@]} -eq 0 ] || printf '%s\n' "${todo[@]}" | timeout "${TIDY_TIMEOUT:-2400}" xargs -P "$jobs" -I{} sh -c \
    'f="$1"; log="$2/$(echo "$f" | tr / _).log"; clang-tidy -p "$3" --quiet --extra-arg=-std=gnu++17 "$f" >"$log" 2>&1 || echo "$f" >>"$2/failed"' \
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
  # Remember the files that passed (the cache of clean verdicts).
  if [ -s "$out/keys" ] && [ $xrc -eq 0 -o $xrc -eq 123 ]; then
    while read -r key f; do
      [ "$key" = none ] || grep -qxF "$f" "$out/failed" 2>/dev/null || : >"$cache/$key"
    done <"$out/keys"
  fi
  rm -rf "$out"
  return $rc
}

# configure: build/'s cache, compile commands and the generated protobuf
# header, all clang-tidy needs; CI starts the tidy step beside the build then.
step_configure() {
  echo "== configure $build (compile commands, generated headers)"
  configure && cmake --build "$build" --target luaflame_pprof_proto >/dev/null
}
run_step() {
  local s=$1 start=$SECONDS
  if "step_$s"; then echo "   ok ($((SECONDS - start)) s)"; else echo "   FAILED ($((SECONDS - start)) s)"; return 1; fi
}
# With both, clang-tidy runs beside the build: it needs only the compile
# commands and the generated protobuf header, made first.
if [[ " ${steps[*]} " == *" build "* && " ${steps[*]} " == *" tidy "* ]]; then
  together=$(mktemp -d)
  for s in "${steps[@]}"; do
    [ "$s" = format ] && { run_step format || failed+=(format); }
    [ "$s" = walls ] && { run_step walls || failed+=(walls); }
  done
  if configure && cmake --build "$build" --target luaflame_pprof_proto >/dev/null 2>&1; then
    (run_step build >"$together/build.out" 2>&1; echo $? >"$together/build.rc") &
    run_step tidy || failed+=(tidy)
    wait
    cat "$together/build.out"
    [ "$(cat "$together/build.rc")" = 0 ] || failed+=(build)
  else
    echo "lint: cmake could not configure $build" >&2; failed+=(build tidy)
  fi
  rm -rf "$together"
else
  for s in "${steps[@]}"; do run_step "$s" || failed+=("$s"); done
fi
[ ${#failed[@]} -eq 0 ] || { echo "lint: failed: ${failed[*]}" >&2; exit 1; }
echo "lint: all gates pass"
