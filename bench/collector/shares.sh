#!/usr/bin/env bash
# Sampled against traced self shares on real programs no one here wrote:
# each program runs ROUNDS times under --mode sample and ROUNDS times under
# --mode trace (interleaved); the self (leaf) shares of each frame, summed
# over the rounds, are printed side by side for the frames with >= 1% in
# either, with the largest gap.
#   bench/collector/shares.sh [BUILD_DIR] [ROUNDS] [PENLIGHT_CHECKOUT]
# Needs Debian's lua5.4, busted, ldoc (lua-ldoc), lua-penlight, lua-dkjson,
# lua-lpeg; the busted suite is penlight's own spec/ from a checkout of
# https://github.com/lunarmodules/Penlight (skipped without one).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
rounds=${2:-3}
pl=${3:-}
LF=$(realpath "$build/cli/luaflame")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name|directory|script and arguments
progs=("ldoc|$work|/usr/bin/ldoc -q -d $work/ldoc-out /usr/share/lua/5.4/pl"
       "json+lpeg|$work|$here/realish.lua")
[ -n "$pl" ] && progs+=("busted penlight spec|$pl|/usr/bin/busted -o TAP spec")

shares() {  # folded files... -> "share frame" per leaf frame, percent of the total
  cat "$@" | awk '{v=$NF; $NF=""; sub(/ $/, ""); n=split($0, f, ";"); leaf=f[n]; s[leaf]+=v; t+=v}
                  END {for (k in s) printf "%.2f\t%s\n", 100*s[k]/t, k}' | sort -t$'\t' -k2
}

for p in "${progs[@]}"; do
  IFS='|' read -r name dir cmd <<< "$p"
  rm -f "$work"/s.*.folded "$work"/t.*
  for r in $(seq "$rounds"); do
    # shellcheck disable=SC2086  # a command with its words
    (cd "$dir" && "$LF" run -q --mode sample -o "$work/s.$r.folded" $cmd > /dev/null 2>&1) || true
    # shellcheck disable=SC2086
    (cd "$dir" && "$LF" run -q --mode trace -o "$work/t.$r.folded" $cmd > /dev/null 2>&1) || true
  done
  shares "$work"/s.*.folded > "$work/s.shares"
  shares "$work"/t.[0-9].folded > "$work/t.shares"
  nsamples=$(cat "$work"/s.*.folded | awk '{t+=$NF} END {print t+0}')
  echo "== $name ($rounds rounds each; $nsamples samples)"
  join -t$'\t' -1 2 -2 2 -a 1 -a 2 -e 0 -o 0,1.1,2.1 "$work/s.shares" "$work/t.shares" |
    awk -F'\t' '$2 >= 1 || $3 >= 1 {d=$2-$3; if (d<0) d=-d; if (d>m) {m=d; w=$1}
                                     printf "  %6.2f%% sampled %6.2f%% traced %+6.2f  %s\n", $2, $3, $2-$3, $1}
                END {printf "  largest gap: %.2f points (%s)\n", m, w}' | sort -t'%' -k2 -rn
done
