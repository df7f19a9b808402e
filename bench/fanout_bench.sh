#!/usr/bin/env bash
# bench/fanout_bench.sh: the query across tenants (router.md §12, §17 `fanout`), in one run
# (`make shard-bench ARGS=fanout`).
#
# What it measures: 100 tenants of 200 rows on three fenec-node processes behind fenec-shard;
# p50 over FANOUT_BENCH_ROUNDS rounds (300) of four POST /_shard/query asks, three merges and a
# concat:
#   order    `get orders order at desc limit 20`, merged by `at desc` (a timestamp)
#   name_tr  `get orders order name limit 20`, merged by {"column":"name","collate":"tr",
#            "nocase":true} (the field is `collate tr nocase`)
#   fold     `get orders select status, count(*), sum(total) group status`, folded by status
#   concat   order's statement under {"kind":"concat"}: the rows passed on as they come, merged
#            by nothing, so its ratio is the floor of the router's own hop (its calls, each
#            answer read and split into rows, the body written); information, not a goal
# each beside a client asking the same 100 tenants' nodes the same statement directly
# (POST /_admin/tenants/<t>/query), 16 at once from one thread's event loop (non-blocking sockets
# and epoll; the router asks them from one io_uring loop, so not 16 threads, whose wake-ups the
# router does not pay), merging nothing (bench/fanout_client.cc), timed in the same round so the machine's load
# touches both alike. Goal: router p50 / client p50 <= 1.1 for each merge.
#
# Usage: bench/fanout_bench.sh <fenec-node> <fenec-shard> [report, default build/fanout-bench.txt]
# Environment: FANOUT_BENCH_ROUNDS (300), FANOUT_BENCH_WARMUP (20), FANOUT_BENCH_WORKERS (1:
#              --workers of nodes and router), CXX (c++), FANOUT_BENCH_NODE_ARGS and
#              FANOUT_BENCH_ROUTER_ARGS (more flags for the nodes and the router, split on spaces).
set -euo pipefail

