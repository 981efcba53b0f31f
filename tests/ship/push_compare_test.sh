#!/usr/bin/env bash
# luaflame push / compare against the real luaflame-server, one case per CTest
# test (each with its own server and data folder):
#
#   push_compare_test.sh CASE LUAFLAME LUAFLAME_SERVER
#
# The profiles are in tests/ship/data (see its README.md).
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
case_name="$1"; LF="$2"; SERVER_BIN="$3"
D="$here/data"
unset LUAFLAME_TOKEN LUAFLAME_SERVER

# push FILE NAME TAGS...: pushes, sets ID from the printed URL (…/runs/ID).
push() {
  local file="$1" name="$2"; shift 2
  local tags=(); for t in "$@"; do tags+=(--tag "$t"); done
  run_cmd push "$LF" push "$file" --server "$SHIP_URL" --name "$name" "${tags[@]}"
  ID="$(printf '%s' "$OUT" | sed -nE 's#^https?://[^ ]*/runs/([0-9]+)$#\1#p')"
  [ "$RC" -eq 0 ] && [ -n "$ID" ] || fail "push $file: exit $RC, stdout '$OUT', stderr '$ERR'"
}

# The total of a stored run's folded profile (sum of the last column).
stored_total() {
  curl -fsS "$SHIP_URL/api/runs/$1/profile.folded" | awk '{s += $NF} END {print s + 0}'
}

case "$case_name" in
push_prints_url)
  start_server "$SERVER_BIN" || exit 1
  push "$D/base.folded" app branch=main commit=abc123
  expect_match "$OUT" "^$SHIP_URL/runs/[0-9]+\$" "push prints the run's absolute URL"
  run=$(curl -fsS "$SHIP_URL/api/runs/$ID")
  expect_match "$run" '"name"[[:space:]]*:[[:space:]]*"app"' "the run has its name"
  expect_match "$run" '"branch"[[:space:]]*:[[:space:]]*"main"' "the run has the branch tag"
  expect_match "$run" '"commit"[[:space:]]*:[[:space:]]*"abc123"' "the run has the commit tag"
  total=$(stored_total "$ID")
  [ "$total" = 1000 ] && pass "stored total 1000" || fail "stored total $total, wanted 1000"
  run_cmd json "$LF" push "$D/base.folded" --server "$SHIP_URL" --name app --json
  expect_match "$OUT" '"id"' "--json prints the server's answer"
  ;;

push_stdin_units)
  start_server "$SERVER_BIN" || exit 1
  run_cmd stdin bash -c "printf 'a;b 1500\na;c 500\n' | '$LF' push - --server '$SHIP_URL' --name timed --units ns"
  expect_rc 0 "push from standard input with --units ns"
  id="${OUT##*/}"
  run=$(curl -fsS "$SHIP_URL/api/runs/$id")
  expect_match "$run" '"time"' "--units ns stores the time metric"
  ;;

push_gzip_large)
  # Over 64 KiB the body goes gzip-compressed; the stored totals must not change.
  start_server "$SERVER_BIN" || exit 1
  big="$SHIP_TMP/big.folded"
  awk 'BEGIN { for (i = 0; i < 20000; i++) printf "main.lua:1;handle app.lua:10;fn_%d app.lua:%d %d\n", i, i, i % 7 + 1 }' >"$big"
  want=$(awk '{s += $NF} END {print s}' "$big")
  push "$big" big
  total=$(stored_total "$ID")
  [ "$total" = "$want" ] && pass "gzip upload of $(wc -c <"$big") bytes stored whole ($want)" || fail "stored $total, wanted $want"
  run_cmd plain "$LF" push "$big" --server "$SHIP_URL" --name big --no-gzip
  expect_rc 0 "--no-gzip upload"
  ;;

