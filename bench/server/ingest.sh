#!/bin/sh
# Ingest cost on the real server (issue 11): server CPU (CPU of all its threads from /proc/PID/task/*/schedstat) and
# peak memory over the request (VmHWM, reset through /proc/PID/clear_refs, minus VmRSS before)
# for: an 11 KB chunk holding a 1,024-deep chain of 1 KB frames, a chunk of 175,000 nodes,
# and a folded upload of 10 million tiny lines (60 MB). REPS requests each (default 3).
#   bench/server/ingest.sh BUILD_DIR [REPS]
set -eu
build=${1:?usage: ingest.sh BUILD_DIR [REPS]}
reps=${2:-3}
tmp=$(mktemp -d /tmp/luaflame-ingest-bench.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$build/server/luaflame-server" --listen 127.0.0.1:$port --data "$tmp/data" --log-level warn --sync normal \
  --max-body 128M --stale-minutes 0 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
S=http://127.0.0.1:$port
i=0; until curl -sf "$S/healthz" >/dev/null; do i=$((i+1)); [ $i -lt 100 ] || exit 1; sleep 0.1; done

python3 - "$tmp" <<'EOF'
import sys, random
tmp = sys.argv[1]
def chunk(path, seq, frames, nodes):
    with open(path, "w") as f:
        f.write("luaflame-wire 1\nseq %d\nfrom %d\nuntil %d\nmetrics samples\n" % (seq, 1767225600000000000 + seq * 10**10, 1767225610000000000 + seq * 10**10))
        for fr in frames: f.write("f %s\n" % fr)
        for p, fr, v in nodes: f.write("n %s %d %d\n" % ("-" if p < 0 else p, fr, v))
        f.write("end %d\n" % len(nodes))
# the chain: one 1 KB frame, 1,024 nodes deep, a value at the bottom
for seq in range(10):
    chunk("%s/chain%d.wire" % (tmp, seq), seq, ["x" * 1000 + " chain.lua:1"], [(i - 1, 0, 1 if i == 1023 else 0) for i in range(1024)])
# 175,000 nodes: a call tree of a linter-like program (fan-out 6, depth <= 12), 2,000 frames
rnd = random.Random(1)
frames = ["fn%d lib/mod%d.lua:%d" % (i, i % 50, 10 + i) for i in range(2000)]
for seq in range(10, 20):
    nodes, depth = [(-1, 0, 1)], [1]
    while len(nodes) < 175000:
        p = rnd.randrange(len(nodes)) if rnd.random() < 0.3 else len(nodes) - 1
        if depth[p] >= 12: p = rnd.randrange(min(len(nodes), 1000))
        nodes.append((p, rnd.randrange(2000), rnd.randrange(4)))
        depth.append(depth[p] + 1)
    chunk("%s/big%d.wire" % (tmp, seq), seq, frames, nodes)
with open("%s/tiny.folded" % tmp, "w") as f:
    for i in range(10000000):
        f.write("a;%s 1\n" % chr(97 + i % 26))
EOF

id=$(curl -sf -X POST -d '{"stream":"ingest-bench","name":"bench","metrics":["samples"]}' "$S/api/streams" |
  python3 -c 'import sys, json; print(json.load(sys.stdin)["id"])')
# CPU time of every thread of the server in ns (schedstat: finer than the 10 ms of /proc/PID/stat).
cpu() { cat /proc/$pid/task/*/schedstat | awk '{s += $1} END {printf "%d", s}'; }
kb() { awk -v k="$1:" '$1 == k {print $2}' /proc/$pid/status; }
measure() {  # LABEL FILE URL
  echo 5 > /proc/$pid/clear_refs
  rss=$(kb VmRSS); c0=$(cpu)
  code=$(curl -s -o "$tmp/out" -w '%{http_code}' --data-binary "@$2" "$S$3")
  c1=$(cpu); hwm=$(kb VmHWM)
  echo "$1: HTTP $code, server CPU $(( (c1 - c0) / 1000000 )) ms, peak +$(( (hwm - rss) / 1024 )) MB over $(( rss / 1024 )) MB ($(wc -c < "$2") byte body)"
}
n=0; while [ $n -lt "$reps" ]; do measure "chain chunk" "$tmp/chain$n.wire" "/api/runs/$id/chunks"; n=$((n+1)); done
n=0; while [ $n -lt "$reps" ]; do measure "175,000-node chunk" "$tmp/big$((10+n)).wire" "/api/runs/$id/chunks"; n=$((n+1)); done
n=0; while [ $n -lt "$reps" ]; do measure "10M-line upload" "$tmp/tiny.folded" "/api/runs?name=tiny"; n=$((n+1)); done
