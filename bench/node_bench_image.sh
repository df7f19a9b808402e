#!/usr/bin/env bash
# bench/node_bench_image.sh: a tenant's file image moved between two fenec-node processes
# (node-http.md §8.3), as `make node-bench ARGS=image` runs it.
#
# What it measures: for a tenant of NODE_BENCH_IMAGE_DOCS documents (100 000) each holding a
# 128-dimension vector under @hnsw (cosine) and a short title,
#   GET  /_admin/tenants/bench/file   from the first node to a file (curl), and
#   PUT  /_admin/tenants/bench/file   of that file onto a second node (curl; the node writes it
#                                     to <t>.fenec.incoming, fsyncs, verifies every record and
#                                     the graphs, renames it into place),
# each NODE_BENCH_IMAGE_ROUNDS times (3; the second node's copy deleted between PUTs), printing
# the image's size and, for each, the median and best wall time in ms and MB/s (10^6 bytes).
# The image holds the vector graph, so the figures include no index build on the target.
#
# How: both nodes on loopback with every plane open, port 0, their own data dirs in a temp dir;
# the tenant is loaded through /batch (1 000 documents a statement, 10 statements a request),
# vectors drawn by awk from a fixed seed. Everything it started is stopped and its temp dir
# removed on exit, failure and signals included.
#
# Usage: bench/node_bench_image.sh <path/to/fenec-node> [report, default build/node-bench-image.txt]
# Environment: NODE_BENCH_IMAGE_DOCS (100000), NODE_BENCH_IMAGE_ROUNDS (3).
set -euo pipefail

