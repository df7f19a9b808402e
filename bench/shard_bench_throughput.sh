#!/usr/bin/env bash
# bench/shard_bench_throughput.sh: how many reads a second the router passes on beside the node
# straight and HAProxy, under load (issue 18 item 3; `make shard-bench ARGS=throughput`).
#
# Setup, once: one fenec-node, one fenec-shard in front of it and HAProxy in front of the same
# node (mode http, keep-alive, `http-reuse always`), each with its own defaults but the ones named
# below: the node and the router with --workers at their default (the CPU count), the router's
# --upstream-poll-us at its default, HAProxy with its default nbthread (the CPU count) and without
# `busy-polling` (a poller that never sleeps would take a CPU from the processes it waits on).
# The tenant `bench` is created through the router and SHARD_BENCH_ROWS accounts (pgbench's rows,
# an 84-byte filler) written to it.
#
# What it measures: `wrk -tTHREADS -cCONNECTIONS` reading a random account by id (bench/
# node_bench.lua, NODE_BENCH_MODE=id, as `make node-bench` reads it) for SHARD_BENCH_TP_SECONDS
# after SHARD_BENCH_TP_WARMUP of warm-up, along four paths: straight to the node, through the
# router, through HAProxy, and through the hop of `make shard-bench` (bench/latency_client.cc
# `hop`: a thread per client connection with one connection of its own to the node, passing each
# request head and answer on whole, parsing nothing but the framing): the floor of what a second
# process in the path costs on this machine, two more sends and two more receives a request and
# no work. SHARD_BENCH_TP_ROUNDS rounds; each round asks every path once, starting
# one place further along each round, so no path always follows the same other one on a shared
# machine. Per path and round: requests a second, wrk's p50 and p99, answers that were not 2xx and
# socket errors; the CPU time (user + system, /proc/<pid>/stat) the node, the router, HAProxy and
# wrk itself spent during the measured seconds, divided by the requests answered: microseconds of
# CPU per request. Per round: router / node and router / HAProxy in requests a second (goals
# ≥ 0.6 and ≥ 1.5), and hop / node, the floor's own ratio; then the spread (min–max) and median
# over the rounds of each ratio, the verdicts taken on the median.
#
# Why 0.6: on these machines the client, the router and the node share two CPUs, so a router
# that cost as much CPU per request as the node would leave about half of the node's rate; the
# router must cost well under the node to reach 0.6.
#
# Usage: bench/shard_bench_throughput.sh <fenec-node> <fenec-shard> [report, default
#        build/shard-bench-throughput.txt]
# Environment: SHARD_BENCH_TP_SECONDS (10), SHARD_BENCH_TP_WARMUP (2), SHARD_BENCH_TP_ROUNDS (3),
#              SHARD_BENCH_TP_THREADS (2), SHARD_BENCH_TP_CONNECTIONS (8), SHARD_BENCH_ROWS (1000),
#              SHARD_BENCH_ROUTER_ARGS (extra flags for fenec-shard, e.g. --upstream-poll-us 0).
set -euo pipefail

