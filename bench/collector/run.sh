#!/usr/bin/env bash
# Collector overhead: each program unprofiled (lua5.4) and under `luaflame run`
# in each mode, interleaved round by round, medians reported. Then callgrind
# instruction counts for the sample mode's cost per sample.
#   bench/collector/run.sh [BUILD_DIR] [ROUNDS]     (default build, 5)
# Figures: process CPU (user+sys, all threads), the Lua thread's CPU (for
# profiled runs: the sampled CPU clock the collector reports; unprofiled:
# the process, which has one thread), wall time, max RSS, samples per ms of
# Lua-thread CPU, the collector's own memory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
rounds=${2:-5}
LF=$(realpath "$build/cli/luaflame")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

run_one() {  # prog mode -> appends "cpu luacpu wall rss per_ms mem" to $work/prog.mode
  local prog=$1 mode=$2 out
  if [ "$mode" = none ]; then
    out=$( { /usr/bin/time -f "TIME %U %S %e %M" lua5.4 "$here/$prog.lua" > /dev/null; } 2>&1 )
    echo "$out" | awk '/^TIME/ {cpu=$2+$3; print cpu, cpu, $4, $5, 0, 0}' >> "$prog.$mode"
  else
    out=$( { /usr/bin/time -f "TIME %U %S %e %M" "$LF" run --mode "$mode" -o "$work/p.folded" "$here/$prog.lua" > /dev/null; } 2>&1 )
    echo "$out" | awk '
      /^TIME/ {cpu=$2+$3; wall=$4; rss=$5}
      /over [0-9.]+ s of clock/ {match($0, /over [0-9.]+ s/); luacpu=substr($0, RSTART+5, RLENGTH-7)+0;
                                 match($0, /\(([0-9]+) events/); ev=substr($0, RSTART+1, RLENGTH-8)+0}
      /collector: / {match($0, /ms in [0-9]+ hooks, [0-9.]+ [KMG]iB/); m=substr($0, RSTART, RLENGTH); split(m, p, " ");
                     mem=p[5]; if (p[6]=="MiB") mem*=1024; if (p[6]=="GiB") mem*=1048576}
      END {if (!luacpu) luacpu=cpu; print cpu, luacpu, wall, rss, (ev ? ev/(luacpu*1000) : 0), mem}' >> "$prog.$mode"
  fi
}

modes_of() { case $1 in alloc) echo "none alloc sample+alloc";; *) echo "none sample trace both";; esac; }
for prog in mixed parser alloc; do
  for r in $(seq "$rounds"); do
    for mode in $(modes_of "$prog"); do run_one "$prog" "$mode"; done
  done
done

printf "%-8s %-12s %9s %9s %9s %9s %8s %9s %11s\n" program mode cpu_s lua_cpu_s wall_s slowdown rss_MB per_ms collector_KiB
for prog in mixed parser alloc; do
  base=$(cut -d' ' -f2 "$prog.none" | median)
  for mode in $(modes_of "$prog"); do
    cpu=$(cut -d' ' -f1 "$prog.$mode" | median); lua=$(cut -d' ' -f2 "$prog.$mode" | median)
    wall=$(cut -d' ' -f3 "$prog.$mode" | median); rss=$(cut -d' ' -f4 "$prog.$mode" | median)
    per=$(cut -d' ' -f5 "$prog.$mode" | median); mem=$(cut -d' ' -f6 "$prog.$mode" | median)
    printf "%-8s %-12s %9.3f %9.3f %9.3f %8.3fx %8.1f %9.3f %11.0f\n" "$prog" "$mode" "$cpu" "$lua" "$wall" \
      "$(echo "$lua $base" | awk '{print $1/$2}')" "$(echo "$rss" | awk '{print $1/1024}')" "$per" "$mem"
  done
done

# Callgrind: instructions of the Lua thread. Whole-run counts move by
# about 1% between identical runs (Lua seeds its string hashes with an
# address and the time), so the sampler's cost is read from the hook and
# the signal handler themselves (inclusive counts per sample event).
if command -v valgrind > /dev/null; then
  cg() { valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$work/cg.%p" "$@" 2> "$work/vg.err" > /dev/null;
         ls -t "$work"/cg.*-01 | head -1; }
  incl() { { callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null | grep -F "$2" || true; } | head -1 | awk '{gsub(",", "", $1); print $1+0}'; }
  total() { grep -m1 '^summary:\|^totals:' "$1" | awk '{print $2}'; }
  echo
  f=$(cg "$LF" run --mode sample -o "$work/cg.folded" "$here/mixed.lua" 0.25)
  events=$(sed -n 's/.*(\([0-9]*\) events.*/\1/p' "$work/vg.err")
  hook=$(incl "$f" "lfc::lf_hook("); sig=$(incl "$f" "on_signal("); prog=$(total "$f"); rm -f "$work"/cg.*
  echo "callgrind mixed.lua 0.25, sample mode: $events sample events; lf_hook $hook Ir, signal handler $sig Ir inclusive; program $prog Ir"
  echo "${hook:-0} ${sig:-0} ${events:-0} $prog" | awk '$3 == 0 {print "  no sample event (the sampler thread starved under valgrind: rerun on a quieter machine)"; exit} {per=($1+$2)/$3; printf "  %.0f instructions per sample (user space; the kernel'"'"'s signal delivery is extra)\n", per}'
  base_ir=$(total "$(cg lua5.4 "$here/alloc.lua" 0.25)"); rm -f "$work"/cg.*
  ctl_ir=$(total "$(cg "$LF" run -q --mode sample --hz 1 -o "$work/cg.folded" "$here/alloc.lua" 0.25)"); rm -f "$work"/cg.*
  al_ir=$(total "$(cg "$LF" run -q --mode alloc -o "$work/cg.folded" "$here/alloc.lua" 0.25)"); rm -f "$work"/cg.*
  echo "callgrind alloc.lua 0.25: lua5.4 $base_ir Ir; luaflame run --hz 1 (control) $ctl_ir Ir; --mode alloc $al_ir Ir" \
       "($(echo "$al_ir $ctl_ir" | awk '{printf "%+.2f%%", 100*($1/$2-1)}') over the control, $(echo "$al_ir $base_ir" | awk '{printf "%+.2f%%", 100*($1/$2-1)}') over lua5.4)"
  # Trace mode: the whole run's instructions against lua5.4 and the runner
  # alone (--hz 1), at scale 0.1 (the hook's share is what moves).
  for p in mixed parser; do
    b=$(total "$(cg lua5.4 "$here/$p.lua" 0.1)"); rm -f "$work"/cg.*
    c=$(total "$(cg "$LF" run -q --mode sample --hz 1 -o "$work/cg.folded" "$here/$p.lua" 0.1)"); rm -f "$work"/cg.*
    t=$(total "$(cg "$LF" run -q --mode trace -o "$work/cg.folded" "$here/$p.lua" 0.1)"); rm -f "$work"/cg.*
    echo "callgrind $p.lua 0.1: lua5.4 $b Ir; --hz 1 (control) $c Ir; --mode trace $t Ir" \
         "($(echo "$t $b" | awk '{printf "%.3fx", $1/$2}') lua5.4, $(echo "$t $c" | awk '{printf "%.3fx", $1/$2}') the control)"
  done
fi
