#!/usr/bin/env bash
# pprof and Pyroscope agents against a real luaflame-server, with clients no
# one here wrote: Go's runtime/pprof and `go tool pprof` (Debian golang-go),
# the official @pyroscope/nodejs agent and speedscope's app (npm, in
# tests/server/pprof/node_modules), requests built as pyroscope-go and
# pyroscope-java send them, and CORS.
#
#   pprof_test.sh CASE SERVER_BIN LUAFLAME_BIN
# Exit 77 (CTest: skipped) when the case's real client is not installed.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../ship/lib.sh"
case_=$1 server=$2 lf=$3
T=$SHIP_TMP

skip() { echo "SKIP: $*"; exit 77; }
json() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(eval(process.argv[1]))})' "$1"; }
need_go() {
  command -v go >/dev/null || skip "go (golang-go) not installed"
  export GOCACHE="$T/gocache" GOPATH="$T/gopath" GO111MODULE=off GOFLAGS= GOPROXY=off GOTOOLCHAIN=local
  (cd "$here" && go build -o "$T/goprof" goprof.go) || { fail "go build goprof"; exit 1; }
}
need_node_modules() {
  command -v node >/dev/null || skip "node not installed"
  [ -d "$here/node_modules/$1" ] || skip "$1 not installed (scripts/install-deps.sh --test)"
}
# post NAME URL CURL_ARGS...: the status in CODE, the body in BODY.
post() {
  local name=$1 url=$2; shift 2
  CODE=$(curl -sS -o "$T/$name.body" -w '%{http_code}' -X POST "$@" "$url")
  BODY=$(cat "$T/$name.body")
}
expect_code() {  # expect_code WANT WHAT
  if [ "$CODE" = "$1" ]; then pass "$2: $CODE"; else fail "$2: HTTP $CODE, wanted $1: ${BODY:0:400}"; fi
}
expect_eq() {  # expect_eq GOT WANT WHAT
  if [ "$1" = "$2" ]; then pass "$3: $1"; else fail "$3: got '$1', wanted '$2'"; fi
}
# raw_totals FILE: the sum of each sample type of a profile, as go tool pprof -raw reads it.
raw_totals() { go tool pprof -raw "$1" 2>/dev/null | node "$here/pprof_raw.mjs" | awk '{for (i = 2; i <= NF; i++) t[i] += $i} END {s = ""; for (i = 2; i <= NF; i++) s = s (i > 2 ? " " : "") t[i]; print s}'; }

