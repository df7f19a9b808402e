#!/usr/bin/env bash
# bench/node_bench_tenants.sh: many small tenants on one node (make node-bench ARGS=tenants; issue
# 18 items 1 and 7).
#
# What it measures, per kind of tenant, on one fenec-node run with the machine's descriptor limit
# as it is (the node raises its soft limit to the hard one, nothing more) and --max-memory set:
#   1. create: `tenants` tenants (100 000) t0..tN-1, each created (PUT /_admin/tenants/<t>, its
#      schema) and written once (POST /t/<t>/query, one insert), over `connections` (4) kept
#      connections (bench/tenants_client.cc). Then the node's RSS (VmRSS, and VmHWM: its peak, of
#      /proc/<pid>/status), its own account of the open tenants' memory (fenec_memory_bytes),
#      tenants open, the descriptor budget (fenec_tenants_open_max) and closes by reason.
#   2. read: the node stopped (SIGTERM: every tenant closed, checkpointed) and started again on the
#      same data directory, so every tenant is closed; then, on one kept connection, GET
#      /t/<t>/c/docs/1 of every tenant once in a random order (pass 1: each the first open since
#      the restart), and again pass 1's order less its last fenec_tenants_open_max tenants (the
#      most it can have left open), reshuffled (pass 2: each closed by this process, by the
#      descriptor budget or --close-idle). Every such read had to open its tenant (cold), which
#      the node's fenec_tenant_opens_total confirms (its rise over a pass is printed beside the
#      count of reads). Each cold read is followed at once by the same read again, the tenant now
#      open (warm): the baseline in the same run, and the cold/warm ratio. Then RSS, VmHWM,
#      tenants open, closes by reason.
# Kinds (BENCH_TENANTS_KINDS, "plain vectors"):
#   plain:   `create collection docs (title text, n int)`, one row;
#   vectors: `create collection docs (title text, v vector<64> @hnsw)`, ten rows (issue 18 item 7,
#            bench/node_bench_small_vectors.sh's shape): BENCH_TENANTS_VECTOR_TENANTS of them
#            (10 000: a 100 000 run of each kind takes over an hour on a loaded 2-CPU machine).
# Every status other than 2xx is counted and printed ("0": a connection that failed). The goals
# (issue 18 item 1): 100 000 tenants within 1.6 GB of RSS, cold read p99 <= 5 ms.
#
# Usage: bench/node_bench_tenants.sh <fenec-node> [report file]
# Environment: BENCH_TENANTS (100000), BENCH_TENANTS_CONNECTIONS (4), BENCH_TENANTS_MEMORY_MIB
# (1024: --max-memory), BENCH_TENANTS_KINDS ("plain vectors"), BENCH_TENANTS_VECTOR_TENANTS,
# BENCH_TENANTS_SEED (18).
set -euo pipefail

