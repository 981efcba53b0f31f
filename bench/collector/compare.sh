#!/usr/bin/env bash
# Side-by-side timing: each command runs PROGRAM (bench/collector/PROGRAM.lua,
# appended as the last argument), interleaved round by round; prints the
# median process CPU (user+sys) of each and its ratio to the first command.
#   bench/collector/compare.sh ROUNDS PROGRAM "CMD A" "CMD B" ...
# e.g. bench/collector/compare.sh 5 parser lua5.4 \
#        "build-old/cli/luaflame run -q --mode trace -o /tmp/o.folded" \
#        "build/cli/luaflame run -q --mode trace -o /tmp/n.folded"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=$1 prog=$2
shift 2
t=$(mktemp)
trap 'rm -f "$t"' EXIT
declare -a res
for _ in $(seq "$rounds"); do
  i=0
  for c in "$@"; do
    # shellcheck disable=SC2086  # a command with its words
    /usr/bin/time -o "$t" -f "%U %S" $c "$here/$prog.lua" > /dev/null 2>&1
    res[i]="${res[i]:-} $(awk '{print $1 + $2}' "$t")"
    i=$((i + 1))
  done
done
i=0 base=
for c in "$@"; do
  m=$(echo ${res[i]} | tr ' ' '\n' | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
  base=${base:-$m}
  printf "%-8s %6.2f s %6.3fx  %s   (all:%s)\n" "$prog" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN {print a / b}')" "$c" "${res[i]}"
  i=$((i + 1))
done