if (($# < 1)); then
    echo "usage: $0 <fenec-node> [report file]" >&2
    exit 2
fi
node_bin=$(realpath "$1")
report=${2:-build/node-bench-image.txt}
docs=${NODE_BENCH_IMAGE_DOCS:-100000}
rounds=${NODE_BENCH_IMAGE_ROUNDS:-3}
dim=128

command -v curl >/dev/null || { echo "node_bench_image: curl is missing" >&2; exit 1; }
# shellcheck source=bench/vector_tenant.sh
source "$(dirname "$0")/vector_tenant.sh"
log() { echo "node_bench_image: $*" >&2; }

tmp=$(mktemp -d /tmp/fenec-image-bench.XXXXXX)
node_pids=()
cleanup() {
    local status=$? pid i
    trap - EXIT INT TERM
    for pid in "${node_pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || continue
        for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if ((status != 0)); then
        for f in "$tmp"/node-*.err; do [[ -s "$f" ]] && { echo "== $f" >&2; tail -n 20 "$f" >&2; }; done
    fi
    rm -rf -- "$tmp"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

declare -A port
start_node() {  # name
    local n=$1 dir=$tmp/node-$1 i p=""
    mkdir -p "$dir"
    : >"$tmp/node-$n.out"
    "$node_bin" --listen 127.0.0.1:0 --data-dir "$dir" --workers 1 >"$tmp/node-$n.out" \
        2>"$tmp/node-$n.err" &
    node_pids+=($!)
    for ((i = 0; i < 100; i++)); do
        p=$(sed -n '1s/.* listening=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/node-$n.out")
        [[ -n "$p" ]] && break
        kill -0 "${node_pids[-1]}" 2>/dev/null || { log "fenec-node exited at start"; exit 1; }
        sleep 0.1
    done
    [[ -n "$p" ]] || { log "fenec-node printed no listening= line in 10 s"; exit 1; }
    port[$n]=$p
}

start_node source
start_node target
src="http://127.0.0.1:${port[source]}"
dst="http://127.0.0.1:${port[target]}"

log "loading $docs documents of a $dim-dimension @hnsw vector"
curl -sS --fail-with-body -X PUT -H 'Content-Type: application/json' "$src/_admin/tenants/bench" \
    -d "{\"schema\":[\"create collection docs (title text, v vector<$dim> @hnsw)\"]}" >/dev/null
load_start=$(date +%s.%N)
load_vector_docs "$src/t/bench" "$docs" "$dim" "$tmp/batch.ndjson"
load_s=$(awk -v a="$load_start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
answer=$(curl -sS --fail-with-body -H 'Content-Type: application/json' "$src/t/bench/query" \
    -d '{"query":"get docs select count(*)"}')
[[ "$answer" == *":$docs}"* ]] || { log "count after load: $answer"; exit 1; }
log "loaded in $load_s s"
curl -sS --fail-with-body -X POST "$src/_admin/tenants/bench/freeze" >/dev/null

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
best() { sort -n | head -n 1; }

get_ms=() first_ms=() put_ms=()
bytes=0
for ((r = 1; r <= rounds; r++)); do
    out=$(curl -sS --fail-with-body -o "$tmp/bench.img" -D "$tmp/get.head" \
        -w '%{time_total} %{size_download} %{time_starttransfer}' "$src/_admin/tenants/bench/file")
    get_ms+=("$(awk '{printf "%.1f", $1 * 1000}' <<<"$out")")
    first_ms+=("$(awk '{printf "%.1f", $3 * 1000}' <<<"$out")")
    bytes=$(awk '{print $2}' <<<"$out")
    digest=$(sed -n 's/^Fenec-Image-Digest: \([0-9a-f]*\).*/\1/ip' "$tmp/get.head")
    seq=$(sed -n 's/^Fenec-Seq: \([0-9]*\).*/\1/ip' "$tmp/get.head")
    # XXH3-128, 32 hex (server/README.md): checked with xxhsum -H2 where the xxhash package is in.
    [[ "$digest" =~ ^[0-9a-f]{32}$ ]] || { log "Fenec-Image-Digest is not 32 hex: $digest"; exit 1; }
    if command -v xxhsum >/dev/null; then
        [[ "$(xxhsum -H2 "$tmp/bench.img" | cut -c1-32)" == "$digest" ]] ||
            { log "the image's XXH3-128 is not its Fenec-Image-Digest"; exit 1; }
    fi
    if ((r > 1)); then
        curl -sS --fail-with-body -X DELETE "$dst/_admin/tenants/bench/file" >/dev/null
    fi
    out=$(curl -sS --fail-with-body -X PUT -H 'Content-Type: application/octet-stream' -H 'Expect:' \
        -H "Fenec-Image-Digest: $digest" -H "Fenec-Seq: $seq" --data-binary @"$tmp/bench.img" \
        -o "$tmp/put.body" -w '%{time_total} %{http_code}' "$dst/_admin/tenants/bench/file")
    [[ "$out" == *" 201" ]] || { log "PUT answered: $out $(cat "$tmp/put.body")"; exit 1; }
    put_ms+=("$(awk '{printf "%.1f", $1 * 1000}' <<<"$out")")
    log "round $r: GET ${get_ms[-1]} ms (first byte ${first_ms[-1]} ms), PUT ${put_ms[-1]} ms, $bytes bytes"
done
answer=$(curl -sS --fail-with-body -H 'Content-Type: application/json' "$dst/t/bench/query" \
    -d '{"query":"get docs select count(*)"}')
[[ "$answer" == *":$docs}"* ]] || { log "count on the target: $answer"; exit 1; }

mbs() { awk -v b="$bytes" -v ms="$1" 'BEGIN {printf "%.0f", b / 1e6 / (ms / 1000)}'; }
get_med=$(printf '%s\n' "${get_ms[@]}" | median)
get_best=$(printf '%s\n' "${get_ms[@]}" | best)
first_med=$(printf '%s\n' "${first_ms[@]}" | median)
put_med=$(printf '%s\n' "${put_ms[@]}" | median)
put_best=$(printf '%s\n' "${put_ms[@]}" | best)
mkdir -p "$(dirname "$report")"
{
    echo "fenec-node image bench ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, $(head -n 1 "$tmp/node-source.out" | awk '{print $1, $2}'))"
    echo "tenant: $docs documents, vector<$dim> @hnsw (cosine), loaded through /batch in $load_s s"
    echo "image: $bytes bytes ($(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}') MB), seq $seq, graph included"
    echo "rounds: $rounds (median, best)"
    printf 'GET  /_admin/tenants/bench/file  %8s ms  %5s MB/s   (best %s ms, %s MB/s)\n' \
        "$get_med" "$(mbs "$get_med")" "$get_best" "$(mbs "$get_best")"
    printf 'PUT  /_admin/tenants/bench/file  %8s ms  %5s MB/s   (best %s ms, %s MB/s)\n' \
        "$put_med" "$(mbs "$put_med")" "$put_best" "$(mbs "$put_best")"
    echo "GET: image taken at one seq and its XXH3-128 digest before the first byte (median $first_med ms), then streamed"
    echo "PUT: the body read, written to <t>.fenec.incoming, fsynced, verified, renamed, the directory fsynced"
} | tee "$report"