case "$case_" in
go_runtime)  # a profile written by Go's runtime/pprof uploads, keeps its totals and stacks, and renders
  need_go
  "$T/goprof" cpu "$T/cpu.pb.gz" >/dev/null && "$T/goprof" heap "$T/heap.pb.gz" || { fail "goprof"; exit 1; }
  start_server "$server" || exit 1
  post cpu "$SHIP_URL/api/runs?name=gocpu" --data-binary @"$T/cpu.pb.gz"  # sniffed: gzip + protobuf
  expect_code 201 "upload of runtime/pprof CPU profile"
  id=$(echo "$BODY" | json j.id)
  run=$(curl -sS "$SHIP_URL/api/runs/$id")
  read -r want_samples want_ns <<<"$(raw_totals "$T/cpu.pb.gz")"
  expect_eq "$(echo "$run" | json j.metrics.samples.total)" "$want_samples" "samples total = go tool pprof's"
  expect_eq "$(echo "$run" | json j.metrics.time.total)" "$want_ns" "cpu nanoseconds total = go tool pprof's"
  go tool pprof -raw "$T/cpu.pb.gz" 2>/dev/null | node "$here/pprof_raw.mjs" | awk '{print $1, $2}' >"$T/want.txt"
  curl -sS "$SHIP_URL/api/runs/$id/profile.folded?metric=samples" | node "$here/pprof_raw.mjs" --folded >"$T/got.txt"
  if [ -s "$T/want.txt" ] && diff "$T/want.txt" "$T/got.txt" >"$T/stacks.diff"; then pass "stacks = go tool pprof's ($(wc -l <"$T/want.txt") stacks)"
  else fail "stacks differ from go tool pprof's: $(head -20 "$T/stacks.diff")"; fi
  svg=$(curl -sS "$SHIP_URL/api/runs/$id/flamegraph.svg")
  case "$svg" in *"<title>main.leaf "*) pass "rendered with main.leaf" ;; *) fail "flamegraph lacks main.leaf" ;; esac
  post heap "$SHIP_URL/api/runs?name=goheap" -H 'Content-Type: application/vnd.google.protobuf' --data-binary @"$T/heap.pb.gz"
  expect_code 201 "upload of runtime/pprof heap profile (by Content-Type)"
  id=$(echo "$BODY" | json j.id)
  read -r ao as io is <<<"$(raw_totals "$T/heap.pb.gz")"
  got=$(curl -sS "$SHIP_URL/api/runs/$id" | json '[j.metrics.alloc_count.total, j.metrics.alloc_bytes.total, j.metrics.live_count.total, j.metrics.live_bytes.total].join(" ")')
  expect_eq "$got" "$ao $as $io $is" "heap: alloc_objects alloc_space inuse_objects inuse_space"
  run_cmd svg "$lf" svg "$T/cpu.pb.gz"
  expect_rc 0 "luaflame svg FILE.pb.gz"
  expect_match "$OUT" '<title>main.leaf ' "luaflame svg draws the Go profile"
  expect_match "$OUT" '<title>all \([0-9.]+ m?s, 100%\)' "luaflame svg: cpu/nanoseconds titled as time, not as samples"
  run_cmd svgheap "$lf" svg "$T/heap.pb.gz"
  expect_match "$OUT" '<title>all \([0-9.]+ (KiB|MiB), 100%\)' "luaflame svg: inuse_space titled in bytes"
  run_cmd push env -u LUAFLAME_TOKEN "$lf" push --server "$SHIP_URL" --name pushed "$T/heap.pb.gz"
  expect_rc 0 "luaflame push FILE.pb.gz"
  ;;
go_tool)  # the exported profile.pb.gz reads in go tool pprof with the run's totals and stacks
  need_go
  start_server "$server" || exit 1
  printf 'main app.lua:1;step app.lua:20;[C] string.rep 30\nmain app.lua:1;step app.lua:20 12\nmain app.lua:1;idle app.lua:40 7\nwrite0;  3\n' >"$T/in.folded"
  post up "$SHIP_URL/api/runs?name=lua&units=ns" --data-binary @"$T/in.folded"
  expect_code 201 "upload (with a blank perf frame)"
  id=$(echo "$BODY" | json j.id)
  CODE=$(curl -sS -o "$T/exp.pb.gz" -w '%{http_code}' "$SHIP_URL/api/runs/$id/profile.pb.gz")
  expect_code 200 "GET profile.pb.gz"
  go tool pprof -raw "$T/exp.pb.gz" >"$T/raw.txt" 2>"$T/raw.err" || fail "go tool pprof -raw: $(cat "$T/raw.err")"
  expect_match "$(cat "$T/raw.txt")" 'cpu/nanoseconds' "sample type of metric time"
  expect_match "$(cat "$T/raw.txt")" 'step app.lua:20 s=20' "function with file and line"
  node "$here/pprof_raw.mjs" <"$T/raw.txt" >"$T/want.txt"
  curl -sS "$SHIP_URL/api/runs/$id/profile.folded" | node "$here/pprof_raw.mjs" --folded >"$T/got.txt"
  if diff "$T/want.txt" "$T/got.txt" >"$T/d"; then pass "go tool pprof -raw = folded read-back ($(wc -l <"$T/got.txt") stacks)"
  else fail "go tool pprof -raw differs from the folded read-back: $(cat "$T/d")"; fi
  expect_eq "$(raw_totals "$T/exp.pb.gz")" "52" "total in go tool pprof"
  top=$(go tool pprof -top "$T/exp.pb.gz" 2>/dev/null)
  expect_match "$top" 'string.rep' "go tool pprof -top lists [C] string.rep"
  CODE=$(curl -sS -o "$T/win.pb.gz" -w '%{http_code}' "$SHIP_URL/api/runs/$id/profile.pb.gz?focus=main%20app.lua:1;step%20app.lua:20")
  expect_code 200 "profile.pb.gz?focus="
  expect_eq "$(raw_totals "$T/win.pb.gz")" "42" "focus keeps the stacks under step"
  ;;