if (($# < 1)); then
    echo "usage: $0 <fenec-node> [report file]" >&2
    exit 2
fi
node_bin=$(realpath "$1")
report=${2:-build/node-bench-tenants.txt}
tenants=${BENCH_TENANTS:-100000}
connections=${BENCH_TENANTS_CONNECTIONS:-4}
memory_mib=${BENCH_TENANTS_MEMORY_MIB:-1024}
read -r -a kinds <<<"${BENCH_TENANTS_KINDS:-plain vectors}"
vector_tenants=${BENCH_TENANTS_VECTOR_TENANTS:-10000}
seed=${BENCH_TENANTS_SEED:-18}
here=$(cd "$(dirname "$0")" && pwd)

command -v curl >/dev/null || { echo "node_bench_tenants: curl is missing" >&2; exit 1; }
log() { echo "node_bench_tenants: $*" >&2; }

tmp=$(mktemp -d /tmp/fenec-tenants.XXXXXX)
node_pid=""
stop_node() {
    local i
    [[ -n "$node_pid" ]] || return 0
    kill -TERM "$node_pid" 2>/dev/null || true
    for ((i = 0; i < 1200; i++)); do kill -0 "$node_pid" 2>/dev/null || break; sleep 0.1; done
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

client=$tmp/tenants_client
"${CXX:-c++}" -O2 -std=c++20 -pthread -o "$client" "$here/tenants_client.cc"

port=""
start_node() {  # data dir (kept)
    local i
    mkdir -p -m 700 "$1"
    : >"$tmp/node.out"
    "$node_bin" --listen 127.0.0.1:0 --data-dir "$1" --workers 2 --max-memory "$memory_mib" \
        >"$tmp/node.out" 2>>"$tmp/node.err" &
    node_pid=$!
    port=""
    for ((i = 0; i < 600; i++)); do
        port=$(sed -n '1s/.* listening=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/node.out")
        [[ -n "$port" ]] && break
        kill -0 "$node_pid" 2>/dev/null || { log "fenec-node exited at start"; exit 1; }
        sleep 0.1
    done
    [[ -n "$port" ]] || { log "fenec-node printed no listening= line in 60 s"; exit 1; }
}

status_kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$node_pid/status"; }
metrics() { curl -sS --fail-with-body "http://127.0.0.1:$port/_metrics" >"$tmp/metrics"; }
metric() { awk -v k="$1" '$1 == k {print $2; exit}' "$tmp/metrics"; }
closes() {
    awk '/^fenec_tenant_closes_total\{/ {
        r = $1; sub(/.*reason="/, "", r); sub(/".*/, "", r); s = s " " r "=" $2 }
        END {print (s == "" ? " none" : s)}' "$tmp/metrics"
}
mib() { awk -v k="$1" 'BEGIN {printf "%.0f", k / 1024}'; }

# The rows: plain one short row; vectors ten rows of vector<64> (a fixed seed, as the small-vectors
# bench writes them).
printf '{"schema":["create collection docs (title text, n int)"]}' >"$tmp/schema-plain.json"
printf '{"query":"insert docs $1","params":[{"_id":1,"title":"the first row","n":1}]}' \
    >"$tmp/write-plain.json"
printf '{"schema":["create collection docs (title text, v vector<64> @hnsw)"]}' \
    >"$tmp/schema-vectors.json"
awk 'BEGIN {
    srand(7)
    line = "{\"query\":\"insert docs $1\",\"params\":[["
    for (id = 1; id <= 10; id++) {
        v = sprintf("%.4f", rand() + 0.0001)
        for (d = 1; d < 64; d++) v = v "," sprintf("%.4f", rand() - 0.5)
        line = line (id > 1 ? "," : "") "{\"_id\":" id ",\"title\":\"doc " id "\",\"v\":[" v "]}"
    }
    print line "]]}"
}' >"$tmp/write-vectors.json"

read_pass() {  # kind tenants title [left out]
    local opens_before opens
    metrics
    opens_before=$(metric fenec_tenant_opens_total)
    log "$1: $3"
    "$client" read "$port" "$2" "$seed" "/t/%s/c/docs/1" $4 >"$tmp/read.out"
    metrics
    opens=$(awk -v a="$(metric fenec_tenant_opens_total)" -v b="$opens_before" 'BEGIN {print a - b}')
    out "read, $3 (cold: a tenant's first read; warm: the same read at once after):"
    sed 's/^/  /' "$tmp/read.out" | tee -a "$tmp/report" >&2
    awk '$1 == "cold" || $1 == "warm" {
             for (i = 2; i <= NF; i++) {split($i, kv, "="); v[$1, kv[1]] = kv[2]}}
         END {if (v["warm", "p50_us"] > 0)
                  printf "  cold/warm: p50 %.1fx, p99 %.1fx; tenants opened: %s\n",
                         v["cold", "p50_us"] / v["warm", "p50_us"],
                         v["cold", "p99_us"] / v["warm", "p99_us"], opens}' opens="$opens" \
        "$tmp/read.out" | tee -a "$tmp/report" >&2
    out "  closes so far$(closes)"
}

mkdir -p "$(dirname "$report")"
: >"$tmp/report"
out() { echo "$*" | tee -a "$tmp/report" >&2; }

out "# node-bench tenants: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r)," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
out "# descriptors: soft $(ulimit -Sn), hard $(ulimit -Hn) (the node raises its soft limit to the" \
    "hard one); --max-memory $memory_mib MiB, --close-idle 300 (default), --workers 2"

for kind in "${kinds[@]}"; do
    n=$tenants
    [[ "$kind" == vectors ]] && n=$vector_tenants
    data=$tmp/data-$kind
    rm -rf -- "$data"
    : >"$tmp/node.err"
    start_node "$data"
    before=$(status_kib VmRSS)
    log "$kind: creating and writing $n tenants on port $port"
    "$client" create "$port" "$n" "$connections" "$tmp/schema-$kind.json" "$tmp/write-$kind.json" \
        >"$tmp/create.out"
    metrics
    out ""
    out "## $kind: $n tenants ($(sed 's/.*\["\(.*\)"\].*/\1/' "$tmp/schema-$kind.json"))"
    out "create+write: $(tr '\n' ' ' <"$tmp/create.out")"
    out "  RSS $(mib "$(status_kib VmRSS)") MiB (peak $(mib "$(status_kib VmHWM)") MiB, $(mib "$before") MiB" \
        "before the first create); accounted $(awk -v b="$(metric fenec_memory_bytes)" \
        'BEGIN {printf "%.0f", b / 1048576}') MiB; open $(metric fenec_tenants_open) of budget" \
        "$(metric fenec_tenants_open_max); opens $(metric fenec_tenant_opens_total); closes$(closes)"
    grep -h 'descriptors' "$tmp/node.err" | head -n 1 | sed 's/^/  node: /' | tee -a "$tmp/report" >&2 || true
    out "  data dir $(du -sm "$data" | cut -f1) MiB, $(find "$data" -name '*.fenec' | wc -l) tenant files"
    open_max=$(metric fenec_tenants_open_max)
    t0=$(date +%s.%N)
    stop_node
    t1=$(date +%s.%N)
    start_node "$data"
    t2=$(date +%s.%N)
    metrics
    out "restart: stop $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s, start" \
        "$(awk -v a="$t1" -v b="$t2" 'BEGIN {printf "%.1f", b - a}') s; RSS $(mib "$(status_kib VmRSS)") MiB," \
        "open $(metric fenec_tenants_open) before the reads"
    # Pass 1: every tenant, each the first open since the restart. Pass 2: pass 1's order less
    # its last open_max (the most a read could have left open), shuffled: each again closed, now
    # by this process (the descriptor budget or --close-idle), and read cold again.
    read_pass "$kind" "$n" "pass 1, every tenant once in random order after the restart" ""
    read_pass "$kind" "$n" "pass 2, pass 1's order less its last $open_max (the budget), reshuffled" \
        "$open_max"
    out "  RSS $(mib "$(status_kib VmRSS)") MiB (peak $(mib "$(status_kib VmHWM)") MiB); accounted" \
        "$(awk -v b="$(metric fenec_memory_bytes)" 'BEGIN {printf "%.0f", b / 1048576}') MiB; open" \
        "$(metric fenec_tenants_open); closes$(closes)"
    stop_node
    rm -rf -- "$data"
done
out ""
out "# load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; goals: $tenants tenants within 1.6 GB RSS," \
    "cold read p99 <= 5 ms"
cp "$tmp/report" "$report"
