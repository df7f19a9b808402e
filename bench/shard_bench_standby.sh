#!/usr/bin/env bash
# bench/shard_bench_standby.sh: what a standby router adds to a read beside what its primary adds
# (router.md §17 `ARGS=standby`, §10), as `make shard-bench ARGS=standby` runs it.
#
# Setup per run, fresh processes each time: one fenec-node; a primary fenec-shard with
# --replication-token; a standby fenec-shard following it (--replica-of, its own directory file).
# The node is recorded and the tenant `bench` created through the primary, SHARD_BENCH_ROWS rows
# written through it; then the run waits until the standby's directory has the tenant (its
# GET /_replication/status at the primary's position, connected, and its GET /_shard/tenants/bench
# answering 200), as a client of the standby would need.
#
# What it measures, per run: p50/p95/p99 of a row-by-id read (GET /t/bench/c/accounts/<id>, ids
# cycling over the rows) from one keep-alive client, straight to the node, through the primary and
# through the standby, one request to each in turn (bench/latency_client.cc `measure`, the client
# of `make shard-bench`; SHARD_BENCH_REQUESTS after SHARD_BENCH_WARMUP of warm-up), with
# `--rotate`: each round starts one place further along, so each path is asked first, second and
# third equally often. On a loaded machine the place matters: with a fixed order a path is always
# asked right after the same other one, which biases it by an amount that holds for the whole run
# and changes from run to run (two identical standbys measured up to 1.4× apart in one run).
# Reported per run: each path's p50, each router's added p50 over the node's, standby added /
# primary added (goal ≤ 1.05 in the same run: following costs a request nothing), and each
# process's CPU time during the measurement; then the spread (min–max) over the runs of every
# figure, never the best run. Seed 002's reference: 23.7 µs added p50 for both routers (23.0–23.8
# and 23.1–23.9 over five runs).
#
# STANDBY_BENCH_CONTROL=1 adds a control: a second standby following the same primary, asked in
# the same rotation, and per run its added p50 over the first standby's, the ratio two routers in
# the same role differ by in the same run: the noise any standby / primary ratio is read against.
#
# The routers run with the same flags but the standby's two (--workers SHARD_BENCH_WORKERS,
# --upstream-poll-us SHARD_BENCH_UPSTREAM_POLL_US, as `make shard-bench` runs its router).
# Everything it started is stopped on exit, failure and signals.
#
# Usage: bench/shard_bench_standby.sh <fenec-node> <fenec-shard> [report, default
#        build/shard-bench-standby.txt]
# Environment: STANDBY_BENCH_RUNS (5), STANDBY_BENCH_CONTROL (0), SHARD_BENCH_REQUESTS (5000),
#              SHARD_BENCH_WARMUP (500), SHARD_BENCH_ROWS (1000), SHARD_BENCH_WORKERS (1),
#              SHARD_BENCH_UPSTREAM_POLL_US (50), CXX (c++).
set -euo pipefail

