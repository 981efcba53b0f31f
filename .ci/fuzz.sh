#!/bin/sh
# CI job: runs the libFuzzer targets in fuzz/, built (clang, ASan + UBSan) in
# the sanitizer build the sanitize job shares (.ci/asan-build.sh, build-asan/),
# each for FUZZ_SECONDS (default 60) from a seed corpus made of tests/data,
# FUZZ_JOBS (default: the number of cores) at a time. Exits non-zero when any
# target finds something (the crashing input is left in build-asan/findings/).
# Usage: .ci/fuzz.sh [SECONDS]
set -eu
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-${FUZZ_SECONDS:-60}}
BUILD=${FUZZ_BUILD:-${SAN_BUILD:-build-asan}}
[ -n "${FUZZ_SKIP_DEPS:-}" ] || bash scripts/install-deps.sh --fuzz
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ missing (scripts/install-deps.sh installs clang, libfuzzer-14-dev)"; exit 1; }
TARGETS=${FUZZ_TARGETS:-"fuzz_folded fuzz_wire fuzz_json_request fuzz_gzip_body fuzz_query fuzz_pprof fuzz_multipart"}
start=$(date +%s)
SAN_BUILD=$BUILD bash .ci/asan-build.sh $TARGETS
mkdir -p "$BUILD/findings"
# Seed corpora, one folder per target.
for t in $TARGETS; do
  corpus="$BUILD/corpus/$t"
  mkdir -p "$corpus"
  case $t in
    fuzz_folded|fuzz_query) find tests/data -name "*.folded" -size -64k | head -200 | while read -r f; do cp "$f" "$corpus/$(echo "$f" | tr / _)"; done ;;
    fuzz_wire) printf 'luaflame-wire 1\nseq 0\nmetrics samples time\nf main\nf work\nn - 0 1 2\nn 0 1 3 4\nend 2\n' > "$corpus/seed" ;;
    fuzz_json_request) printf '{"stream":"u","name":"n","tags":{"a":"b"},"metrics":["samples"],"hz":99}' > "$corpus/seed" ;;
    fuzz_gzip_body) printf 'main;work 3\n' | gzip -c > "$corpus/seed"; (printf 'a 1\n' | gzip -c; printf 'b 2\n' | gzip -c) > "$corpus/two" ;;
    # [mode][at][at] + folded text: odd modes write it as pprof first (fuzz_pprof.cpp)
    fuzz_pprof) printf '\001\000\000main a.lua:1;work a.lua:9 3\nmain a.lua:1 2\n' > "$corpus/plain"
                printf '\107\000\000main;work 3\nmain;alloc 5\n' > "$corpus/gzip-two-prev" ;;
    # [route][unused] + a multipart body with boundary B (fuzz_multipart.cpp)
    fuzz_multipart)
      part() { printf -- '--B\r\nContent-Disposition: form-data; name="%s"; filename="%s"\r\nContent-Type: application/octet-stream\r\n\r\n%s\r\n' "$1" "$1" "$2"; }
      { printf '\000\000'; part profile 'main;work 3'; printf -- '--B--\r\n'; } > "$corpus/folded"
      { printf '\002\000'; part profile 'main;work 3'; part prev_profile 'main;work 1'
        part sample_type_config '{"cpu":{"units":"samples"}}'; printf -- '--B--\r\n'; } > "$corpus/three" ;;
  esac
done
# Each target fuzzes single-threaded for SECONDS_EACH of wall time, so
# FUZZ_JOBS of them (default: one per core) run side by side: each still has
# a core of its own for its whole minute, as when they ran one after another
# on an idle machine, and the job takes 4 minutes instead of 7 on 2 cores.
status=0
par=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
for t in $TARGETS; do rm -f "$BUILD/$t.secs"; done
printf '%s\n' $TARGETS | xargs -P "$par" -I{} sh -c '
  t=$1 b=$2 t0=$(date +%s)
  "$b/fuzz/$t" -max_total_time="$3" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$b/findings/$t-" -print_final_stats=1 "$b/corpus/$t" > "$b/$t.log" 2>&1 &&
    echo $(( $(date +%s) - t0 )) > "$b/$t.secs"' _ {} "$BUILD" "$SECONDS_EACH" ||
  true  # xargs says 123 when a target failed: each is reported below
for t in $TARGETS; do
  if [ ! -s "$BUILD/$t.secs" ]; then
    echo "fuzz.sh: $t FAILED (log $BUILD/$t.log, inputs $BUILD/findings/)"; tail -40 "$BUILD/$t.log"; status=1
  else
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$BUILD/$t.log" | grep -o '[0-9]*$')
    echo "fuzz.sh: $t ok: $runs runs in $(cat "$BUILD/$t.secs") s"
  fi
done
echo "fuzz.sh: total $(( $(date +%s) - start )) s ($par targets at a time)"
exit $status