go_agent)  # requests exactly as pyroscope-go sends them: multipart profile [+ prev_profile] + sample_type_config
  need_go
  "$T/goprof" cpu "$T/cpu.pb.gz" >/dev/null && "$T/goprof" heap "$T/heap.pb.gz" || { fail "goprof"; exit 1; }
  start_server "$server" || exit 1
  now=$(date +%s%N)
  q="from=$((now - 10000000000))&until=$now&spyName=gospy&sampleRate=100&units=&aggregationType="
  post cpu "$SHIP_URL/ingest?name=goapp.cpu%7Benv%3Dci%7D&$q" -F "profile=@$T/cpu.pb.gz;filename=profile.pprof;type=application/octet-stream"
  expect_code 200 "pyroscope-go CPU push (multipart profile)"
  id=$(echo "$BODY" | json j.id)
  cfg='{"alloc_objects":{"units":"objects"},"alloc_space":{"units":"bytes"},"inuse_objects":{"units":"objects","aggregation":"average"},"inuse_space":{"units":"bytes","aggregation":"average"}}'
  printf '%s' "$cfg" >"$T/stc.json"
  post heap "$SHIP_URL/ingest?name=goapp.alloc_objects%7Benv%3Dci%7D&$q" \
    -F "profile=@$T/heap.pb.gz;filename=profile.pprof;type=application/octet-stream" \
    -F "sample_type_config=@$T/stc.json;filename=sample_type_config.json;type=application/octet-stream"
  expect_code 200 "pyroscope-go heap push (multipart profile + sample_type_config)"
  hid=$(echo "$BODY" | json j.id)
  read -r want_samples want_ns <<<"$(raw_totals "$T/cpu.pb.gz")"
  expect_eq "$(curl -sS "$SHIP_URL/api/runs/$id" | json '[j.metrics.samples.total, j.metrics.time.total, j.tags.env, j.tags.spy].join(" ")')" \
    "$want_samples $want_ns ci gospy" "CPU run totals and labels"
  read -r ao as io is <<<"$(raw_totals "$T/heap.pb.gz")"
  expect_eq "$(curl -sS "$SHIP_URL/api/runs/$hid" | json '[j.metrics.alloc_count.total, j.metrics.alloc_bytes.total, j.metrics.live_count.total, j.metrics.live_bytes.total].join(" ")')" \
    "$ao $as $io $is" "sample_type_config: objects/bytes sum -> alloc_*, average -> live_*"
  # Older agents send cumulative heap profiles with prev_profile: only the growth is stored.
  cfg2='{"alloc_objects":{"units":"objects","cumulative":true},"inuse_space":{"units":"bytes","aggregation":"average"}}'
  printf '%s' "$cfg2" >"$T/stc2.json"
  post prev "$SHIP_URL/ingest?name=oldgo.heap&$q" -F "profile=@$T/heap.pb.gz;filename=profile.pprof" \
    -F "prev_profile=@$T/heap.pb.gz;filename=profile.pprof" -F "sample_type_config=@$T/stc2.json;filename=sample_type_config.json"
  expect_code 200 "cumulative push with prev_profile"
  expect_eq "$(curl -sS "$SHIP_URL/api/runs/$(echo "$BODY" | json j.id)" | json '[j.metrics.alloc_count ? j.metrics.alloc_count.total : 0, j.metrics.live_bytes.total, j.metrics.alloc_bytes === undefined].join(" ")')" \
    "0 $is true" "profile - prev_profile for cumulative types; unconfigured types left out"
  "$T/goprof" goroutine "$T/g.pb.gz" >/dev/null
  post gor "$SHIP_URL/ingest?name=goapp.goroutines&$q" -F "profile=@$T/g.pb.gz;filename=profile.pprof"
  expect_code 422 "a sample type with no metric"
  expect_match "$BODY" "goroutine/count" "refused by name"
  ;;