push_too_big)
  # Over the server's --max-body (counted after gzip decoding): 413, said plainly, nothing stored.
  start_server "$SERVER_BIN" --max-body 64K || exit 1
  big="$SHIP_TMP/big.folded"
  awk 'BEGIN { for (i = 0; i < 5000; i++) printf "main;fn_%d %d\n", i, i + 1 }' >"$big"
  run_cmd big "$LF" push "$big" --server "$SHIP_URL" --name big
  expect_rc 2 "a profile over --max-body fails the push"
  expect_match "$ERR" "HTTP 413" "the message gives the server's 413"
  runs=$(curl -fsS "$SHIP_URL/api/runs?name=big")
  expect_match "$runs" '"total"[[:space:]]*:[[:space:]]*0' "nothing was stored"
  ;;

push_bad_line)
  start_server "$SERVER_BIN" || exit 1
  run_cmd bad "$LF" push "$D/bad_line.folded" --server "$SHIP_URL" --name broken
  expect_rc 2 "a bad line fails the push"
  expect_match "$ERR" "bad_line.folded:3:" "the message names the file and line 3"
  expect_match "$ERR" "HTTP 400" "the message gives the server's status"
  expect_empty "$OUT" "nothing on stdout"
  runs=$(curl -fsS "$SHIP_URL/api/runs?name=broken")
  expect_match "$runs" '"total"[[:space:]]*:[[:space:]]*0' "nothing was stored"
  ;;

push_bad_input)
  # Errors found before any request: a missing file, an empty file, no --name, a bad tag or URL.
  : >"$SHIP_TMP/empty.folded"
  run_cmd missing "$LF" push "$SHIP_TMP/nope.folded" --server http://127.0.0.1:9 --name x
  expect_rc 2 "missing file"; expect_match "$ERR" "cannot read .*nope.folded" "missing file is named"
  run_cmd empty "$LF" push "$SHIP_TMP/empty.folded" --server http://127.0.0.1:9 --name x
  expect_rc 2 "empty file"; expect_match "$ERR" "is empty" "empty file is called empty"
  run_cmd noname "$LF" push "$D/base.folded" --server http://127.0.0.1:9
  expect_rc 2 "no --name"; expect_match "$ERR" "--name is required" "no --name is explained"
  run_cmd badtag "$LF" push "$D/base.folded" --name x --tag novalue
  expect_rc 2 "bad tag"; expect_match "$ERR" "not KEY=VALUE" "bad tag is explained"
  # The server's own rule (lfw::tag_error, name_error), before anything is sent.
  run_cmd badkey "$LF" push "$D/base.folded" --server http://127.0.0.1:9 --name x --tag 'a key=v'
  expect_rc 2 "a tag key with a space"; expect_match "$ERR" "a tag key holds letters, digits" "the key rule is named"
  run_cmd badname "$LF" push "$D/base.folded" --server http://127.0.0.1:9 --name "$(printf 'a\tb')"
  expect_rc 2 "a name with a tab"; expect_match "$ERR" "no control characters" "the name rule is named"
  run_cmd badurl "$LF" push "$D/base.folded" --name x --server 127.0.0.1:8080
  expect_rc 2 "URL without scheme"; expect_match "$ERR" "http:// or https://" "bad URL is explained"
  ;;

push_no_server)
  port=$(free_port)
  run_cmd down "$LF" push "$D/base.folded" --server "http://127.0.0.1:$port" --name x --timeout 5
  expect_rc 2 "no server: push fails"
  expect_match "$ERR" "cannot reach http://127.0.0.1:$port" "no server: the message names the server"
  run_cmd down2 "$LF" compare --server "http://127.0.0.1:$port" --base 1 --head 2 --timeout 5
  expect_rc 2 "no server: compare fails with 2 (an error, not a regression)"
  ;;

