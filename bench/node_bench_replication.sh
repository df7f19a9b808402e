#!/usr/bin/env bash
# bench/node_bench_replication.sh: replication lag between two fenec-node processes
# (node-http.md §10), as `make node-bench ARGS=replication` runs it.
#
# What it measures: a primary and a follower on loopback (--sync always, the default), tenant
# "bench" created on the primary and followed by the other node (POST …/follow); a steady writer
# puts NODE_BENCH_REPL_RATE documents a second (300) for NODE_BENCH_REPL_SECONDS (10) to the
# primary over one keep-alive connection, while a subscriber on the follower's
# GET /t/bench/c/notes/changes timestamps each `change` event's arrival by its id (the block's
# seq). The lag of a write with Fenec-Seq s is the first follower event with id >= s minus the
# primary's 200 for s: p50, p90, p99, max over every write (bench/node_bench_replication.py).
# Runs NODE_BENCH_REPL_ROUNDS (1) times, each on a fresh pair of nodes.
#
# Usage: bench/node_bench_replication.sh <path/to/fenec-node> [report,
#        default build/node-bench-replication.txt]
set -euo pipefail

if (($# < 1)); then
    echo "usage: $0 <fenec-node> [report file]" >&2
    exit 2
fi
node_bin=$(realpath "$1")
report=${2:-build/node-bench-replication.txt}
rate=${NODE_BENCH_REPL_RATE:-300}
seconds=${NODE_BENCH_REPL_SECONDS:-10}
rounds=${NODE_BENCH_REPL_ROUNDS:-1}
here=$(cd "$(dirname "$0")" && pwd)

for tool in curl python3; do
    command -v "$tool" >/dev/null || { echo "node_bench_replication: $tool is missing" >&2; exit 1; }
done
log() { echo "node_bench_replication: $*" >&2; }

tmp=$(mktemp -d /tmp/fenec-repl-bench.XXXXXX)
node_pids=()
stop_nodes() {
    local pid i
    for pid in "${node_pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || continue
        for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    node_pids=()
}
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop_nodes
    if ((status != 0)); then
        for f in "$tmp"/*/node-*.err; do [[ -s "$f" ]] && { echo "== $f" >&2; tail -n 20 "$f" >&2; }; done
    fi
    rm -rf -- "$tmp"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

declare -A port
start_node() {  # round dir, name
    local d=$1 n=$2 dir=$1/node-$2 i p=""
    mkdir -p "$dir"
    : >"$d/node-$n.out"
    "$node_bin" --listen 127.0.0.1:0 --data-dir "$dir" --workers 1 >"$d/node-$n.out" \
        2>"$d/node-$n.err" &
    node_pids+=($!)
    for ((i = 0; i < 100; i++)); do
        p=$(sed -n '1s/.* listening=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$d/node-$n.out")
        [[ -n "$p" ]] && break
        kill -0 "${node_pids[-1]}" 2>/dev/null || { log "fenec-node exited at start"; exit 1; }
        sleep 0.1
    done
    [[ -n "$p" ]] || { log "fenec-node printed no listening= line in 10 s"; exit 1; }
    port[$n]=$p
}

results=()
for ((r = 1; r <= rounds; r++)); do
    d=$tmp/round-$r
    mkdir -p "$d"
    start_node "$d" primary
    start_node "$d" follower
    p="http://127.0.0.1:${port[primary]}"
    f="http://127.0.0.1:${port[follower]}"
    curl -sS --fail-with-body -X PUT -H 'Content-Type: application/json' "$p/_admin/tenants/bench" \
        -d '{"schema":["create collection notes (title text)"]}' >/dev/null
    curl -sS --fail-with-body -H 'Content-Type: application/json' "$p/t/bench/query" \
        -d '{"query":"put notes {title: $1}","params":["first"]}' >/dev/null
    curl -sS --fail-with-body -X POST -H 'Content-Type: application/json' \
        "$f/_admin/tenants/bench/follow" -d "{\"from\":\"$p\",\"wait_ms\":5000}" >"$d/follow.json"
    grep -q '"heard":true' "$d/follow.json" || { log "follow: $(cat "$d/follow.json")"; exit 1; }
    log "round $r: $rate puts/s for $seconds s"
    out=$(python3 "$here/node_bench_replication.py" "${port[primary]}" "${port[follower]}" \
        "$rate" "$seconds")
    log "round $r: $out"
    results+=("$out")
    stop_nodes
done

mkdir -p "$(dirname "$report")"
{
    echo "fenec-node replication bench ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, $(head -n 1 "$tmp/round-1/node-primary.out" | awk '{print $1, $2}'))"
    echo "primary and follower on loopback, --sync always (default), --workers 1 each; one writer"
    echo "putting one document per request to the primary; lag = the follower's /changes event"
    echo "with id >= s minus the primary's 200 carrying Fenec-Seq s (ms); early: writes whose"
    echo "follower event came before the writer read its 200 (--replica-wait holds the answer"
    echo "until the stream handed the block on), counted as 0"
    for ((r = 0; r < ${#results[@]}; r++)); do
        echo "round $((r + 1)): ${results[r]}"
    done
} | tee "$report"