java_agent)  # requests as pyroscope-java sends them: JFR multipart (refused by name), collapsed text
  start_server "$server" || exit 1
  now=$(date +%s)
  printf 'not really jfr' >"$T/jfr"
  post jfr "$SHIP_URL/ingest?name=javaapp.itimer%7Bhost%3Da%7D&from=$now&until=$now&format=jfr&spyName=javaspy&sampleRate=100&units=samples&aggregationType=sum" \
    -F "jfr=@$T/jfr;filename=jfr" -F "labels=@$T/jfr;filename=labels"
  expect_code 422 "JFR upload (format=jfr, multipart jfr + labels)"
  expect_match "$BODY" "format 'jfr' is not supported" "refused by name, not a 500"
  printf 'java/lang/Thread.run;App.main 7\nApp.main 3\n' >"$T/collapsed"
  post col "$SHIP_URL/ingest?name=javaapp.itimer%7Bhost%3Da%7D&from=$now&until=$now&spyName=javaspy&sampleRate=100&units=samples&aggregationType=sum" \
    --data-binary @"$T/collapsed"
  expect_code 200 "collapsed upload"
  expect_eq "$(curl -sS "$SHIP_URL/api/runs/$(echo "$BODY" | json j.id)" | json j.metrics.samples.total)" "10" "collapsed total"
  ;;
multipart)  # multipart read where taken, 415 elsewhere, never a 500
  start_server "$server" || exit 1
  printf 'a;b 3\n' >"$T/f"
  post m1 "$SHIP_URL/ingest?name=app.cpu" -F "profile=@$T/f"
  expect_code 200 "multipart folded on /ingest"
  post m2 "$SHIP_URL/api/runs?name=up" -F "profile=@$T/f"
  expect_code 201 "multipart folded on /api/runs"
  for route in /api/streams /api/runs/1/chunks /api/runs/1/finish; do
    post m3 "$SHIP_URL$route" -F "profile=@$T/f"
    expect_code 415 "multipart on $route"
  done
  post m4 "$SHIP_URL/ingest?name=app.cpu" -F "other=@$T/f"
  expect_code 400 "multipart without a profile part"
  post m5 "$SHIP_URL/ingest?name=app.cpu&format=pprof" --data-binary @"$T/f"
  expect_code 400 "format=pprof with a body that is not one"
  expect_match "$BODY" "pprof: " "says why"
  head -c 2000 /dev/urandom | gzip >"$T/junk.gz"
  post m6 "$SHIP_URL/api/runs?name=junk" --data-binary @"$T/junk.gz"
  expect_code 400 "gzip of junk"
  curl -sS "$SHIP_URL/healthz" >/dev/null || fail "server died"
  ;;
cors)  # --cors-origin: preflights, headers on reads, cross-origin writes only with the token
  start_server "$server" --cors-origin https://www.speedscope.app --cors-origin http://127.0.0.2:9 --token sekret || exit 1
  printf 'a;b 3\n' | curl -sS -X POST -H 'Authorization: Bearer sekret' --data-binary @- "$SHIP_URL/api/runs?name=c" >/dev/null
  h=$(curl -sS -i -X OPTIONS -H 'Origin: https://www.speedscope.app' -H 'Access-Control-Request-Method: GET' "$SHIP_URL/api/runs/1/speedscope.json")
  expect_match "$h" 'HTTP/1.1 204' "preflight answered"
  expect_match "$h" 'Access-Control-Allow-Origin: https://www.speedscope.app' "preflight allows the origin"
  expect_eq "$(echo "$h" | grep -c 'Access-Control-Allow-Origin')" "1" "one Allow-Origin header"
  h=$(curl -sS -i -H 'Origin: https://www.speedscope.app' "$SHIP_URL/api/runs/1/speedscope.json")
  expect_match "$h" 'Access-Control-Allow-Origin: https://www.speedscope.app' "read has the header"
  h=$(curl -sS -i -H 'Origin: https://evil.example' "$SHIP_URL/api/runs/1/speedscope.json")
  expect_eq "$(echo "$h" | grep -ci 'Access-Control-Allow')" "0" "other origins get no header"
  post w1 "$SHIP_URL/api/runs?name=x" -H 'Origin: https://www.speedscope.app' --data-binary 'a 1'
  expect_code 401 "cross-origin write without the token (--token set: every write needs it)"
  post w2 "$SHIP_URL/api/runs?name=x" -H 'Origin: https://evil.example' -H 'Authorization: Bearer sekret' --data-binary 'a 1'
  expect_code 201 "cross-origin write with the token"
  post w3 "$SHIP_URL/api/runs?name=x" -H "Origin: $SHIP_URL" -H 'Authorization: Bearer sekret' --data-binary 'a 1'
  expect_code 201 "same-origin write"
  ;;
