#!/usr/bin/env bash
# What starting luaflame costs a program, in CPU ms (perf stat's task-clock
# of the whole process chain): the `luaflame` command alone (an unknown
# command: its start and exit), `luaflame run` of an empty script on 5.4 (in
# process) and on 5.1 (the front, then the runner it execs), and `luaflame
# attach --hz 100` of sysbench running one event (the front, the shim,
# luaflame.so, the session and its output), and a C host (hook_calls.c, one
# state made, one round, closed) attached through the environment alone
# (`luaflame attach --env`: no front, as a service manager runs it), beside
# lua5.4, that sysbench and that host alone. Each build given is measured in
# every round, interleaved; every run on one CPU (BENCH_CPU, default the
# last: foreign.sh says why). Medians. STARTUP_CALLGRIND=1: the C host's
# instructions instead (callgrind, one run each: deterministic).
# usage: bench/collector/startup.sh ROUNDS BUILD [BUILD...]
set -euo pipefail
rounds=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cpu=${BENCH_CPU:-$(($(nproc) - 1))}
: > "$tmp/empty.lua"
sb=(sysbench --threads=1 --events=1 --time=0 "$here/../../tests/attach/bench.lua" run)
cc -O2 -o "$tmp/host" "$here/../attach/hook_calls.c" $(pkg-config --cflags --libs lua5.3)
if [ "${STARTUP_CALLGRIND:-0}" = 1 ]; then
  ir() {  # ir [VAR=VALUE...]: the C host's instructions, under callgrind
    env "$@" valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$tmp/host" 1 2>&1 >/dev/null |
      awk '/Collected/ { print $NF }'
  }
  echo "alone C-host $(ir) instructions"
  for b in "$@"; do
    # shellcheck disable=SC2046 # one NAME=VALUE a line, none with spaces
    echo "$b attach-env-C-host $(ir $("$b/cli/luaflame" attach --env -q --hz 1 -o "$tmp/p.folded")) instructions"
  done
  exit 0
fi
ms() {
  perf stat -x, -e task-clock -o "$tmp/t" taskset -c "$cpu" "$@" > /dev/null 2>&1 || true
  awk -F, '$3 == "task-clock" { printf "%.2f", $1 }' "$tmp/t"
}
for _ in $(seq "$rounds"); do
  for b in "$@"; do
    lf=$b/cli/luaflame
    echo "$b front $(ms "$lf" no-such-command)"
    echo "$b run-5.4 $(ms "$lf" run -q --hz 1 -o "$tmp/o.folded" "$tmp/empty.lua")"
    echo "$b run-5.1 $(ms "$lf" run --lua 5.1 -q --hz 1 -o "$tmp/o.folded" "$tmp/empty.lua")"
    command -v sysbench > /dev/null &&
      echo "$b attach-sysbench $(LUAFLAME_ATTACH_STATE=2 ms "$lf" attach -q --hz 100 -o "$tmp/p.folded" -- "${sb[@]}")"
    echo "$b attach-env-C-host $(ms env $("$lf" attach --env -q --hz 1 -o "$tmp/p.folded") "$tmp/host" 1)"
  done
  echo "alone lua5.4 $(ms lua5.4 "$tmp/empty.lua")"
  echo "alone C-host $(ms "$tmp/host" 1)"
  command -v sysbench > /dev/null && echo "alone sysbench $(ms "${sb[@]}")"
done > "$tmp/all"
awk '{ k = $1 " " $2; n[k]++; v[k, n[k]] = $3 }
  END { for (k in n) { m = n[k]
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
        if (v[k, j] + 0 < v[k, i] + 0) { t = v[k, i]; v[k, i] = v[k, j]; v[k, j] = t }
      printf "%-60s %8.1f ms  (%d runs, %.1f-%.1f)\n", k, v[k, int((m + 1) / 2)], m, v[k, 1], v[k, m] } }' \
  "$tmp/all" | sort
