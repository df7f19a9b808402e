#!/usr/bin/env bash
# bench/shard_bench.sh: what the router adds to a read's latency, beside what HAProxy adds, in one
# run (`make shard-bench`).
#
# What it measures: p50/p95/p99 of a row-by-id read (GET /t/bench/c/accounts/<id>, ids cycling
# over SHARD_BENCH_ROWS rows) from one keep-alive client, along four paths:
#   (a) node:     straight to a fenec-node
#   (b) router:   through fenec-shard in front of that node
#   (c) haproxy:  through HAProxy (Debian's, ci/setup-bench) as a plain keep-alive HTTP proxy in
#                 front of the same node (mode http, http-reuse always, one thread), with
#                 `busy-polling` whenever the router polls (below)
#   (d) loopback: a trivial server answering each request head at once with a canned 200 of the
#                 node's answer size, over a kept TCP connection: the floor of one round trip
#   (e) hop:      a trivial proxy in front of the node (latency_client hop: a blocking thread
#                 passing the head and the answer on as they are, parsing nothing but the
#                 framing): the floor of what one extra hop adds with a thread that sleeps
# and the router's added p50 (b − a) over HAProxy's (c − a) and over the loopback round trip (d);
# the goals are ≤ 1.0 for both. The hop's added p50 (e − a) over the loopback round trip is
# printed beside them: where it is itself near 1.0, so is the best any sleeping proxy can do.
#
# How: bench/latency_client.cc (built here with the system compiler) holds one TCP_NODELAY
# connection per path and sends one request to each path in turn, timing each with
# clock_gettime around a blocking send and the recvs that read the answer whole; the first
# SHARD_BENCH_WARMUP rounds are not counted. Round-robin, so the machine's load (shared cores)
# touches the four paths alike. Everything it started is stopped on exit, failure and signals.
#
# Fairness: the router runs with `--upstream-poll-us SHARD_BENCH_UPSTREAM_POLL_US` (50, its own
# default: its loop polls for a node's answer before it sleeps). HAProxy's like of it is
# `busy-polling` in its global section (its pollers never sleep), so it gets that whenever the
# router polls, and neither polls at 0. HAProxy's poller spins for the whole run where the
# router's yields and stops after 50 us, so the report gives each process's CPU time during the
# measurement beside the latencies: what each side pays for its figure.
#
# Usage: bench/shard_bench.sh <fenec-node> <fenec-shard> [report, default build/shard-bench.txt]
# Environment: SHARD_BENCH_REQUESTS (5000), SHARD_BENCH_WARMUP (500), SHARD_BENCH_ROWS (1000),
#              SHARD_BENCH_WORKERS (1: --workers of node and router), SHARD_BENCH_UPSTREAM_POLL_US
#              (50: the router's --upstream-poll-us; HAProxy busy-polls unless 0), CXX (c++).
set -euo pipefail

