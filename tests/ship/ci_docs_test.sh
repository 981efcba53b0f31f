#!/usr/bin/env bash
# Runs the CI jobs that docs/ci.md gives, as written (extract_ci.awk pulls
# their shell out of the Markdown), against a real server, for three
# pipelines: the first on main (no base yet: passes), a pull request that adds
# a slow function (fails with exit 1), one that does not (passes).
#
#   ci_docs_test.sh github|gitlab LUAFLAME LUAFLAME_SERVER REPO_ROOT
#
# Not exercised: installing luaflame (the build is ship.host.build's) and
# posting the comment (needs GitHub or GitLab); the comment file is checked.
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
job="$1"; LF="$2"; SERVER_BIN="$3"; root="$4"
unset LUAFLAME_TOKEN LUAFLAME_SERVER

script="$SHIP_TMP/job.sh"
{ echo "set -eo pipefail"; awk -v job="$job" -f "$here/extract_ci.awk" "$root/docs/ci.md"; } >"$script"
grep -q "luaflame compare" "$script" || { echo "FAIL: no $job job found in docs/ci.md" >&2; cat "$script" >&2; exit 1; }

start_server "$SERVER_BIN" || exit 1
mkdir -p "$SHIP_TMP/bin"
ln -s "$(readlink -f "$LF")" "$SHIP_TMP/bin/luaflame"

# pipeline NAME BRANCH SHA SLOW: a fresh checkout of a project whose test
# suite (tests/run.lua) spends its time in checks(), and with SLOW=1 as much
# again in slow_path(). Sets RC, and COMMENT to the comment the job wrote.
pipeline() {
  local dir="$SHIP_TMP/$1"
  mkdir -p "$dir/tests"
  cat >"$dir/tests/run.lua" <<'LUA'
function checks() local s = 0 for i = 1, 1.5e7 do s = s + i % 7 end return s end
function slow_path() local s = 0 for i = 1, 1.5e7 do s = s + i % 5 end return s end
checks()
if os.getenv("SLOW") == "1" then slow_path() end
print("tests passed")
LUA
  : >"$dir/summary.md"
  (
    cd "$dir" || exit 99
    export PATH="$SHIP_TMP/bin:$PATH" LUAFLAME_SERVER="$SHIP_URL" SLOW="$4"
    if [ "$job" = github ]; then
      export GITHUB_SHA="$3" BRANCH="$2" GITHUB_STEP_SUMMARY="$dir/summary.md" PR="" GITHUB_REPOSITORY=acme/app
    else
      export CI_COMMIT_SHA="$3" CI_COMMIT_SHORT_SHA="${3:0:8}" CI_COMMIT_BRANCH="$2" CI_DEFAULT_BRANCH=main
      unset CI_MERGE_REQUEST_IID CI_MERGE_REQUEST_SOURCE_BRANCH_NAME
    fi
    bash "$script"
  ) >"$dir/job.out" 2>"$dir/job.err"
  RC=$?
  COMMENT="$(cat "$dir/comment.md" 2>/dev/null)"
  OUT="$(cat "$dir/job.out")"; ERR="$(cat "$dir/job.err")"
}

pipeline p1 main 1111111111aaaa 0
expect_rc 0 "$job: first pipeline on main passes (no base yet)"
expect_match "$COMMENT" "$SHIP_URL/runs/[0-9]+" "$job: the comment links the run"
expect_match "$COMMENT" "No base run" "$job: and says there is no main run to compare with yet"

pipeline p2 feature 2222222222bbbb 1
expect_rc 1 "$job: a pull request that adds slow_path fails"
expect_match "$COMMENT" "slow_path" "$job: the comment names slow_path"
expect_match "$COMMENT" "diff.svg" "$job: the comment links the differential flame graph"

pipeline p3 feature 3333333333cccc 0
expect_rc 0 "$job: a pull request without it passes"
expect_no_match "$COMMENT" "slow_path" "$job: and its comment does not mention slow_path"

if [ "$job" = github ]; then
  expect_match "$(cat "$SHIP_TMP/p2/summary.md")" "slow_path" "github: the job summary holds the comparison"
fi
all=$(curl -fsS "$SHIP_URL/api/runs?name=myapp")
expect_match "$all" '"total"[[:space:]]*:[[:space:]]*3[[:space:]]*,[[:space:]]*"total_exact"' "$job: one run per pipeline (the run step does not stream a second one)"
runs=$(curl -fsS "$SHIP_URL/api/runs?name=myapp&tag=commit%3D2222222222bbbb")
expect_match "$runs" '"branch"[[:space:]]*:[[:space:]]*"feature"' "$job: the run is tagged with its commit and branch"
ship_finish