push_token)
  start_server "$SERVER_BIN" --token s3cret || exit 1
  run_cmd none "$LF" push "$D/base.folded" --server "$SHIP_URL" --name app
  expect_rc 2 "no token: refused"
  expect_match "$ERR" "HTTP 401" "no token: the status is given"
  expect_match "$ERR" "LUAFLAME_TOKEN" "no token: the fix is named"
  run_cmd wrong "$LF" push "$D/base.folded" --server "$SHIP_URL" --name app --token nope
  expect_rc 2 "wrong token: refused"
  run_cmd env env LUAFLAME_TOKEN=s3cret "$LF" push "$D/base.folded" --server "$SHIP_URL" --name app
  expect_rc 0 "token from LUAFLAME_TOKEN: accepted"
  run_cmd flag "$LF" push "$D/base.folded" --server "$SHIP_URL" --name app --token s3cret
  expect_rc 0 "token from --token: accepted"
  ;;

compare_regression_fails)
  start_server "$SERVER_BIN" || exit 1
  push "$D/base.folded" app branch=main; base=$ID
  push "$D/head_slow.folded" app branch=feature; head=$ID
  run_cmd cmp "$LF" compare --server "$SHIP_URL" --base "$base" --head "$head" --threshold 5%
  expect_rc 1 "a 30-point regression fails --threshold 5%"
  expect_match "$OUT" "validate" "the summary names the function that grew"
  expect_match "$ERR" "regression" "stderr says it is a regression"
  expect_match "$OUT" "diff.svg" "the summary links the differential flame graph"
  ;;

compare_within_threshold)
  start_server "$SERVER_BIN" || exit 1
  push "$D/base.folded" app branch=main; base=$ID
  push "$D/head_ok.folded" app branch=feature; head=$ID
  run_cmd cmp "$LF" compare --server "$SHIP_URL" --base "$base" --head "$head" --threshold 5
  expect_rc 0 "shares within 2 points pass --threshold 5"
  expect_match "$OUT" "[A-Za-z]" "a Markdown summary is printed"
  # Without a threshold even the regression passes: only --threshold fails a job.
  push "$D/head_slow.folded" app branch=feature; slow=$ID
  run_cmd nothr "$LF" compare --server "$SHIP_URL" --base "$base" --head "$slow"
  expect_rc 0 "no --threshold: never exit 1"
  ;;

compare_selector_latest_main)
  # --base NAME,K=V is the latest run of NAME with those tags: the second main run here.
  start_server "$SERVER_BIN" || exit 1
  push "$D/head_slow.folded" app branch=main        # an old main run that was slow
  push "$D/base.folded" app branch=main; main2=$ID  # the latest main run
  push "$D/base.folded" other branch=main           # another name: ignored
  push "$D/head_ok.folded" app branch=feature; head=$ID
  run_cmd cmp "$LF" compare --server "$SHIP_URL" --base app,branch=main --head "$head" --threshold 5 --json
  expect_rc 0 "head_ok against the latest main run passes"
  expect_match "$OUT" "\"base\"[^,]*[^0-9]$main2[^0-9]" "the base is the latest main run ($main2)"
  push "$D/head_slow.folded" app branch=feature; slow=$ID
  run_cmd cmp2 "$LF" compare --server "$SHIP_URL" --base app,branch=main --head "$slow" --threshold 5
  expect_rc 1 "head_slow against the latest main run fails"
  ;;

compare_head_selector)
  # --head NAME,K=V: the newest run with those tags, e.g. one `luaflame run` streamed.
  start_server "$SERVER_BIN" || exit 1
  push "$D/base.folded" app branch=main
  printf 'function hot() local s = 0 for i = 1, 1e7 do s = s + i %% 3 end return s end\nhot()\n' >"$SHIP_TMP/t.lua"
  run_cmd run "$LF" run --server "$SHIP_URL" --name app --tags branch=feature,commit=f00d -q -- "$SHIP_TMP/t.lua"
  expect_rc 0 "luaflame run streamed the head run"
  run_cmd cmp "$LF" compare --server "$SHIP_URL" --base app,branch=main --head app,commit=f00d --threshold 5
  expect_rc 1 "--head app,commit=f00d finds the streamed run, where hot() is all new: a regression"
  expect_match "$OUT" "hot " "the summary names hot()"
  run_cmd none "$LF" compare --server "$SHIP_URL" --base app,branch=main --head app,commit=beef
  expect_rc 2 "--head that matches no run: an error"
  expect_match "$ERR" "no run with that name and those tags" "and it says so"
  ;;

