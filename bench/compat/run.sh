#!/usr/bin/env bash
# flamegraph.pl compatibility: renders every FlameGraph test input (test/results/*, and the two
# example captures collapsed by FlameGraph's own stackcollapse scripts) with `luaflame svg` and
# with flamegraph.pl, and the differential pairs with `luaflame diff [-n]` and with
# difffolded.pl [-n] | flamegraph.pl, then compares every frame (title, x, y, width, colour
# class) with compare.py. FlameGraph is not part of this repository: fetch it and pass its path.
#
#   bench/compat/run.sh BUILD_DIR FLAMEGRAPH_DIR [OUT]
#
# Prints one line per case and a summary; exits 1 when any case differs.
# Palette: java (flamegraph.pl's palette that colours by the _[j] _[i] _[k] annotations), so the
# colour classes are compared too.
set -uo pipefail
colors=${COLORS:-java}   # COLORS=hot: compare geometry and titles only (hot colours are random)
build=${1:?usage: run.sh BUILD_DIR FLAMEGRAPH_DIR [OUT]}
fg=${2:?usage: run.sh BUILD_DIR FLAMEGRAPH_DIR [OUT]}
out=${3:-/tmp/luaflame-compat}
here=$(cd "$(dirname "$0")" && pwd)
lf=$build/cli/luaflame
mkdir -p "$out/in"
pass=0 fail=0 failed=()

compare() {  # NAME FG.svg LF.svg [--no-colour]
  local r
  r=$("$here/compare.py" "$2" "$3" ${4:-})
  if [ $? -eq 0 ]; then pass=$((pass + 1)); printf 'same    %-60s %s\n' "$1" "${r%%$'\n'*}"
  else fail=$((fail + 1)); failed+=("$1"); printf 'DIFFER  %-60s %s\n' "$1" "$r"; fi
}

inputs=("$fg"/test/results/*)
perl "$fg/stackcollapse.pl" "$fg/example-dtrace-stacks.txt" >"$out/in/example-dtrace.folded"
gzip -dc "$fg/example-perf-stacks.txt.gz" | perl "$fg/stackcollapse-perf.pl" >"$out/in/example-perf.folded"
inputs+=("$out/in/example-dtrace.folded" "$out/in/example-perf.folded")

for f in "${inputs[@]}"; do
  n=$(basename "$f")
  perl "$fg/flamegraph.pl" --colors "$colors" "$f" >"$out/$n.fg.svg" 2>/dev/null
  "$lf" svg --colors "$colors" "$f" >"$out/$n.lf.svg" 2>/dev/null
  nocol=; [ "$colors" = hot ] && nocol=--no-colour  # hot: random colours in flamegraph.pl
  compare "$n" "$out/$n.fg.svg" "$out/$n.lf.svg" $nocol
done

# Differential pairs: the two Java captures of the same program, and each capture's
# JIT-annotated fold against its fully annotated one.
pairs=()
for opt in pid tid kernel jit all addrs; do
  pairs+=("perf-java-stacks-01-collapsed-$opt.txt perf-java-stacks-02-collapsed-$opt.txt")
done
for f in "$fg"/test/results/*-collapsed-jit.txt; do
  b=$(basename "$f" -collapsed-jit.txt)
  pairs+=("$b-collapsed-jit.txt $b-collapsed-all.txt")
done
for p in "${pairs[@]}"; do
  set -- $p
  for n in "" -n; do
    name="diff$n $1 $2"
    tag=$(echo "$name" | tr ' ' '_')
    perl "$fg/difffolded.pl" $n "$fg/test/results/$1" "$fg/test/results/$2" 2>/dev/null |
      perl "$fg/flamegraph.pl" >"$out/$tag.fg.svg" 2>/dev/null
    "$lf" diff $n "$fg/test/results/$1" "$fg/test/results/$2" >"$out/$tag.lf.svg" 2>/dev/null
    compare "$name" "$out/$tag.fg.svg" "$out/$tag.lf.svg"
  done
done

echo "summary: $pass same, $fail differ (of $((pass + fail)))"
[ "$fail" -eq 0 ]
