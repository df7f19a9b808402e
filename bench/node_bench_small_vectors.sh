#!/usr/bin/env bash
# bench/node_bench_small_vectors.sh: what a small `@hnsw` field costs a node, tenant by tenant
# (make node-bench ARGS=small-vectors).
#
# What it measures: one fenec-node, `tenants` tenants (200) created and written through its HTTP
# API, each with `docs` rows (10) holding a `vector<dim>` (64) and a short title, then the node's
# resident memory (VmRSS of /proc/<pid>/status) and its own account of its tenants' memory
# (fenec_memory_bytes). Three kinds, each on a fresh node, in one run and in turn `rounds` times
# (3), so the machine's load touches them alike:
#   plain:   the vector field without an index (`vector<64>`): the baseline, what the rows cost;
#   hnsw:    the same field with `@hnsw` (m 16, ef_search 100: no graph up to 3 200 vectors);
#   graph:   `@hnsw(m = 2, ef_search = 2)`, whose graph is kept past 8 vectors: what a field that
#            keeps an hnswlib graph costs, the figure every small field paid before.
# Printed per kind: KiB of RSS per tenant above the node's RSS before the first create (median
# and spread over the rounds), and `hnsw`'s and `graph`'s excess over `plain` per tenant. The
# goal (issue 18 item 7): a small vector field costs about what its vectors do, at most 64 KiB for
# 10 vectors of 64.
#
# Every tenant stays open (--close-idle 0 keeps them: nothing closes them while the bench runs).
# Usage: bench/node_bench_small_vectors.sh <fenec-node> [report file]
# Environment: SMALL_VECTORS_TENANTS (200), SMALL_VECTORS_DOCS (10), SMALL_VECTORS_DIM (64),
# SMALL_VECTORS_ROUNDS (3).
set -euo pipefail

if (($# < 1)); then
    echo "usage: $0 <fenec-node> [report file]" >&2
    exit 2
fi
node_bin=$(realpath "$1")
report=${2:-build/node-bench-small-vectors.txt}
tenants=${SMALL_VECTORS_TENANTS:-200}
docs=${SMALL_VECTORS_DOCS:-10}
dim=${SMALL_VECTORS_DIM:-64}
rounds=${SMALL_VECTORS_ROUNDS:-3}

command -v curl >/dev/null || { echo "node_bench_small_vectors: curl is missing" >&2; exit 1; }
log() { echo "node_bench_small_vectors: $*" >&2; }

tmp=$(mktemp -d /tmp/fenec-small-vectors.XXXXXX)
node_pid=""
stop_node() {
    local i
    [[ -n "$node_pid" ]] || return 0
    kill -TERM "$node_pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do kill -0 "$node_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$node_pid" 2>/dev/null || true
    wait "$node_pid" 2>/dev/null || true
    node_pid=""
}
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop_node
    if ((status != 0)) && [[ -s "$tmp/node.err" ]]; then tail -n 20 "$tmp/node.err" >&2; fi
    rm -rf -- "$tmp"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port=""
start_node() {
    local i
    rm -rf -- "$tmp/data"
    mkdir -p -m 700 "$tmp/data"
    "$node_bin" --listen 127.0.0.1:0 --data-dir "$tmp/data" --workers 1 --close-idle 0 \
        >"$tmp/node.out" 2>"$tmp/node.err" &
    node_pid=$!
    port=""
    for ((i = 0; i < 100; i++)); do
        port=$(sed -n '1s/.* listening=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/node.out")
        [[ -n "$port" ]] && break
        kill -0 "$node_pid" 2>/dev/null || { log "fenec-node exited at start"; exit 1; }
        sleep 0.1
    done
    [[ -n "$port" ]] || { log "fenec-node printed no listening= line in 10 s"; exit 1; }
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$node_pid/status"; }

# The rows every tenant gets: the same `docs` vectors (fixed seed), one insert statement.
awk -v docs="$docs" -v dim="$dim" 'BEGIN {
    srand(7)
    line = "{\"query\":\"insert docs $1\",\"params\":[["
    for (id = 1; id <= docs; id++) {
        v = sprintf("%.4f", rand() + 0.0001)
        for (d = 1; d < dim; d++) v = v "," sprintf("%.4f", rand() - 0.5)
        line = line (id > 1 ? "," : "") "{\"_id\":" id ",\"title\":\"doc " id "\",\"v\":[" v "]}"
    }
    print line "]]}"
}' >"$tmp/rows.json"

# One kind on a fresh node: prints "<KiB per tenant> <fenec_memory_bytes per tenant>".
measure() {  # field definition
    local field=$1 before after mem t
    start_node
    local url="http://127.0.0.1:$port"
    curl -sS --fail-with-body -o /dev/null "$url/_health"
    before=$(rss_kib)
    for ((t = 0; t < tenants; t++)); do
        curl -sS --fail-with-body -o /dev/null -X PUT "$url/_admin/tenants/t$t" \
            -H 'Content-Type: application/json' \
            -d "{\"schema\":[\"create collection docs (title text, v $field)\"]}"
        curl -sS --fail-with-body -o /dev/null -X POST "$url/t/t$t/query" \
            -H 'Content-Type: application/json' --data-binary @"$tmp/rows.json"
    done
    after=$(rss_kib)
    mem=$(curl -sS --fail-with-body "$url/_metrics" | awk '$1 == "fenec_memory_bytes" {print $2}')
    local open
    open=$(curl -sS --fail-with-body "$url/_metrics" | awk '$1 == "fenec_tenants_open" {print $2}')
    ((open == tenants)) || { log "$open tenants open of $tenants"; exit 1; }
    stop_node
    awk -v a="$after" -v b="$before" -v m="$mem" -v n="$tenants" \
        'BEGIN {printf "%.1f %.1f\n", (a - b) / n, m / n / 1024}'
}

declare -A rss mem
kinds=(plain hnsw graph)
declare -A def=([plain]="vector<$dim>" [hnsw]="vector<$dim> @hnsw"
                [graph]="vector<$dim> @hnsw(m = 2, ef_search = 2)")
for ((r = 1; r <= rounds; r++)); do
    for k in "${kinds[@]}"; do
        read -r kib accounted < <(measure "${def[$k]}")
        rss[$k]+="$kib "
        mem[$k]+="$accounted "
        log "round $r $k: $kib KiB RSS a tenant, $accounted KiB accounted"
    done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
spread() { tr ' ' '\n' | grep -v '^$' | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo "-" hi}'; }

mkdir -p "$(dirname "$report")"
{
    echo "# node-bench small-vectors: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r)"
    echo "# $tenants tenants, each $docs rows of vector<$dim> (raw vectors: $((docs * dim * 4 / 1024)) KiB);" \
        "$rounds rounds, a fresh node each kind each round"
    printf "%-7s %-36s %14s %16s %18s\n" kind field "RSS KiB/tenant" "spread" "accounted KiB"
    for k in "${kinds[@]}"; do
        printf "%-7s %-36s %14s %16s %18s\n" "$k" "${def[$k]}" "$(median <<<"${rss[$k]}")" \
            "$(spread <<<"${rss[$k]}")" "$(median <<<"${mem[$k]}")"
    done
    plain=$(median <<<"${rss[plain]}")
    for k in hnsw graph; do
        awk -v k="$k" -v a="$(median <<<"${rss[$k]}")" -v p="$plain" \
            'BEGIN {printf "%s over plain: %.1f KiB a tenant%s\n", k, a - p,
                    k == "hnsw" ? " (goal: <= 64)" : ""}'
    done
} | tee "$report"
