#!/usr/bin/env bash
# Installs every dependency (build and test), builds, and runs the whole test
# suite with CTest; arguments go to ctest (a selection: -R REGEX, -L LABEL).
# Screenshots of the browser tests land in build/screenshots.
#
# It never reports success for tests it did not run:
#   - the options it depends on are set here, not inherited from a cached
#     build/ (scripts/run.sh configures the same folder with the same ones);
#   - ctest --no-tests=error: a selection that matches nothing fails;
#   - every test registered for the selection must have run and passed:
#     fewer run than registered, or any failed, exits 1;
#   - a test skipped for a missing tool (exit 77, SKIP_RETURN_CODE) is shown
#     as skipped; with CI=true a skip fails the run too, but for those named
#     by LUAFLAME_ALLOWED_SKIPS (a regex of test names).
# In CI (.ci/run) the lint job has already built build/ (with -Werror), so the
# build step here only checks that it is up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --test
source scripts/build-env.sh
cmake -S . -B build "${LUAFLAME_CMAKE_OPTIONS[@]}" >/dev/null
cmake --build build -j"$(nproc)"

registered=$(ctest --test-dir build -N "$@" | sed -n 's/^Total Tests: *\([0-9]*\)$/\1/p')
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
ctest --test-dir build --output-on-failure --no-tests=error -j2 --timeout 900 "$@" 2>&1 | tee "$log" ||
  rc=$?
# "100% tests passed, 0 tests failed out of 245": skipped tests are in the total.
read -r failed total < <(sed -n 's/.* \([0-9]*\) tests failed out of \([0-9]*\)$/\1 \2/p' "$log" | tail -n1) ||
  true
skipped=$(grep -cE '^ *[0-9]+ - .* \(Skipped\)$' "$log" || true)
echo "test.sh: ${total:-0} of ${registered:-?} registered tests ran: $((${total:-0} - ${failed:-0} - skipped))" \
     "passed, ${failed:-?} failed, $skipped skipped"
if [ -z "${total:-}" ] || [ "${registered:-0}" -eq 0 ] || [ "$total" -ne "$registered" ]; then
  echo "test.sh: FAILED: ${total:-no} tests ran where ${registered:-0} are registered" >&2
  exit 1
fi
if [ "${CI:-}" = true ] && [ "$skipped" -gt 0 ]; then
  unexpected=$(grep -E '^ *[0-9]+ - .* \(Skipped\)$' "$log" | sed -E 's/^ *[0-9]+ - (.*) \(Skipped\)$/\1/' |
               grep -vE "${LUAFLAME_ALLOWED_SKIPS:-^$}" || true)
  if [ -n "$unexpected" ]; then
    echo "test.sh: FAILED: CI installs every tool, yet these were skipped:" >&2
    echo "$unexpected" >&2
    exit 1
  fi
fi
exit "$rc"