cors_csrf)  # no --token: a named --cors-origin counts as the server's own in the CSRF rule, others do not
  start_server "$server" --cors-origin https://www.speedscope.app || exit 1
  post c1 "$SHIP_URL/api/runs?name=x" -H 'Origin: https://www.speedscope.app' -H 'Content-Type: text/plain' --data-binary 'a 1'
  expect_code 201 "a simple write from a named --cors-origin"
  post c2 "$SHIP_URL/api/runs?name=x" -H 'Origin: https://evil.example' -H 'Content-Type: text/plain' --data-binary 'a 1'
  expect_code 403 "a simple write from another origin (CSRF)"
  post c3 "$SHIP_URL/api/runs?name=x" -H 'Origin: https://evil.example' -H 'Content-Type: multipart/form-data; boundary=b' --data-binary $'--b\r\nContent-Disposition: form-data; name="profile"\r\n\r\na 1\r\n--b--\r\n'
  expect_code 403 "a multipart write from another origin (CSRF, refused before the parts are read)"
  post c4 "$SHIP_URL/api/runs/1/finish" -H 'Content-Type: multipart/form-data; boundary=b' --data-binary $'--b\r\nContent-Disposition: form-data; name="x"\r\n\r\n1\r\n--b--\r\n'
  expect_code 415 "multipart on a route that takes no multipart"
  ;;
node_agent)  # the official @pyroscope/nodejs agent: its pushes land as one live run with its totals
  need_node_modules @pyroscope/nodejs
  start_server "$server" || exit 1
  out=$(cd "$here" && timeout 120 node node_agent.mjs "$SHIP_URL" nodeapp 4) || { fail "agent run: $out"; exit 1; }
  echo "agent sent: $out"
  pushes=$(echo "$out" | json j.pushes)
  [ "$pushes" -ge 3 ] && pass "$pushes pushes" || fail "only $pushes pushes"
  expect_eq "$(echo "$out" | json 'j.statuses.every(s => s === 200)')" "true" "every push answered 200"
  runs=$(curl -sS "$SHIP_URL/api/runs?name=nodeapp")
  expect_eq "$(echo "$runs" | json j.total)" "1" "one run"
  expect_eq "$(echo "$runs" | json 'j.runs[0].status + " " + j.runs[0].source')" "live ingest" "a live ingest run"
  sent=$(echo "$out" | json '[j.totals["samples/count"], j.totals["wall/nanoseconds"], j.totals["inuse_objects/count"] ?? j.totals["objects/count"], j.totals["inuse_space/bytes"] ?? j.totals["space/bytes"]].join(" ")')
  got=$(echo "$runs" | json '(m => [m.samples.total, m.time.total, m.live_count.total, m.live_bytes.total].join(" "))(j.runs[0].metrics)')
  expect_eq "$got" "$sent" "run totals = what the agent sent (samples, wall ns, objects, bytes)"
  ;;
speedscope)  # speedscope's own app, served from another origin, opens a run (CORS) in headless Chromium
  need_node_modules speedscope
  [ -d "$here/../../browser/node_modules/playwright-core" ] || skip "playwright-core not installed (tests/browser)"
  command -v chromium >/dev/null || skip "chromium not installed"
  start_server "$server" --cors-origin '*' || exit 1
  printf 'main app.lua:1;step app.lua:20 30\nmain app.lua:1;idle app.lua:40 7\n' |
    curl -sS -X POST --data-binary @- "$SHIP_URL/api/runs?name=speedy" >/dev/null
  run_cmd browser timeout 120 node "$here/speedscope_browser.mjs" "$here/node_modules/speedscope/dist/release" "$SHIP_URL/api/runs/1/speedscope.json"
  expect_rc 0 "speedscope opened the run cross-origin"
  echo "$OUT"
  ;;
*) echo "unknown case $case_" >&2; exit 2 ;;
esac
[ "$SHIP_FAILED" = 0 ]
