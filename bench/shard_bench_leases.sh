#!/usr/bin/env bash
# bench/shard_bench_leases.sh: how long a node cut off keeps its tenants from being written, with
# failover on leases (`make shard-bench ARGS=leases`).
#
# Setup per run: three fenec-nodes under --lease sharing one replication token, a fenec-shard
# under `--auto-failover L --replicas` in front of them, ten tenants on n1, each with a replica of
# its own on n2 or n3. A writer per tenant writes through the router without pause. Then n1 is
# cut off: SIGSTOPped, so it answers nothing and closes nothing, as a machine lost behind a
# network cut (these machines have no netem; a stopped process is the cut the kernel lets us
# make without a proxy).
#
# Measured per run: from the cut to each tenant's first write acknowledged after it (on its
# replica, necessarily: n1 answers nothing); the slowest tenant's is the run's figure. Four runs at a lease of
# 1 s and four at 5 s; reported as the spread (min–max) and as a ratio to the lease. Every write
# acknowledged is checked afterwards on the tenant's new primary: lost writes must be 0.
#
# Usage: bench/shard_bench_leases.sh <fenec-node> <fenec-shard> [report]
# Environment: LEASES_BENCH_RUNS (4), LEASES_BENCH_LEASES ("1 5"), LEASES_BENCH_TENANTS (10).
set -euo pipefail

node_bin=${1:?usage: shard_bench_leases.sh <fenec-node> <fenec-shard> [report]}
shard_bin=${2:?usage: shard_bench_leases.sh <fenec-node> <fenec-shard> [report]}
report=${3:-build/shard-bench-leases.txt}
runs=${LEASES_BENCH_RUNS:-4}
leases=${LEASES_BENCH_LEASES:-"1 5"}
tenants=${LEASES_BENCH_TENANTS:-10}
work=$(mktemp -d "${TMPDIR:-/tmp}/fenec-leases-bench.XXXXXX")
# shellcheck source=bench/shard_bench_lib.sh
source "$(dirname "$0")/shard_bench_lib.sh"  # pids, stop_all, now_ms, start_writer

trap 'stop_all; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# One run at lease $1 seconds, in this shell (so an interrupt stops what it started): writes
# "<slowest tenant ms> <lost writes>" to $work/result.
one_run() {
    local lease=$1 dir="$work/run-$RANDOM" i out url
    mkdir -p "$dir"
    local addrs=()
    for i in 1 2 3; do
        mkdir -p "$dir/n$i"
        out="$dir/n$i.out"
        "$node_bin" --listen 127.0.0.1:0 --data-dir "$dir/n$i" --node-name "n$i" \
            --admin-token admin --replication-token repl --lease >"$out" 2>"$dir/n$i.err" &
        pids+=($!)
        addrs+=("$(listening "$out" "${pids[-1]}" "fenec-node n$i")")
    done
    local n1_pid=${pids[0]}
    "$shard_bin" --listen 127.0.0.1:0 --directory "$dir/shard.fenec" --auto-failover "$lease" \
        --replicas >"$dir/router.out" 2>"$dir/router.err" &
    pids+=($!)
    url="http://$(listening "$dir/router.out" "${pids[-1]}" fenec-shard)"
    for i in 1 2 3; do
        curl -sf -o /dev/null -X PUT "$url/_shard/nodes/n$i" \
            -d "{\"addr\":\"${addrs[$((i - 1))]}\",\"token\":\"admin\",\"zone\":\"z$i\"}"
    done
    for i in $(seq 1 "$tenants"); do
        curl -sf -o /dev/null -X PUT "$url/_shard/tenants/t$i" \
            -d '{"node":"n1","schema":["create collection w (k text)"]}'
    done
    # A writer per tenant on one keep-alive connection (bench/shard_bench_lib.sh).
    local writers=()
    for i in $(seq 1 "$tenants"); do
        start_writer "$url" "t$i" "$dir/stop" "$dir/t$i.log"
        writers+=("$writer_pid")
    done
    # Writing on n1 for a moment, then the cut.
    for _ in $(seq 1 100); do
        [[ -s "$dir/t1.log" ]] && grep -q " 201 " "$dir/t$tenants.log" 2>/dev/null && break
        sleep 0.05
    done
    sleep 0.5
    local cut
    cut=$(now_ms)
    kill -STOP "$n1_pid"
    # Until every tenant has a write acknowledged after the cut (on its replica, necessarily).
    local deadline=$((cut + lease * 1000 * 4 + 5000))
    while (($(now_ms) < deadline)); do
        local all=1
        for i in $(seq 1 "$tenants"); do
            awk -v c="$cut" '$1 > c && $2 == 201 { f = 1 } END { exit !f }' "$dir/t$i.log" ||
                { all=0; break; }
        done
        ((all)) && break
        sleep 0.05
    done
    touch "$dir/stop"
    wait "${writers[@]}" 2>/dev/null || true
    kill -CONT "$n1_pid"
    # The slowest tenant's first write after the cut. Lost: acknowledged keys the tenant's new
    # primary does not hold (a writer's few thousand writes fit one page of 10 000).
    local slowest=0 lost=0 first held
    for i in $(seq 1 "$tenants"); do
        first=$(awk -v c="$cut" '$1 > c && $2 == 201 { print $1 - c; exit }' "$dir/t$i.log")
        ((first > slowest)) && slowest=$first
        held=$(curl -s "$url/t/t$i/c/w?limit=10000")
        while read -r _ st key _; do
            [[ "$st" == 201 ]] || continue
            [[ "$held" == *"\"$key\""* ]] || lost=$((lost + 1))
        done <"$dir/t$i.log"
    done
    echo "$slowest $lost" >"$work/result"
    stop_all
}

{
    echo "# make shard-bench ARGS=leases — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r)"
    echo "# $tenants tenants on n1 with replicas, a writer each through the router; n1 SIGSTOPped"
    echo "# lease_s run slowest_tenant_ms ratio_to_lease lost_writes"
} >"$report"
for lease in $leases; do
    figures=()
    for run in $(seq 1 "$runs"); do
        one_run "$lease"
        read -r slowest lost <"$work/result"
        ratio=$(awk -v s="$slowest" -v l="$lease" 'BEGIN { printf "%.2f", s / (l * 1000) }')
        echo "$lease $run $slowest $ratio $lost" | tee -a "$report"
        figures+=("$slowest")
    done
    sorted=$(printf '%s\n' "${figures[@]}" | sort -n)
    echo "# lease ${lease} s: slowest tenant writable again $(head -1 <<<"$sorted")–$(tail -1 <<<"$sorted") ms after the cut over $runs runs" | tee -a "$report"
done