if (($# < 2)); then
    echo "usage: $0 <fenec-node> <fenec-shard> [report file]" >&2
    exit 2
fi
node_bin=$(realpath "$1")
shard_bin=$(realpath "$2")
report=${3:-build/shard-bench-throughput.txt}
seconds=${SHARD_BENCH_TP_SECONDS:-10}
warmup=${SHARD_BENCH_TP_WARMUP:-2}
rounds=${SHARD_BENCH_TP_ROUNDS:-3}
threads=${SHARD_BENCH_TP_THREADS:-2}
connections=${SHARD_BENCH_TP_CONNECTIONS:-8}
rows=${SHARD_BENCH_ROWS:-1000}
read -r -a router_args <<<"${SHARD_BENCH_ROUTER_ARGS:-}"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/shard_bench_lib.sh
source "$here/shard_bench_lib.sh"  # pids, stop_all, free_port, cpu_ms, ratio, spread, accounts_batch

log() { echo "shard_bench_throughput: $*" >&2; }

for v in seconds warmup rounds threads connections rows; do
    [[ "${!v}" =~ ^[0-9]+$ ]] && ((${!v} > 0)) || { log "$v=${!v} is not a positive number"; exit 2; }
done
for tool in "$node_bin" "$shard_bin"; do
    [[ -x "$tool" ]] || { log "$tool is missing"; exit 1; }
done
for tool in wrk haproxy curl ss "${CXX:-c++}"; do
    command -v "$tool" >/dev/null || { log "$tool is missing (ci/setup-bench)"; exit 1; }
done

tmp=$(mktemp -d /tmp/fenec-shard-throughput.XXXXXX)
cleanup() {
    local status=$? f
    trap - EXIT INT TERM
    stop_all 100  # SIGTERM, SIGKILL after 10 s
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

admin=bench-admin-token
root=bench-router-token
mkdir -p "$tmp/node" "$tmp/router"
"$node_bin" --listen 127.0.0.1:0 --data-dir "$tmp/node" --admin-token "$admin" \
    >"$tmp/node.out" 2>"$tmp/node.err" &
pids+=($!)
node_pid=$!
node_addr=$(listening "$tmp/node.out" "$node_pid" fenec-node)
"$shard_bin" --listen 127.0.0.1:0 --directory "$tmp/router/shard.fenec" --token "$root" \
    "${router_args[@]}" >"$tmp/router.out" 2>"$tmp/router.err" &
pids+=($!)
router_pid=$!
router_addr=$(listening "$tmp/router.out" "$router_pid" fenec-shard)

haproxy_port=$(free_port)
cat >"$tmp/haproxy.cfg" <<EOF
global
    maxconn 256
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend bench
    bind 127.0.0.1:$haproxy_port
    default_backend node
backend node
    server n1 $node_addr
EOF
haproxy -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.out" 2>"$tmp/haproxy.err" &
pids+=($!)
haproxy_pid=$!
for ((i = 0; i < 100; i++)); do
    [[ -n "$(ss -Htln "sport = :$haproxy_port")" ]] && break
    kill -0 "$haproxy_pid" 2>/dev/null || { log "haproxy exited at start"; exit 1; }
    sleep 0.1
done
client=$tmp/latency_client
"${CXX:-c++}" -O2 -std=c++20 -pthread -o "$client" "$here/latency_client.cc"
"$client" hop "$tmp/hop.port" "${node_addr##*:}" 2>"$tmp/hop.err" &
pids+=($!)
hop_pid=$!
for ((i = 0; i < 100; i++)); do
    [[ -s "$tmp/hop.port" ]] && break
    kill -0 "$hop_pid" 2>/dev/null || { log "the hop exited at start"; exit 1; }
    sleep 0.1
done
hop_port=$(cat "$tmp/hop.port")
log "fenec-node on $node_addr, fenec-shard on $router_addr, haproxy on 127.0.0.1:$haproxy_port," \
    "the hop on 127.0.0.1:$hop_port"

rcurl() { curl -sS --fail-with-body -H "Authorization: Bearer $root" "$@"; }
rcurl -X PUT "http://$router_addr/_shard/nodes/n1" \
    -d "{\"addr\":\"$node_addr\",\"token\":\"$admin\"}" >/dev/null
schema='create collection accounts (aid int @unique, bid int, abalance int, filler text)'
rcurl -X PUT "http://$router_addr/_shard/tenants/bench" \
    -d "{\"node\":\"n1\",\"schema\":[\"$schema\"]}" >/dev/null
accounts_batch "$rows" >"$tmp/rows.ndjson"
curl -sS --fail-with-body -X POST -H 'Content-Type: application/x-ndjson' \
    --data-binary @"$tmp/rows.ndjson" "http://$node_addr/t/bench/batch" >/dev/null
declare -A url=([node]="http://$node_addr" [router]="http://$router_addr"
    [haproxy]="http://127.0.0.1:$haproxy_port" [hop]="http://127.0.0.1:$hop_port")
for p in node router haproxy hop; do
    answer=$(curl -sS --fail-with-body "${url[$p]}/t/bench/c/accounts/$rows")
    [[ "$answer" == *"\"aid\":$rows,"* ]] || { log "row by id through $p: $answer"; exit 1; }
done
answer_bytes=$(curl -sS "${url[node]}/t/bench/c/accounts/1" | wc -c)

declare -A cpu_pid=([node]=$node_pid [router]=$router_pid [haproxy]=$haproxy_pid [hop]=$hop_pid)
declare -A res  # <path>/<round>/<field>
paths=(node router haproxy hop)
export NODE_BENCH_MODE=id NODE_BENCH_ROWS=$rows
for ((round = 1; round <= rounds; round++)); do
    for ((k = 0; k < ${#paths[@]}; k++)); do
        p=${paths[$(((round - 1 + k) % ${#paths[@]}))]}
        wrk -t"$threads" -c"$connections" -d"${warmup}s" -s "$here/node_bench.lua" \
            "${url[$p]}" >/dev/null
        declare -A before=()
        for q in "${paths[@]}"; do before[$q]=$(cpu_ms "${cpu_pid[$q]}"); done
        # wrk's own CPU from /usr/bin/time (its user and system seconds).
        line=$(/usr/bin/time -f 'WRK_CPU %U %S' -o "$tmp/wrk.time" \
            wrk -t"$threads" -c"$connections" -d"${seconds}s" -s "$here/node_bench.lua" \
            "${url[$p]}" | grep '^NODE_BENCH ')
        for q in "${paths[@]}"; do
            res[$p/$round/cpu_$q]=$(($(cpu_ms "${cpu_pid[$q]}") - before[$q]))
        done
        res[$p/$round/cpu_wrk]=$(awk '/^WRK_CPU/ { printf "%.0f", ($2 + $3) * 1000 }' \
            "$tmp/wrk.time")
        for kv in ${line#NODE_BENCH }; do res[$p/$round/${kv%%=*}]=${kv#*=}; done
        log "round $round $p: ${line#NODE_BENCH }"
    done
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
    if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
us_per() {  # cpu ms, requests: µs of CPU per request
    awk -v ms="$1" -v n="$2" 'BEGIN { if (n > 0) printf "%.1f", ms * 1000 / n; else print "-" }'
}
atleast() { awk -v v="$1" -v g="$2" 'BEGIN { print (v != "-" && v >= g) ? "MET" : "NOT MET" }'; }

over_node=() over_haproxy=() hop_node=()
{
    echo "make shard-bench ARGS=throughput: row-by-id reads under wrk, straight, through the" \
        "router and through HAProxy"
    echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ); $(nproc) CPUs; $(uname -r);" \
        "load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "$(head -n 1 "$tmp/node.out" | awk '{print $1, $2}') and $(head -n 1 "$tmp/router.out" |
        awk '{print $1, $2}') (their default --workers${router_args[*]:+; router ${router_args[*]}});" \
        "$(haproxy -v | head -n 1 | cut -d' ' -f1-3) (default nbthread, no busy-polling)"
    echo "wrk -t$threads -c$connections, ${seconds} s after ${warmup} s of warm-up per path and" \
        "round, $rounds rounds, the path asked first moving one place each round;" \
        "$rows rows, answer $answer_bytes bytes"
    echo "CPU: microseconds of user + system time per answered request, in each process"
    echo
    printf "%-6s %-8s %9s %8s %8s %7s %7s %8s %8s %8s %8s %8s\n" round path req/s p50_us \
        p99_us non2xx sockerr node_cpu rtr_cpu hap_cpu hop_cpu wrk_cpu
    for ((round = 1; round <= rounds; round++)); do
        for p in "${paths[@]}"; do
            n=${res[$p/$round/requests]}
            printf "%-6s %-8s %9s %8s %8s %7s %7s %8s %8s %8s %8s %8s\n" "$round" "$p" \
                "${res[$p/$round/rps]}" "${res[$p/$round/p50_us]}" "${res[$p/$round/p99_us]}" \
                "${res[$p/$round/non2xx]}" "${res[$p/$round/socket_errors]}" \
                "$(us_per "${res[$p/$round/cpu_node]}" "$n")" \
                "$(us_per "${res[$p/$round/cpu_router]}" "$n")" \
                "$(us_per "${res[$p/$round/cpu_haproxy]}" "$n")" \
                "$(us_per "${res[$p/$round/cpu_hop]}" "$n")" \
                "$(us_per "${res[$p/$round/cpu_wrk]}" "$n")"
        done
        over_node+=("$(ratio "${res[router/$round/rps]}" "${res[node/$round/rps]}")")
        over_haproxy+=("$(ratio "${res[router/$round/rps]}" "${res[haproxy/$round/rps]}")")
        hop_node+=("$(ratio "${res[hop/$round/rps]}" "${res[node/$round/rps]}")")
    done
    echo
    echo "router / node, per round:    ${over_node[*]}"
    echo "router / haproxy, per round: ${over_haproxy[*]}"
    echo "hop / node, per round:       ${hop_node[*]}"
    m_node=$(median "${over_node[@]}")
    m_haproxy=$(median "${over_haproxy[@]}")
    echo "router / node:    median $m_node, spread $(spread "${over_node[@]}")" \
        "  goal >= 0.6: $(atleast "$m_node" 0.6)"
    echo "router / haproxy: median $m_haproxy, spread $(spread "${over_haproxy[@]}")" \
        "  goal >= 1.5: $(atleast "$m_haproxy" 1.5)"
    echo "hop / node:       median $(median "${hop_node[@]}"), spread $(spread "${hop_node[@]}")" \
        "  (the floor: a second process that does no work)"
    failed=0
    for ((round = 1; round <= rounds; round++)); do
        for p in "${paths[@]}"; do
            failed=$((failed + res[$p/$round/non2xx] + res[$p/$round/socket_errors]))
        done
    done
    echo "answers not 2xx or lost, all paths and rounds: $failed"
} | tee "$tmp/report"
mkdir -p "$(dirname "$report")"
cp "$tmp/report" "$report"
log "report written to $report"
grep -q '^answers not 2xx or lost, all paths and rounds: 0$' "$tmp/report" ||
    { log "some reads failed: the rates above are not comparable"; exit 1; }
