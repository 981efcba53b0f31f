#!/usr/bin/env bash
# Real programs no one here wrote, from Debian, under every mode of
# `luaflame run` against plain lua5.4:
#   luacheck  the linter over its own sources (5 M calls, 175 k call paths)
#   ldoc      the documentation generator over Penlight
#   busted    the test runner, a spec of Penlight over Penlight's sources
#   dkjson    the JSON library round-tripping those sources
# 1. behaviour: stdout, stderr and exit status of every mode equal lua5.4's;
# 2. cost: CPU time (user+sys of the process), interleaved round by round
#    (lua5.4 and every mode one after the other, ROUNDS times); medians and
#    the median of the per-round ratios; max RSS, the collector's memory and
#    the time it took to write the output (the default luaflame.svg).
#   bench/real/run.sh [BUILD_DIR] [ROUNDS] [PROGRAMS...]   (default build, 5, all)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
rounds=${2:-5}
shift $(( $# > 2 ? 2 : $# ))
programs=${*:-luacheck ldoc busted dkjson}
LF=$(realpath "$build/cli/luaflame")

pkgs=(lua-check lua-ldoc lua-busted lua-penlight lua-dkjson)
missing=()
for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# Debian installs these for 5.1-5.3's paths; they run unchanged on 5.4.
export LUA_PATH="/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;;"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

args_of() {
  case $1 in
    luacheck) echo "/usr/bin/luacheck /usr/share/lua/5.1/luacheck" ;;
    ldoc) echo "/usr/bin/ldoc -q -d $work/ldoc /usr/share/lua/5.1/pl" ;;
    busted) echo "/usr/bin/busted -o TAP $here/spec" ;;
    dkjson) echo "$here/dkjson_roundtrip.lua /usr/share/lua/5.1/pl /usr/share/lua/5.1/luacheck" ;;
  esac
}
modes="none sample trace both alloc"
cmd_of() {  # mode program -> command line
  if [ "$1" = none ]; then echo "lua5.4 $(args_of "$2")"
  else echo "$LF run --lua 5.4 -q --mode $1 -o $work/out/luaflame.svg $(args_of "$2")"; fi
}
mkdir -p out

# 1. Behaviour.
bad=0
for prog in $programs; do
  for mode in $modes; do
    set +e
    $(cmd_of "$mode" "$prog") >"$mode.out" 2>"$mode.err"
    echo $? >"$mode.rc"
    set -e
    if [ "$mode" != none ]; then
      for f in out err rc; do
        if ! cmp -s "none.$f" "$mode.$f"; then
          echo "DIFFERS: $prog --mode $mode: std$f ($(diff "none.$f" "$mode.$f" | head -3 | tr '\n' ' '))"; bad=1
        fi
      done
    fi
  done
  echo "behaviour: $prog: stdout, stderr and status (rc $(cat none.rc)) compared in $(echo $modes | wc -w) modes"
done

# 2. Cost, interleaved. (time -o starts with "Command exited with non-zero
# status N" when the program fails, as luacheck does on a warning: the
# figures are the last line.)
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
for r in $(seq "$rounds"); do
  for prog in $programs; do
    for mode in $modes; do
      if [ "$mode" = none ]; then
        /usr/bin/time -f "%U %S %M" -o t.txt $(cmd_of none "$prog") >/dev/null 2>&1 || true
        echo "$(tail -1 t.txt | awk '{print $1+$2, $3}') 0 0" >>"$prog.$mode"
      else
        /usr/bin/time -f "%U %S %M" -o t.txt \
          $LF run --lua 5.4 --mode "$mode" -o "$work/out/luaflame.svg" $(args_of "$prog") >/dev/null 2>rep.txt || true
        mem=$(grep -o '[0-9.]* [KM]iB for' rep.txt | awk '{v=$1; if ($2=="KiB") v/=1024; print v}')
        outms=$(grep -o '([0-9.]* ms of CPU)' rep.txt | tr -d '(' | awk '{print $1}')
        echo "$(tail -1 t.txt | awk '{print $1+$2, $3}') ${mem:-0} ${outms:-0}" >>"$prog.$mode"
      fi
      rm -rf out/* "$work/ldoc"
    done
  done
done

printf '\n| program | mode | CPU s (median) | vs lua5.4 (median of pairs) | max RSS MB | collector MiB | output ms CPU |\n'
printf '|---|---|---|---|---|---|---|\n'
for prog in $programs; do
  base=$(cut -d' ' -f1 "$prog.none" | median)
  for mode in $modes; do
    cpu=$(cut -d' ' -f1 "$prog.$mode" | median)
    ratio=$(paste -d' ' "$prog.none" "$prog.$mode" | awk '{ if ($1 > 0) print $5 / $1 }' | median)
    rss=$(cut -d' ' -f2 "$prog.$mode" | median)
    mem=$(cut -d' ' -f3 "$prog.$mode" | median)
    outms=$(cut -d' ' -f4 "$prog.$mode" | median)
    name=$mode; [ "$mode" = none ] && name="lua5.4"
    printf '| %s | %s | %.3f | %.2fx | %.1f | %s | %s |\n' "$prog" "$name" "$cpu" "$ratio" "$(echo "$rss / 1024" | bc -l)" \
      "$([ "$mode" = none ] && echo "" || printf '%.1f' "$mem")" "$([ "$mode" = none ] && echo "" || printf '%.1f' "$outms")"
  done
done
echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
exit $bad