if (($# < 2)); then
    echo "usage: $0 <fenec-node> <fenec-shard> [report file]" >&2
    exit 2
fi
node_bin=$(realpath "$1")
shard_bin=$(realpath "$2")
report=${3:-build/fanout-bench.txt}
rounds=${FANOUT_BENCH_ROUNDS:-300}
warmup=${FANOUT_BENCH_WARMUP:-20}
workers=${FANOUT_BENCH_WORKERS:-1}
tenants=100
rows=200
here=$(cd "$(dirname "$0")" && pwd)

log() { echo "fanout_bench: $*" >&2; }

tmp=$(mktemp -d /tmp/fenec-fanout-bench.XXXXXX)
pids=()
cleanup() {
    local status=$? pid i
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || continue
        for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if ((status != 0)); then
        log "failed (exit $status); logs follow"
        for f in "$tmp"/*.err; do
            [[ -s "$f" ]] && { echo "== $f" >&2; tail -n 20 "$f" >&2; }
        done
    fi
    rm -rf -- "$tmp"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_listening() {  # name binary args...
    local name=$1 i
    port=""
    shift
    "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pids+=($!)
    for ((i = 0; i < 100; i++)); do
        port=$(sed -n '1s/.*listening=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.out" 2>/dev/null || true)
        [[ -n "$port" ]] && break
        kill -0 "${pids[-1]}" 2>/dev/null || { log "$name exited at start"; exit 1; }
        sleep 0.1
    done
    [[ -n "$port" ]] || { log "$name printed no listening= line in 10 s"; exit 1; }
}

client=$tmp/fanout_client
"${CXX:-c++}" -O2 -std=c++20 -o "$client" "$here/fanout_client.cc"

data=bench-data-token
router_token=bench-router-token
declare -a node_ports
for n in 1 2 3; do
    mkdir -p "$tmp/node$n"
    # shellcheck disable=SC2086  # FANOUT_BENCH_NODE_ARGS: extra flags, split on spaces
    start_listening "node$n" "$node_bin" --listen 127.0.0.1:0 \
        --data-dir "$tmp/node$n" --workers "$workers" --token "$data" --admin-token "admin-$n" \
        ${FANOUT_BENCH_NODE_ARGS:-}
    node_ports[$n]=$port
done
mkdir -p "$tmp/router"
# shellcheck disable=SC2086  # FANOUT_BENCH_ROUTER_ARGS: extra flags, split on spaces
start_listening router "$shard_bin" --listen 127.0.0.1:0 --workers "$workers" \
    --directory "$tmp/router/shard.fenec" --token "$router_token" ${FANOUT_BENCH_ROUTER_ARGS:-}
router_port=$port
log "nodes on ${node_ports[*]}, fenec-shard on $router_port"

rcurl() { curl -sS --fail-with-body -H "Authorization: Bearer $router_token" "$@"; }
for n in 1 2 3; do
    rcurl -X PUT "http://127.0.0.1:$router_port/_shard/nodes/n$n" \
        -d "{\"addr\":\"127.0.0.1:${node_ports[$n]}\",\"token\":\"admin-$n\"}" >/dev/null
done
schema='create collection orders (name text collate tr nocase, at timestamp, total int, status text)'
: >"$tmp/tenants"
log "$tenants tenants of $rows rows"
for ((t = 0; t < tenants; t++)); do
    name=$(printf 't%03d' "$t")
    n=$((t % 3 + 1))
    rcurl -X PUT "http://127.0.0.1:$router_port/_shard/tenants/$name" \
        -d "{\"node\":\"n$n\",\"schema\":[\"$schema\"]}" >/dev/null
    echo "$name ${node_ports[$n]} admin-$n" >>"$tmp/tenants"
    awk -v rows="$rows" -v seed="$t" 'BEGIN {
        srand(seed + 1)
        split("İzmir izmir ISTANBUL İstanbul Ankara ankara çelik Çelik Dursun ılgın Işık şule Şule zeynep Ömer ömer", names, " ")
        split("open done held", statuses, " ")
        line = "{\"query\":\"insert orders $1\",\"params\":[["
        for (i = 1; i <= rows; i++) {
            ms = int(rand() * 4) * 250
            at = sprintf("2024-05-%02dT%02d:%02d:%02d.%03dZ", 1 + int(rand() * 28), int(rand() * 24),
                         int(rand() * 60), int(rand() * 60), ms)
            line = line (i > 1 ? "," : "") "{\"name\":\"" names[1 + int(rand() * 16)] " " i "\"" \
                ",\"at\":\"" at "\",\"total\":" int(rand() * 1000) \
                ",\"status\":\"" statuses[1 + int(rand() * 3)] "\"}"
        }
        print line "]]}"
    }' | curl -sS --fail-with-body -H "Authorization: Bearer $data" -H "Content-Type: application/json" --data-binary @- \
        "http://127.0.0.1:$router_port/t/$name/query" >/dev/null
done

order='get orders order at desc limit 20'
name_tr='get orders order name limit 20'
fold='get orders select status, count(*), sum(total) group status'
{
    printf 'order\t{"statement":"%s","merge":{"kind":"order","keys":["at desc"]}}\t{"query":"%s"}\n' \
        "$order" "$order"
    printf 'name_tr\t{"statement":"%s","merge":{"kind":"order","keys":[{"column":"name","collate":"tr","nocase":true}]}}\t{"query":"%s"}\n' \
        "$name_tr" "$name_tr"
    printf 'fold\t{"statement":"%s","merge":{"kind":"fold","group":["status"],"sum":["count(*)","sum(total)"]}}\t{"query":"%s"}\n' \
        "$fold" "$fold"
    printf 'concat\t{"statement":"%s","merge":{"kind":"concat"}}\t{"query":"%s"}\n' \
        "$order" "$order"
} >"$tmp/queries"

log "$rounds rounds after $warmup of warm-up"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
out=$("$client" "$rounds" "$warmup" "$router_port" "$router_token" "$tmp/tenants" "$tmp/queries")
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

declare -A r
while read -r name path fields; do
    for kv in $fields; do r[$name/$path/${kv%%=*}]=${kv#*=}; done
done <<<"$out"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
verdict() { awk -v v="$1" 'BEGIN { print (v != "-" && v <= 1.1) ? "MET" : "NOT MET" }'; }
{
    echo "make shard-bench ARGS=fanout: POST /_shard/query over $tenants tenants of $rows rows on three nodes"
    echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ); $(nproc) CPUs; load average before $load_before," \
        "after $load_after; --workers $workers (nodes and router); --fanout-concurrency 16"
    echo "$rounds rounds after $warmup of warm-up; each round each merge through the router, then"
    echo "a client asking the same tenants' nodes directly, 16 at once on one thread's epoll loop,"
    echo "merging nothing; microseconds"
    echo
    printf "%-8s %10s %10s %10s %10s %8s %s\n" merge router_p50 client_p50 router_p95 client_p95 ratio "goal <= 1.1"
    for q in order name_tr fold; do
        rt=$(ratio "${r[$q/router/p50_us]}" "${r[$q/client/p50_us]}")
        printf "%-8s %10s %10s %10s %10s %8s %s\n" "$q" "${r[$q/router/p50_us]}" \
            "${r[$q/client/p50_us]}" "${r[$q/router/p95_us]}" "${r[$q/client/p95_us]}" "$rt" "$(verdict "$rt")"
    done
    q=concat
    printf "%-8s %10s %10s %10s %10s %8s %s\n" "$q" "${r[$q/router/p50_us]}" \
        "${r[$q/client/p50_us]}" "${r[$q/router/p95_us]}" "${r[$q/client/p95_us]}" \
        "$(ratio "${r[$q/router/p50_us]}" "${r[$q/client/p50_us]}")" \
        "(no goal: merged by nothing, the floor of the router's hop)"
} | tee "$tmp/report"
mkdir -p "$(dirname "$report")"
cp "$tmp/report" "$report"
log "report written to $report"
