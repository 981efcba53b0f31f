#!/usr/bin/env bash
# Sampled against traced self shares on real programs no one here wrote:
# each program runs ROUNDS times under --mode sample and ROUNDS times under
# --mode trace (interleaved); the self (leaf) shares of each frame, summed
# over the rounds, are printed side by side for the frames with >= 1% in
# either, with the largest gap.
#   bench/collector/shares.sh [--mode both] [BUILD_DIR] [ROUNDS] [PENLIGHT_CHECKOUT]
# Needs Debian's lua5.4, busted, ldoc (lua-ldoc), luacheck (lua-check),
# lua-penlight, lua-dkjson, lua-lpeg; the busted suite is penlight's own
# spec/ from a checkout of https://github.com/lunarmodules/Penlight (without
# one, bench/real/spec, the Penlight spec bench/real/run.sh runs).
#
# --mode both adds, in the same interleaved rounds, runs under --mode both
# (samples and trace of the SAME execution) with the CPU clock and with
# --clock wall, and runs under --mode sample --clock wall, then prints per
# frame: sample-mode sampled, both-mode sampled, both-mode traced and
# trace-mode traced shares (and the same with the wall clock), with the
# largest gaps of
#   (a) sampled vs traced in the same both runs: the sampler's truthfulness,
#       with no difference of execution between the two;
#   (b) sample-mode vs both-mode sampled: how far tracing itself moves the
#       time the sampler sees (trace overhead);
#   (c) both-mode vs trace-mode traced: the trace with and without the
#       sampler beside it (run-to-run noise plus the sampler's own cost).
# If (a) is within 3 points while the sample-vs-trace gap is mostly (b),
# the difference is the trace's overhead, not a misattribution.
# Columns: sample, both:smp, both:trc, trace (CPU clock for the samples;
# a trace's time is always wall time), wall:smp (sample --clock wall),
# wboth:smp, wboth:trc (both --clock wall), wb:smp*k (wboth:smp times k,
# the sampled time over the traced time of those runs: the sampled shares
# on the trace's scale: the samples of the program's own time (the
# "[luaflame] hook" samples left out) over the traced time, so k near 1 says
# the two clocks agree on how much time the program had).
set -euo pipefail
both=0
if [ "${1:-}" = --mode ]; then
  case ${2:-} in
    both) both=1 ;;
    sample-trace) ;;
    *) echo "shares.sh: --mode expects both or sample-trace" >&2; exit 2 ;;
  esac
  shift 2
fi
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
rounds=${2:-3}
pl=${3:-}
LF=$(realpath "$build/cli/luaflame")
hz=999  # luaflame run's default rate: one sample is int(1e9 / hz) ns of the clock
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name|directory|LUA_PATH (empty: lua5.4's default)|script and arguments
lp51="/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;;"
progs=("ldoc|$work||/usr/bin/ldoc -q -d $work/ldoc-out /usr/share/lua/5.4/pl"
       "json+lpeg|$work||$here/realish.lua")
if [ -n "$pl" ]; then
  progs+=("busted penlight spec|$pl||/usr/bin/busted -o TAP spec")
else
  progs+=("busted bench/real/spec|$work|$lp51|/usr/bin/busted -o TAP $here/../real/spec")
fi
[ "$both" = 1 ] && progs+=("luacheck|$work|$lp51|/usr/bin/luacheck /usr/share/lua/5.1/luacheck")

# Samples in luaflame's own hook ("[luaflame] hook" leaves: the trace hook's
# time, which the trace leaves out) are left out of the shares and totals:
# the program's time only, on both sides.
shares() {  # folded files... -> "share frame" per leaf frame, percent of the total
  cat "$@" | awk '{v=$NF; $NF=""; sub(/ $/, ""); n=split($0, f, ";"); leaf=f[n]
                   if (leaf == "[luaflame] hook") next; s[leaf]+=v; t+=v}
                  END {for (k in s) printf "%.2f\t%s\n", 100*s[k]/t, k}' | sort -t$'\t' -k2
}
total() { cat "$@" | awk '/;\[luaflame\] hook [0-9]+$/ {next} {t+=$NF} END {print t+0}'; }
in_hooks() { cat "$@" | awk '/;\[luaflame\] hook [0-9]+$/ {h+=$NF} {t+=$NF} END {printf "%.1f", t ? 100*h/t : 0}'; }