if (($# < 2)); then
    echo "usage: $0 <fenec-node> <fenec-shard> [report file]" >&2
    exit 2
fi
node_bin=$(realpath "$1")
shard_bin=$(realpath "$2")
report=${3:-build/shard-bench-standby.txt}
runs=${STANDBY_BENCH_RUNS:-5}
control=${STANDBY_BENCH_CONTROL:-0}
requests=${SHARD_BENCH_REQUESTS:-5000}
warmup=${SHARD_BENCH_WARMUP:-500}
rows=${SHARD_BENCH_ROWS:-1000}
workers=${SHARD_BENCH_WORKERS:-1}
poll_us=${SHARD_BENCH_UPSTREAM_POLL_US:-50}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/shard_bench_lib.sh
source "$here/shard_bench_lib.sh"  # pids, stop_all, cpu_ms, minus, ratio, spread, listening

log() { echo "shard_bench_standby: $*" >&2; }

for v in runs control requests warmup rows workers poll_us; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || { log "$v=${!v} is not a number"; exit 2; }
done
for tool in "$node_bin" "$shard_bin"; do
    [[ -x "$tool" ]] || { log "$tool is missing"; exit 1; }
done
for tool in curl "${CXX:-c++}"; do
    command -v "$tool" >/dev/null || { log "$tool is missing (ci/setup)"; exit 1; }
done

tmp=$(mktemp -d /tmp/fenec-shard-standby.XXXXXX)
cleanup() {
    local status=$? f
    trap - EXIT INT TERM
    stop_all 100  # SIGTERM, SIGKILL after 10 s
    if ((status != 0)); then
        log "failed (exit $status); logs follow"
        for f in "$tmp"/run-*/*.err; do
            [[ -s "$f" ]] && { echo "== $f" >&2; tail -n 20 "$f" >&2; }
        done
    fi
    rm -rf -- "$tmp"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

client=$tmp/latency_client
"${CXX:-c++}" -O2 -std=c++20 -pthread -o "$client" "$here/latency_client.cc"

admin=bench-admin-token
root=bench-router-token
replication=bench-replication-token
schema='create collection accounts (aid int @unique, bid int, abalance int, filler text)'
accounts_batch "$rows" >"$tmp/rows.ndjson"

rcurl() { curl -sS --fail-with-body -H "Authorization: Bearer $root" "$@"; }
status_of() {  # router address: its GET /_replication/status
    curl -sS --fail-with-body -H "Authorization: Bearer $replication" \
        "http://$1/_replication/status"
}
seq_of() { sed -n 's/.*"position":{"seq":\([0-9]*\).*/\1/p' <<<"$1"; }

# A standby router following $primary_addr, as `name` in `dir`; sets started_pid, started_addr.
# Not to be run in a $(…) subshell: the pid must reach `pids` here.
start_standby() {  # dir name
    mkdir -p "$1/$2"
    "$shard_bin" --listen 127.0.0.1:0 --workers "$workers" --upstream-poll-us "$poll_us" \
        --directory "$1/$2/standby.fenec" --token "$root" \
        --replication-token "$replication" --replica-of "http://$primary_addr" \
        >"$1/$2.out" 2>"$1/$2.err" &
    pids+=($!)
    started_pid=$!
    started_addr=$(listening "$1/$2.out" "$started_pid" "fenec-shard ($2)")
}

# Waits (up to 10 s) until the standby at $1 has the tenant: at the primary's position, connected,
# and answering for it.
wait_for_tenant() {  # standby address
    local want got status i
    want=$(seq_of "$(status_of "$primary_addr")")
    for ((i = 0; i < 200; i++)); do
        status=$(status_of "$1" || true)
        got=$(seq_of "$status")
        [[ -n "$got" && -n "$want" ]] && ((got >= want)) &&
            [[ "$status" == *'"connected":true'* ]] &&
            rcurl -o /dev/null "http://$1/_shard/tenants/bench" 2>/dev/null && break
        sleep 0.05
    done
    ((i < 200)) || { log "the standby on $1 did not reach seq $want in 10 s: $status"; exit 1; }
    log "the standby on $1 has the directory at seq $got (the primary's $want)"
}

# One run, in this shell (so an interrupt stops what it started): the processes started, the
# tenant made, the measurement; writes "<name> p50_us=.. …" lines, "cpu <node> <primary>
# <standby> <measurement s>" and "load <before> <after>" to $dir/result.
one_run() {
    local run=$1 dir="$tmp/run-$1"
    mkdir -p "$dir/node" "$dir/primary"
    "$node_bin" --listen 127.0.0.1:0 --data-dir "$dir/node" --workers "$workers" \
        --admin-token "$admin" >"$dir/node.out" 2>"$dir/node.err" &
    pids+=($!)
    local node_pid=$! node_addr
    node_addr=$(listening "$dir/node.out" "$node_pid" fenec-node)
    "$shard_bin" --listen 127.0.0.1:0 --workers "$workers" --upstream-poll-us "$poll_us" \
        --directory "$dir/primary/shard.fenec" --token "$root" \
        --replication-token "$replication" >"$dir/primary.out" 2>"$dir/primary.err" &
    pids+=($!)
    local primary_pid=$!
    primary_addr=$(listening "$dir/primary.out" "$primary_pid" "fenec-shard (primary)")
    start_standby "$dir" standby
    local standby_pid=$started_pid standby_addr=$started_addr control_addr=""
    if ((control)); then
        start_standby "$dir" control
        control_addr=$started_addr
    fi
    log "run $run: fenec-node on $node_addr, primary on $primary_addr, standby on $standby_addr"

    rcurl -X PUT "http://$primary_addr/_shard/nodes/n1" \
        -d "{\"addr\":\"$node_addr\",\"token\":\"$admin\"}" >/dev/null
    rcurl -X PUT "http://$primary_addr/_shard/tenants/bench" \
        -d "{\"node\":\"n1\",\"schema\":[\"$schema\"]}" >/dev/null
    curl -sS --fail-with-body -X POST -H 'Content-Type: application/x-ndjson' \
        --data-binary @"$tmp/rows.ndjson" "http://$primary_addr/t/bench/batch" >/dev/null

    local addr answer
    for addr in $standby_addr $control_addr; do wait_for_tenant "$addr"; done
    for addr in "$node_addr" "$primary_addr" $standby_addr $control_addr; do
        answer=$(curl -sS --fail-with-body "http://$addr/t/bench/c/accounts/$rows")
        [[ "$answer" == *"\"aid\":$rows,"* ]] || { log "row by id from $addr: $answer"; exit 1; }
    done

    local routers=("primary=${primary_addr##*:}" "standby=${standby_addr##*:}")
    [[ -z "$control_addr" ]] || routers+=("control=${control_addr##*:}")
    local node_cpu primary_cpu standby_cpu load_before start out
    node_cpu=$(cpu_ms "$node_pid")
    primary_cpu=$(cpu_ms "$primary_pid")
    standby_cpu=$(cpu_ms "$standby_pid")
    load_before=$(cut -d' ' -f1 /proc/loadavg)
    start=$(date +%s.%N)
    out=$("$client" measure --rotate "$requests" "$warmup" /t/bench/c/accounts/%d "$rows" \
        node="${node_addr##*:}" "${routers[@]}")
    {
        echo "$out"
        echo "cpu $(($(cpu_ms "$node_pid") - node_cpu))" \
            "$(($(cpu_ms "$primary_pid") - primary_cpu))" \
            "$(($(cpu_ms "$standby_pid") - standby_cpu))" \
            "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
        echo "load $load_before $(cut -d' ' -f1 /proc/loadavg)"
    } >"$dir/result"
    stop_all 100  # SIGTERM, SIGKILL after 10 s
}

ratios=() node_p50=() primary_added=() standby_added=() controls=() met=0
{
    echo "make shard-bench ARGS=standby: a standby router's added latency on a row-by-id read"
    echo "beside its primary's, $runs runs"
    echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ); $(nproc) CPUs; $(uname -r)"
    echo "$node_bin and $shard_bin, --workers $workers each;"
    echo "both routers --upstream-poll-us $poll_us"
    echo "one keep-alive client, one connection per path, one request to each path in turn, each"
    paths="node, primary, standby"
    ((control == 0)) || paths+=", control"
    echo "round starting one path further along ($paths);"
    echo "$requests requests per path after $warmup of warm-up; $rows rows; p50 in microseconds;"
    echo "added = router p50 − node p50 in the same run;"
    echo "goal: standby added / primary added <= 1.05 in the same run"
    echo
    printf "%-3s %7s %7s %7s %9s %9s %6s %-7s %-22s %s\n" run node primary standby \
        "prim.add" "stby.add" ratio goal "CPU ms node/prim/stby" "load before/after"
} >"$tmp/report"
cat "$tmp/report"
for run in $(seq 1 "$runs"); do
    one_run "$run"
    declare -A r=()
    while read -r name fields; do
        case $name in
            cpu) read -r 'r[cpu_node]' 'r[cpu_primary]' 'r[cpu_standby]' 'r[cpu_s]' <<<"$fields" ;;
            load) r[load]=${fields/ //} ;;
            *) for kv in $fields; do r[$name/${kv%%=*}]=${kv#*=}; done ;;
        esac
    done <"$tmp/run-$run/result"
    pa=$(minus "${r[primary/p50_us]}" "${r[node/p50_us]}")
    sa=$(minus "${r[standby/p50_us]}" "${r[node/p50_us]}")
    q=$(ratio "$sa" "$pa")
    if [[ "$q" != - ]] && awk -v q="$q" 'BEGIN { exit !(q <= 1.05) }'; then
        verdict=MET
        met=$((met + 1))
    else
        verdict="NOT MET"
    fi
    ratios+=("$q") node_p50+=("${r[node/p50_us]}") primary_added+=("$pa") standby_added+=("$sa")
    printf "%-3s %7s %7s %7s %9s %9s %6s %-7s %-22s %s\n" "$run" \
        "${r[node/p50_us]}" "${r[primary/p50_us]}" "${r[standby/p50_us]}" "$pa" "$sa" "$q" \
        "$verdict" "${r[cpu_node]}/${r[cpu_primary]}/${r[cpu_standby]} (${r[cpu_s]} s)" \
        "${r[load]}" | tee -a "$tmp/report"
    if ((control)); then
        controls+=("$(ratio "$(minus "${r[control/p50_us]}" "${r[node/p50_us]}")" "$sa")")
    fi
    names=(node primary standby)
    ((control == 0)) || names+=(control)
    for p in "${names[@]}"; do
        echo "    $p p50 ${r[$p/p50_us]} p95 ${r[$p/p95_us]} p99 ${r[$p/p99_us]}" \
            "min ${r[$p/min_us]} n ${r[$p/n]}"
    done >>"$tmp/details"
    unset r
done
{
    echo
    echo "spread over $runs runs (min–max):"
    echo "  node p50:                      $(spread "${node_p50[@]}")"
    echo "  primary added p50:             $(spread "${primary_added[@]}")"
    echo "  standby added p50:             $(spread "${standby_added[@]}")"
    echo "  standby added / primary added: $(spread "${ratios[@]}")" \
        "  goal <= 1.05 met in $met of $runs runs"
    if ((control)); then
        echo "  control added / standby added: $(spread "${controls[@]}")" \
            "  (two standbys: the noise) per run: ${controls[*]}"
    fi
    echo
    echo "$(head -n 1 "$tmp/run-1/node.out" | awk '{print $1, $2}'),"\
        "$(head -n 1 "$tmp/run-1/primary.out" | awk '{print $1, $2}')"
    echo "each run's paths (µs):"
    awk '/^    node/ { printf "  run %d\n", ++n } { print }' "$tmp/details"
} | tee -a "$tmp/report"
mkdir -p "$(dirname "$report")"
cp "$tmp/report" "$report"
log "report written to $report"