run_odd_names)
  # A run named and tagged with what the server's rule refuses (a tab, a key with a space and
  # a byte that is not UTF-8, a control character in a value): `luaflame run` makes them pass
  # (lfw::fit_text, fit_tag_key) and the run lands; before, the server answered 400 and the
  # profile went to the fallback file.
  start_server "$SERVER_BIN" || exit 1
  printf 'local s = 0 for i = 1, 3e6 do s = s + i %% 7 end\n' >"$SHIP_TMP/t.lua"
  run_cmd run env -C "$SHIP_TMP" "$LF" run --server "$SHIP_URL" --name "$(printf 'odd\tname')" \
    --tag "$(printf 'a key\376=v\001')" -q -- "$SHIP_TMP/t.lua"
  expect_rc 0 "luaflame run with odd name and tag"
  if ls "$SHIP_TMP"/*undelivered* >/dev/null 2>&1; then fail "a fallback file was written"; else pass "no fallback file"; fi
  runs=$(curl -fsS "$SHIP_URL/api/runs")
  expect_match "$runs" '"name":"odd\\\\x09name"' "the run landed, its name with the tab as \\x09"
  expect_match "$runs" '"a_key_xFE":"v\\\\x01"' "its tag key with '_' for what a key cannot hold, the value's \\1 as \\x01"
  ;;

compare_missing_base)
  start_server "$SERVER_BIN" || exit 1
  push "$D/base.folded" app branch=feature; head=$ID
  run_cmd cmp "$LF" compare --server "$SHIP_URL" --base app,branch=main --head "$head" --threshold 5
  expect_rc 2 "no main run yet: an error by default"
  expect_match "$ERR" "HTTP 404" "the 404 is reported"
  run_cmd allow "$LF" compare --server "$SHIP_URL" --base app,branch=main --head "$head" --threshold 5 --allow-missing-base
  expect_rc 0 "no main run yet with --allow-missing-base: a pass"
  expect_match "$OUT" "No base run" "and it says so"
  run_cmd nohead "$LF" compare --server "$SHIP_URL" --base app,branch=main --head 999999 --allow-missing-base
  expect_rc 2 "an unknown head stays an error even with --allow-missing-base"
  ;;

curl_equivalents)
  # The curl commands docs/ship.md gives, so nothing in CI needs the luaflame binary.
  # --url-query / --data-urlencode encode the '=' inside tag=K=V.
  start_server "$SERVER_BIN" || exit 1
  run_cmd c1 curl -sS --fail-with-body --data-binary "@$D/base.folded" \
    --url-query name=app --url-query tag=branch=main --url-query tag=commit=abc "$SHIP_URL/api/runs"
  expect_rc 0 "curl push"
  url=$(json_str "$OUT" url)
  expect_match "$url" "^$SHIP_URL/runs/[0-9]+\$" "curl push answers the run's URL"
  run=$(curl -fsS "$SHIP_URL/api/runs/$(json_num "$OUT" id)")
  expect_match "$run" '"branch"[[:space:]]*:[[:space:]]*"main"' "the curl-pushed run has its branch tag"
  run_cmd c2 curl -sS --fail-with-body --data-binary "@$D/head_slow.folded" \
    --url-query name=app --url-query tag=branch=feature "$SHIP_URL/api/runs"
  head=$(json_num "$OUT" id)
  run_cmd c3 bash -c "gzip -c '$D/head_ok.folded' | curl -sS --fail-with-body -H 'Content-Encoding: gzip' \
    --data-binary @- --url-query name=app --url-query tag=branch=feature '$SHIP_URL/api/runs'"
  expect_rc 0 "curl push of a gzip body"
  code=$(curl -sS -o "$SHIP_TMP/diff.json" -w '%{http_code}' -G --data-urlencode base_name=app \
    --data-urlencode base_tag=branch=main --data-urlencode "head=$head" --data-urlencode threshold=5 "$SHIP_URL/api/diff")
  [ "$code" = 412 ] && pass "curl compare past the threshold answers 412" || fail "curl compare answered $code"
  expect_match "$(cat "$SHIP_TMP/diff.json")" '"markdown"' "the diff answer carries the Markdown"
  expect_match "$(cat "$SHIP_TMP/diff.json")" 'validate' "and names the function that grew"
  run_cmd c4 curl -sS --fail-with-body -G --data-urlencode base_name=app --data-urlencode base_tag=branch=main \
    --data-urlencode "head=$head" --data-urlencode threshold=5 "$SHIP_URL/api/diff"
  expect_rc 22 "curl --fail-with-body exits 22 on the regression"
  # The short forms docs/ship.md shows first: tag=K=V as typed.
  run_cmd c6 curl -sS --fail-with-body --data-binary "@$D/base.folded" "$SHIP_URL/api/runs?name=app&tag=branch=main&tag=commit=abc123"
  expect_rc 0 "curl push with tag=K=V typed in the URL"
  run=$(curl -fsS "$SHIP_URL/api/runs/$(json_num "$OUT" id)")
  expect_match "$run" '"commit"[[:space:]]*:[[:space:]]*"abc123"' "the typed tag=commit=abc123 is stored whole"
  code=$(curl -sS -o /dev/null -w '%{http_code}' "$SHIP_URL/api/diff?base_name=app&base_tag=branch=main&head=$head&threshold=5")
  [ "$code" = 412 ] && pass "curl compare with base_tag=K=V typed: 412" || fail "curl compare (typed) answered $code"
  run_cmd c5 curl -sS --fail-with-body -G --data-urlencode base_name=app --data-urlencode base_tag=branch=main \
    --data-urlencode "head=$head" --data-urlencode threshold=50 "$SHIP_URL/api/diff"
  expect_rc 0 "curl compare within a 50-point threshold answers 200"
  ;;

ci_flow)
  # docs/ship.md's CI steps (push, compare against the latest main with
  # --allow-missing-base, fail on exit 1) over three pipelines.
  start_server "$SERVER_BIN" || exit 1
  pipeline() {  # pipeline FILE BRANCH SHA: sets RC as the job's compare step would
    local url
    url=$("$LF" push "$1" --server "$SHIP_URL" --name myapp --tag commit="$3" --tag branch="$2") || { RC=99; return; }
    RC=0
    "$LF" compare --server "$SHIP_URL" --base myapp,branch=main --head "${url##*/}" \
      --threshold 5 --allow-missing-base >"$SHIP_TMP/comparison.md" 2>"$SHIP_TMP/compare.err" || RC=$?
    OUT="$(cat "$SHIP_TMP/comparison.md")"; ERR="$(cat "$SHIP_TMP/compare.err")"
  }
  pipeline "$D/base.folded" main c1
  expect_rc 0 "first pipeline on main: no base yet, passes"
  expect_match "$OUT" "No base run" "first pipeline on main says there is nothing to compare"
  pipeline "$D/head_ok.folded" main c2
  expect_rc 0 "second pipeline on main compares with the first and passes"
  pipeline "$D/head_slow.folded" feature c3
  expect_rc 1 "a pull request with a regression fails"
  expect_match "$OUT" "validate" "its comment names the function"
  pipeline "$D/head_ok.folded" feature c4
  expect_rc 0 "a pull request without one passes"
  ;;

*)
  echo "unknown case $case_name" >&2; exit 2 ;;
esac
ship_finish