run() {  # dir lua_path output mode-and-clock-options... -- command words
  local dir=$1 lpath=$2 out=$3
  shift 3
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  # shellcheck disable=SC2068  # a command with its words
  (cd "$dir" && if [ -n "$lpath" ]; then export LUA_PATH="$lpath"; fi &&
     "$LF" run --lua 5.4 -q "${opts[@]}" -o "$out" $@ > /dev/null 2>&1) || true
}

# table NAME=FILE... -> frame rows (>= 1% in any column), then the gaps.
# Columns are the share files in order; missing frames are 0.
table() {
  local hdr=() files=()
  for a in "$@"; do hdr+=("${a%%=*}"); files+=("${a#*=}"); done
  printf '  %s\n' "$(printf '%9s ' "${hdr[@]}")frame"
  awk -F'\t' -v nf=${#files[@]} '
    FNR == 1 {c++}
    {v[$2, c] = $1; k[$2] = 1}
    END {for (f in k) {keep = 0; line = ""
           for (i = 1; i <= nf; i++) {x = ((f, i) in v) ? v[f, i] : 0; if (x >= 1) keep = 1
                                      line = line sprintf("%8.2f%% ", x)}
           if (keep) printf "%s\t  %s %s\n", (((f, 1) in v) ? v[f, 1] : 0), line, f}}
  ' "${files[@]}" | sort -t$'\t' -k1 -rn | cut -f2-
}

gap() {  # LABEL FILE_A FILE_B N_A N_B -> largest gap of the frames >= 1% in either
  # The sampling error shown is two standard deviations of a share p
  # estimated from N samples, sqrt(p(1-p)/N) per sampled side (0 for a
  # trace, N_x = 0): a model of independent samples, not checked for
  # the timer's periodic ones.
  join -t$'\t' -1 2 -2 2 -a 1 -a 2 -e 0 -o 0,1.1,2.1 "$2" "$3" |
    awk -F'\t' -v label="$1" -v na="$4" -v nb="$5" '
      $2 >= 1 || $3 >= 1 {d = $2 - $3; if (d < 0) d = -d
                          if (d > m) {m = d; w = $1; a = $2; b = $3}}
      END {e = 0
           if (na > 0) e += (a / 100) * (1 - a / 100) / na
           if (nb > 0) e += (b / 100) * (1 - b / 100) / nb
           printf "  %-52s %5.2f points (%s %.2f%% vs %.2f%%; 2-sigma sampling error %.2f)\n",
                  label ":", m, w, a, b, 200 * sqrt(e)}'
}

for p in "${progs[@]}"; do
  IFS='|' read -r name dir lpath cmd <<< "$p"
  rm -f "$work"/[stbwv].* "$work"/*.shares
  s=() t=() bs=() bt=() ws=() wt=() vs=()
  for r in $(seq "$rounds"); do
    # shellcheck disable=SC2086  # a command with its words
    run "$dir" "$lpath" "$work/s.$r.folded" --mode sample -- $cmd
    # shellcheck disable=SC2086
    run "$dir" "$lpath" "$work/t.$r.folded" --mode trace -- $cmd
    s+=("$work/s.$r.folded") t+=("$work/t.$r.folded")
    if [ "$both" = 1 ]; then
      # shellcheck disable=SC2086
      run "$dir" "$lpath" "$work/b.$r.folded" --mode both -- $cmd
      # shellcheck disable=SC2086
      run "$dir" "$lpath" "$work/v.$r.folded" --mode sample --clock wall -- $cmd
      # shellcheck disable=SC2086
      run "$dir" "$lpath" "$work/w.$r.folded" --mode both --clock wall -- $cmd
      bs+=("$work/b.$r.folded") bt+=("$work/b.$r.time.folded")
      vs+=("$work/v.$r.folded") ws+=("$work/w.$r.folded") wt+=("$work/w.$r.time.folded")
    fi
  done
  shares "${s[@]}" > "$work/s.shares"
  shares "${t[@]}" > "$work/t.shares"
  nsamples=$(total "${s[@]}")
  echo "== $name ($rounds rounds each; $nsamples samples)"
  join -t$'\t' -1 2 -2 2 -a 1 -a 2 -e 0 -o 0,1.1,2.1 "$work/s.shares" "$work/t.shares" |
    awk -F'\t' '$2 >= 1 || $3 >= 1 {d=$2-$3; if (d<0) d=-d; if (d>m) {m=d; w=$1}
                                     printf "  %6.2f%% sampled %6.2f%% traced %+6.2f  %s\n", $2, $3, $2-$3, $1}
                END {printf "  largest gap: %.2f points (%s)\n", m, w}' | sort -t'%' -k2 -rn
  [ "$both" = 1 ] || continue

  shares "${bs[@]}" > "$work/bs.shares"
  shares "${bt[@]}" > "$work/bt.shares"
  shares "${vs[@]}" > "$work/vs.shares"
  shares "${ws[@]}" > "$work/ws.shares"
  shares "${wt[@]}" > "$work/wt.shares"
  nb=$(total "${bs[@]}") nv=$(total "${vs[@]}") nw=$(total "${ws[@]}")
  # Wall clock: the sampled periods and the traced nanoseconds measure the
  # same thing, so the sampled shares can be put on the trace's scale
  # (percent of the traced total); luaflame's hook samples are left out
  # of both, so a frame above its traced time is time sampled there that
  # the trace did not see.
  nt=$(total "${wt[@]}")
  scale=$(awk -v n="$nw" -v t="$nt" -v hz="$hz" 'BEGIN {printf "%.6f", (t > 0 ? n * int(1e9 / hz) / t : 0)}')
  awk -F'\t' -v k="$scale" '{printf "%.2f\t%s\n", $1 * k, $2}' "$work/ws.shares" > "$work/wa.shares"
  echo "-- $name, the same execution sampled and traced (--mode both); samples: sample $nsamples," \
       "both $nb, sample --clock wall $nv, both --clock wall $nw (besides those, in luaflame's" \
       "hook: both $(in_hooks "${bs[@]}")%, both --clock wall $(in_hooks "${ws[@]}")%)"
  table sample="$work/s.shares" both:smp="$work/bs.shares" both:trc="$work/bt.shares" \
        trace="$work/t.shares" wall:smp="$work/vs.shares" wboth:smp="$work/ws.shares" \
        wboth:trc="$work/wt.shares" \
        wb:smp*k="$work/wa.shares"
  gap "sample vs trace (separate runs)" "$work/s.shares" "$work/t.shares" "$nsamples" 0
  gap "(a) both: sampled vs traced, CPU clock" "$work/bs.shares" "$work/bt.shares" "$nb" 0
  gap "(b) sampled: sample vs both, CPU clock" "$work/s.shares" "$work/bs.shares" "$nsamples" "$nb"
  gap "(c) traced: both vs trace" "$work/bt.shares" "$work/t.shares" 0 0
  gap "(a) both --clock wall: sampled vs traced" "$work/ws.shares" "$work/wt.shares" "$nw" 0
  echo "  both --clock wall: sampled time / traced time = $scale (the program's samples, luaflame's hook left out)"
  gap "(a) both --clock wall, on the traced time's scale" "$work/wa.shares" "$work/wt.shares" "$nw" 0
  gap "(b) sampled, wall clock: sample vs both" "$work/vs.shares" "$work/ws.shares" "$nv" "$nw"
  gap "sample --clock wall vs trace (separate runs)" "$work/vs.shares" "$work/t.shares" "$nv" 0
done