if (($# < 2)); then
    echo "usage: $0 <fenec-node> <fenec-shard> [report file]" >&2
    exit 2
fi
node_bin=$(realpath "$1")
shard_bin=$(realpath "$2")
report=${3:-build/shard-bench.txt}
requests=${SHARD_BENCH_REQUESTS:-5000}
warmup=${SHARD_BENCH_WARMUP:-500}
rows=${SHARD_BENCH_ROWS:-1000}
workers=${SHARD_BENCH_WORKERS:-1}
poll_us=${SHARD_BENCH_UPSTREAM_POLL_US:-50}
here=$(cd "$(dirname "$0")" && pwd)

[[ "$poll_us" =~ ^[0-9]+$ ]] || { echo "shard_bench: SHARD_BENCH_UPSTREAM_POLL_US=$poll_us" >&2; exit 2; }
for tool in "$node_bin" "$shard_bin"; do
    [[ -x "$tool" ]] || { echo "shard_bench: $tool is missing" >&2; exit 1; }
done
for tool in haproxy curl ss "${CXX:-c++}"; do
    command -v "$tool" >/dev/null || { echo "shard_bench: $tool is missing (ci/setup-bench)" >&2; exit 1; }
done

log() { echo "shard_bench: $*" >&2; }

tmp=$(mktemp -d /tmp/fenec-shard-bench.XXXXXX)
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

free_port() {  # a port nothing listens on (HAProxy needs one named)
    local port tries
    for ((tries = 0; tries < 100; tries++)); do
        port=$((20000 + RANDOM % 30000))
        [[ -z "$(ss -Htln "sport = :$port")" ]] && { echo "$port"; return 0; }
    done
    return 1
}

# Starts a binary printing `listening=127.0.0.1:<port>` first; sets `port`. Not to be run in
# a $(…) subshell: the pid must reach `pids` here, or cleanup would leave the process running.
start_listening() {  # name binary args...
    local name=$1 i
    port=""
    shift
    : >"$tmp/$name.out"
    "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    pids+=($!)
    for ((i = 0; i < 100; i++)); do
        port=$(sed -n '1s/.*listening=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$name.out")
        [[ -n "$port" ]] && break
        kill -0 "${pids[-1]}" 2>/dev/null || { log "$name exited at start"; exit 1; }
        sleep 0.1
    done
    [[ -n "$port" ]] || { log "$name printed no listening= line in 10 s"; exit 1; }
}

client=$tmp/latency_client
"${CXX:-c++}" -O2 -std=c++20 -pthread -o "$client" "$here/latency_client.cc"

admin=bench-admin-token
router_token=bench-router-token
mkdir -p "$tmp/node" "$tmp/router"
start_listening node "$node_bin" --listen 127.0.0.1:0 --data-dir "$tmp/node" \
    --workers "$workers" --admin-token "$admin"
node_port=$port
start_listening router "$shard_bin" --listen 127.0.0.1:0 --workers "$workers" \
    --directory "$tmp/router/shard.fenec" --token "$router_token" --upstream-poll-us "$poll_us"
router_port=$port
log "fenec-node on $node_port, fenec-shard on $router_port"

rcurl() { curl -sS --fail-with-body -H "Authorization: Bearer $router_token" "$@"; }
rcurl -X PUT "http://127.0.0.1:$router_port/_shard/nodes/n1" \
    -d "{\"addr\":\"127.0.0.1:$node_port\",\"token\":\"$admin\"}" >/dev/null
schema='create collection accounts (aid int @unique, bid int, abalance int, filler text)'
rcurl -X PUT "http://127.0.0.1:$router_port/_shard/tenants/bench" \
    -d "{\"node\":\"n1\",\"schema\":[\"$schema\"]}" >/dev/null
body=$(awk -v rows="$rows" 'BEGIN {
    filler = sprintf("%84s", "")
    line = "{\"query\":\"insert accounts $1\",\"params\":[["
    for (aid = 1; aid <= rows; aid++) {
        line = line (aid > 1 ? "," : "") "{\"_id\":" aid ",\"aid\":" aid ",\"bid\":1" \
            ",\"abalance\":0,\"filler\":\"" filler "\"}"
    }
    print line "]]}"
}')
curl -sS --fail-with-body -X POST -H 'Content-Type: application/x-ndjson' --data-binary @- \
    "http://127.0.0.1:$node_port/t/bench/batch" <<<"$body" >/dev/null
answer=$(curl -sS --fail-with-body "http://127.0.0.1:$router_port/t/bench/c/accounts/$rows")
[[ "$answer" == *"\"aid\":$rows,"* ]] || { log "row by id through the router: $answer"; exit 1; }
answer_bytes=$(curl -sS "http://127.0.0.1:$node_port/t/bench/c/accounts/1" | wc -c)

haproxy_port=$(free_port)
if ((poll_us > 0)); then haproxy_poll=busy-polling; else haproxy_poll="no busy-polling"; fi
cat >"$tmp/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 256
    $haproxy_poll
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
    server n1 127.0.0.1:$node_port
EOF
haproxy -db -f "$tmp/haproxy.cfg" >"$tmp/haproxy.out" 2>"$tmp/haproxy.err" &
pids+=($!)
haproxy_pid=$!
"$client" echo "$tmp/echo.port" "$answer_bytes" 2>"$tmp/echo.err" &
pids+=($!)
"$client" hop "$tmp/hop.port" "$node_port" 2>"$tmp/hop.err" &
pids+=($!)
for ((i = 0; i < 100; i++)); do
    [[ -s "$tmp/echo.port" && -s "$tmp/hop.port" &&
        -n "$(ss -Htln "sport = :$haproxy_port")" ]] && break
    sleep 0.1
done
echo_port=$(cat "$tmp/echo.port")
hop_port=$(cat "$tmp/hop.port")
curl -sS --fail-with-body "http://127.0.0.1:$haproxy_port/t/bench/c/accounts/1" >/dev/null

log "$requests requests after $warmup of warm-up, round-robin over node, router, haproxy," \
    "loopback, hop"
# CPU time (user + system, ms) a process has used so far; fields 14 and 15 of /proc/<pid>/stat,
# counted after the `(comm)` field, which may hold spaces.
cpu_ms() {
    local stat
    stat=$(<"/proc/$1/stat")
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.0f", ($12 + $13) * 1000 / hz }' <<<"${stat##*) }"
}
declare -A cpu_pid=([node]=${pids[0]} [router]=${pids[1]} [haproxy]=$haproxy_pid)
declare -A cpu_before
for p in node router haproxy; do cpu_before[$p]=$(cpu_ms "${cpu_pid[$p]}"); done
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
measure_start=$(date +%s.%N)
out=$("$client" measure "$requests" "$warmup" /t/bench/c/accounts/%d "$rows" \
    node="$node_port" router="$router_port" haproxy="$haproxy_port" loopback="$echo_port" \
    hop="$hop_port")
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
measure_s=$(awk -v a="$measure_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
declare -A cpu_used
for p in node router haproxy; do
    cpu_used[$p]=$(($(cpu_ms "${cpu_pid[$p]}") - cpu_before[$p]))
done

declare -A r
while read -r name fields; do
    for kv in $fields; do r[$name/${kv%%=*}]=${kv#*=}; done
done <<<"$out"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a - b }'; }
verdict() { awk -v v="$1" 'BEGIN { print (v != "-" && v <= 1.0) ? "MET" : "NOT MET" }'; }

router_added=$(minus "${r[router/p50_us]}" "${r[node/p50_us]}")
haproxy_added=$(minus "${r[haproxy/p50_us]}" "${r[node/p50_us]}")
over_haproxy=$(ratio "$router_added" "$haproxy_added")
over_loopback=$(ratio "$router_added" "${r[loopback/p50_us]}")
hop_added=$(minus "${r[hop/p50_us]}" "${r[node/p50_us]}")
hop_over_loopback=$(ratio "$hop_added" "${r[loopback/p50_us]}")
{
    echo "make shard-bench: the router's added latency on a row-by-id read, one run"
    echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ); $(nproc) CPUs; load average before $load_before," \
        "after $load_after"
    echo "$(head -n 1 "$tmp/node.out" | awk '{print $1, $2}') and $(head -n 1 "$tmp/router.out" |
        awk '{print $1, $2}') (--workers $workers each, router --upstream-poll-us $poll_us);" \
        "$(haproxy -v | head -n 1 | cut -d' ' -f1-3) (nbthread 1, $haproxy_poll)"
    echo "one keep-alive client, one connection per path, requests round-robin over the paths;"
    echo "$requests requests per path after $warmup of warm-up; answer $answer_bytes bytes;" \
        "latencies in microseconds"
    echo
    printf "%-10s %9s %9s %9s %9s\n" path p50 p95 p99 min
    for p in node router haproxy loopback hop; do
        printf "%-10s %9s %9s %9s %9s\n" "$p" "${r[$p/p50_us]}" "${r[$p/p95_us]}" \
            "${r[$p/p99_us]}" "${r[$p/min_us]}"
    done
    echo
    echo "router added p50 (router − node):   $router_added"
    echo "haproxy added p50 (haproxy − node): $haproxy_added"
    echo "router added / haproxy added:       $over_haproxy   goal <= 1.0: $(verdict "$over_haproxy")"
    echo "router added / loopback round trip: $over_loopback   goal <= 1.0: $(verdict "$over_loopback")"
    echo "hop added p50 (hop − node):         $hop_added"
    echo "hop added / loopback round trip:    $hop_over_loopback   (the floor of a sleeping proxy)"
    echo "CPU during the ${measure_s} s measurement, ms: node ${cpu_used[node]}," \
        "router ${cpu_used[router]}, haproxy ${cpu_used[haproxy]}"
} | tee "$tmp/report"
mkdir -p "$(dirname "$report")"
cp "$tmp/report" "$report"
log "report written to $report"
