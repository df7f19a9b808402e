#!/usr/bin/env bash
# bench/node_bench.sh: fenec-node against PostgreSQL 15 on the same point reads, in one run.
#
# What it measures: the latency (p50, p99) and requests per second of reading one random row of
# 100 000 (pgbench's accounts table at scale 1: aid, bid, abalance, an 84-byte filler), at 1 and
# 8 connections:
#   fenec, row by id:    GET /t/bench/c/accounts/<random id>                  (wrk)
#   fenec, filtered get: POST /t/bench/query "get accounts where aid = $1"    (wrk; aid @unique)
#   PostgreSQL:          pgbench -S (SELECT abalance FROM pgbench_accounts WHERE aid = :aid; aid
#                        is the primary key), over TCP loopback as the node is
# and the ratios fenec/PostgreSQL, with the verdicts of the issue's goals: row-by-id p50 at most
# 0.5x PostgreSQL's (1 connection), row-by-id requests/s at least 2x PostgreSQL's (8 connections).
#
# The baseline is `pgbench -M prepared`: its statement is parsed and planned once per connection,
# then only bound and executed. That is the like of the node: a row by id parses no statement at
# all, and a filtered get's text is parsed once and then found in the node's statement cache
# (server/node/statement_cache.h), its value passed as a parameter. The simple protocol (a parse
# and a plan per query) is measured in the same run and printed as a second, labelled line; the
# goals are judged against prepared only.
#
# How: it starts a private PostgreSQL cluster (initdb in a temp dir owned by user postgres, a free
# port on 127.0.0.1, its unix socket in the temp dir), fills it with `pgbench -i -s 1`, and starts
# one fenec-node per worker count in NODE_BENCH_WORKERS (each with its own data dir, port 0, every
# plane open on loopback), creating tenant "bench" and inserting the same rows (_id = aid). Every
# measurement follows a warm-up of its own; runs are interleaved per connection count so a change in
# the machine's load touches both sides alike. wrk uses -t1 -c1 and -t2 -c8, pgbench -j1 -c1 and
# -j2 -c8: the load generators run on the same cores as the servers and take a share of them.
# pgbench's p50/p99 come from its per-transaction log (-l, microseconds).
# The CPU each side spends on a request is counted too (bench/cpu_lib.sh): the server's (the node's
# process; PostgreSQL's postmaster with its backends) and the load generator's (bash's `time` of
# wrk or pgbench), over the same timed run. With all of them on the same cores, req/s is bounded
# by the cores over their sum, so the report also says how much CPU a request may take for the
# 8-connection goal to be reachable on this machine, and how much the load generator alone took.
# Everything it started is stopped and its temp dir removed on exit, failure and signals included.
#
# Usage: bench/node_bench.sh <path/to/fenec-node> [report file, default build/node-bench.txt]
# Environment: NODE_BENCH_SECONDS (10), NODE_BENCH_WARMUP (3), NODE_BENCH_WORKERS ("1 2").
#
# `node_bench.sh image <fenec-node> [report]` runs bench/node_bench_image.sh instead: a tenant's file
# image moved between two nodes (make node-bench ARGS=image).
set -euo pipefail

if [[ "${1:-}" == image ]]; then
    shift
    exec bash "$(cd "$(dirname "$0")" && pwd)/node_bench_image.sh" "$@"
fi
if (($# < 1)); then
    echo "usage: $0 <fenec-node> [report file]" >&2
    exit 2
fi
node_bin=$(realpath "$1")
report=${2:-build/node-bench.txt}
seconds=${NODE_BENCH_SECONDS:-10}
warmup=${NODE_BENCH_WARMUP:-3}
read -r -a workers_list <<<"${NODE_BENCH_WORKERS:-1 2}"
here=$(cd "$(dirname "$0")" && pwd)
lua=$here/node_bench.lua
# shellcheck source=bench/cpu_lib.sh
source "$here/cpu_lib.sh"
pg_bin=/usr/lib/postgresql/15/bin
rows=100000  # pgbench -i -s 1
load_chunk=1000  # documents per insert statement; 10 statements per /batch request
connections=(1 8)

for tool in "$node_bin" "$pg_bin/initdb" "$pg_bin/pg_ctl" "$pg_bin/pgbench"; do
    [[ -x "$tool" ]] || { echo "node_bench: $tool is missing (run ci/setup-bench)" >&2; exit 1; }
done
for tool in wrk curl ss; do
    command -v "$tool" >/dev/null || { echo "node_bench: $tool is missing" >&2; exit 1; }
done

log() { echo "node_bench: $*" >&2; }

# ---- cleanup: whatever was started is stopped, also on failure and signals ----

tmp=$(mktemp -d /tmp/fenec-node-bench.XXXXXX)
pg_root=$tmp/pg
pg_started=0
node_pids=()
# PostgreSQL refuses to run as root: as root, its server runs as user postgres.
if ((EUID == 0)); then as_pg=(runuser -u postgres --); else as_pg=(); fi

cleanup() {
    local status=$? pid i
    trap - EXIT INT TERM
    for pid in "${node_pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || continue
        for ((i = 0; i < 150; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if ((pg_started)); then
        "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_root/data" -m fast -w -t 30 stop &>/dev/null ||
            "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_root/data" -m immediate -w stop &>/dev/null ||
            true
    fi
    if ((status != 0)); then
        log "failed (exit $status); logs follow"
        for f in "$tmp"/node-*.err "$pg_root/server.log"; do
            [[ -s "$f" ]] && { echo "== $f" >&2; tail -n 20 "$f" >&2; }
        done
    fi
    rm -rf -- "$tmp"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {  # a port nothing listens on (PostgreSQL needs one named; the node takes port 0)
    local port tries
    for ((tries = 0; tries < 100; tries++)); do
        port=$((20000 + RANDOM % 30000))
        [[ -z "$(ss -Htln "sport = :$port")" ]] && { echo "$port"; return 0; }
    done
    return 1
}

# ---- PostgreSQL ----

mkdir -p "$pg_root"
if ((EUID == 0)); then
    chmod 711 "$tmp"  # mktemp's 0700 would keep user postgres out of its own directory
    chown postgres: "$pg_root"
fi
pg_port=$(free_port)
log "PostgreSQL: initdb, port $pg_port"
(cd "$pg_root" && "${as_pg[@]}" "$pg_bin/initdb" -D "$pg_root/data" -U postgres -A trust -E UTF8 \
    --no-sync >"$pg_root/initdb.log" 2>&1) || { cat "$pg_root/initdb.log" >&2; exit 1; }
pg_started=1
(cd "$pg_root" && "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_root/data" -l "$pg_root/server.log" \
    -w -t 60 -o "-c port=$pg_port -c listen_addresses=127.0.0.1 \
    -c unix_socket_directories=$pg_root" start >/dev/null)
pg_conn=(-h 127.0.0.1 -p "$pg_port" -U postgres)
log "PostgreSQL: pgbench -i -s 1"
"$pg_bin/pgbench" "${pg_conn[@]}" -i -s 1 -q postgres >"$tmp/pgbench-init.log" 2>&1 ||
    { cat "$tmp/pgbench-init.log" >&2; exit 1; }
pg_version=$("$pg_bin/postgres" --version)
pg_pid=$(head -n 1 "$pg_root/data/postmaster.pid")

# ---- fenec-node, one per worker count ----

declare -A node_port node_pid
start_node() {  # workers
    local w=$1 dir=$tmp/node-$1 i port=""
    mkdir -p "$dir"
    : >"$tmp/node-$w.out"  # exists before the child's redirection does: the loop below reads it
    "$node_bin" --listen 127.0.0.1:0 --data-dir "$dir" --workers "$w" \
        >"$tmp/node-$w.out" 2>"$tmp/node-$w.err" &
    node_pids+=($!)
    for ((i = 0; i < 100; i++)); do
        port=$(sed -n '1s/.* listening=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/node-$w.out")
        [[ -n "$port" ]] && break
        kill -0 "${node_pids[-1]}" 2>/dev/null || { log "fenec-node exited at start"; exit 1; }
        sleep 0.1
    done
    [[ -n "$port" ]] || { log "fenec-node printed no listening= line in 10 s"; exit 1; }
    node_port[$w]=$port
    node_pid[$w]=${node_pids[-1]}
}

# The rows pgbench -i writes: bid = (aid - 1) / 100000 + 1, abalance 0, filler char(84) = blanks.
load_node() {  # port
    local port=$1 from body answer
    local schema='create collection accounts (aid int @unique, bid int, abalance int, filler text)'
    curl -sS --fail-with-body -X PUT -H 'Content-Type: application/json' \
        "http://127.0.0.1:$port/_admin/tenants/bench" -d "{\"schema\":[\"$schema\"]}" >/dev/null
    for ((from = 1; from <= rows; from += load_chunk * 10)); do
        body=$(awk -v from="$from" -v rows="$rows" -v chunk="$load_chunk" 'BEGIN {
            filler = sprintf("%84s", "")
            for (s = from; s < from + 10 * chunk && s <= rows; s += chunk) {
                line = "{\"query\":\"insert accounts $1\",\"params\":[["
                for (aid = s; aid < s + chunk && aid <= rows; aid++) {
                    line = line (aid > s ? "," : "") "{\"_id\":" aid ",\"aid\":" aid \
                        ",\"bid\":" (int((aid - 1) / 100000) + 1) ",\"abalance\":0,\"filler\":\"" \
                        filler "\"}"
                }
                print line "]]}"
            }
        }')
        curl -sS --fail-with-body -X POST -H 'Content-Type: application/x-ndjson' \
            --data-binary @- "http://127.0.0.1:$port/t/bench/batch" <<<"$body" >/dev/null
    done
    answer=$(curl -sS --fail-with-body -H 'Content-Type: application/json' \
        "http://127.0.0.1:$port/t/bench/query" \
        -d '{"query":"get accounts select count(*)"}')
    [[ "$answer" == *":$rows}"* ]] || { log "count after load: $answer"; exit 1; }
    # Both workloads answer 200 with the row before they are timed.
    answer=$(curl -sS --fail-with-body "http://127.0.0.1:$port/t/bench/c/accounts/$rows")
    [[ "$answer" == *"\"aid\":$rows,"* ]] || { log "row by id: $answer"; exit 1; }
    answer=$(curl -sS --fail-with-body -H 'Content-Type: application/json' \
        "http://127.0.0.1:$port/t/bench/query" \
        -d "{\"query\":\"get accounts where aid = \$1\",\"params\":[$rows]}")
    [[ "$answer" == *"\"aid\":$rows,"* ]] || { log "filtered get: $answer"; exit 1; }
}

for w in "${workers_list[@]}"; do
    start_node "$w"
    log "fenec-node --workers $w on port ${node_port[$w]}: loading $rows rows"
    load_node "${node_port[$w]}"
done
node_version=$(head -n 1 "$tmp/node-${workers_list[0]}.out" | awk '{print $1, $2}')

# ---- the runs ----

declare -A result  # key "<side>/<workload>/<workers or mode>/<connections>/<field>"

threads_for() { (($1 >= 8)) && echo 2 || echo 1; }

run_wrk() {  # workers mode connections
    local w=$1 mode=$2 c=$3 t line
    t=$(threads_for "$c")
    local url="http://127.0.0.1:${node_port[$w]}"
    NODE_BENCH_MODE=$mode NODE_BENCH_ROWS=$rows \
        wrk -t"$t" -c"$c" -d"${warmup}s" -s "$lua" "$url" >/dev/null
    local k=fenec/$mode/$w/$c server_ticks client TIMEFORMAT='%3U %3S'
    server_ticks=$(proc_ticks "${node_pid[$w]}")
    # wrk's own stderr apart from time's line, and shown should wrk fail.
    { time NODE_BENCH_MODE=$mode NODE_BENCH_ROWS=$rows \
        wrk -t"$t" -c"$c" -d"${seconds}s" -s "$lua" "$url" >"$tmp/wrk.out" 2>"$tmp/wrk.err"; } \
        2>"$tmp/wrk.time" || { cat "$tmp/wrk.err" >&2; exit 1; }
    server_ticks=$(($(proc_ticks "${node_pid[$w]}") - server_ticks))
    line=$(grep '^NODE_BENCH ' "$tmp/wrk.out")
    local field
    for field in p50_us p99_us rps requests non2xx socket_errors; do
        result[$k/$field]=$(sed -n "s/.* $field=\([0-9.]*\).*/\1/p" <<<"$line")
    done
    client=$(time_ticks "$tmp/wrk.time")
    result[$k/server_us]=$(us_per "$server_ticks" "${result[$k/requests]}")
    result[$k/client_us]=$(us_per "$client" "${result[$k/requests]}")
    log "fenec $mode workers=$w c=$c: ${line#NODE_BENCH } node_cpu_us=${result[$k/server_us]}" \
        "wrk_cpu_us=${result[$k/client_us]}"
    if [[ "${result[fenec/$mode/$w/$c/non2xx]}" != 0 ||
        "${result[fenec/$mode/$w/$c/socket_errors]}" != 0 ]]; then
        log "fenec $mode workers=$w c=$c had failures: $line"
        exit 1
    fi
}

run_pgbench() {  # protocol(simple|prepared) connections
    local m=$1 c=$2 j out prefix
    j=$(threads_for "$c")
    prefix=$tmp/pglog-$m-$c
    local children server_ticks client TIMEFORMAT='%3U %3S'
    children=$(child_count "$pg_pid")
    "$pg_bin/pgbench" "${pg_conn[@]}" -n -S -M "$m" -c "$c" -j "$j" -T "$warmup" postgres \
        >/dev/null 2>&1
    wait_children "$pg_pid" "$children"  # the warm-up's backends reaped before the count starts
    server_ticks=$(tree_ticks "$pg_pid")
    { time "$pg_bin/pgbench" "${pg_conn[@]}" -n -S -M "$m" -c "$c" -j "$j" -T "$seconds" \
        -l --log-prefix="$prefix" postgres >"$tmp/pgbench.out" 2>&1; } 2>"$tmp/pgbench.time" ||
        { cat "$tmp/pgbench.out" >&2; exit 1; }
    wait_children "$pg_pid" "$children"
    server_ticks=$(($(tree_ticks "$pg_pid") - server_ticks))
    out=$(<"$tmp/pgbench.out")
    client=$(time_ticks "$tmp/pgbench.time")
    result[pg/$m/$c/rps]=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' \
        <<<"$out" | awk '{printf "%.0f", $1}')
    result[pg/$m/$c/transactions]=$(sed -n \
        's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    # Per-transaction log: client, transaction, latency (us), script, epoch s, epoch us.
    read -r "result[pg/$m/$c/p50_us]" "result[pg/$m/$c/p99_us]" < <(
        cat "$prefix".* | awk '{print $3}' | sort -n | awk '{v[NR] = $1} END {
            p50 = int(NR * 0.50); if (p50 < NR * 0.50) p50++
            p99 = int(NR * 0.99); if (p99 < NR * 0.99) p99++
            print v[p50], v[p99]
        }')
    rm -f -- "$prefix".*
    result[pg/$m/$c/server_us]=$(us_per "$server_ticks" "${result[pg/$m/$c/transactions]}")
    result[pg/$m/$c/client_us]=$(us_per "$client" "${result[pg/$m/$c/transactions]}")
    log "pg -S $m c=$c: p50_us=${result[pg/$m/$c/p50_us]} p99_us=${result[pg/$m/$c/p99_us]}" \
        "rps=${result[pg/$m/$c/rps]} transactions=${result[pg/$m/$c/transactions]}" \
        "postgres_cpu_us=${result[pg/$m/$c/server_us]} pgbench_cpu_us=${result[pg/$m/$c/client_us]}"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for c in "${connections[@]}"; do
    run_pgbench prepared "$c"
    run_pgbench simple "$c"
    for w in "${workers_list[@]}"; do
        run_wrk "$w" id "$c"
        run_wrk "$w" filter "$c"
    done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the report ----

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
verdict() {  # value op(le|ge) bound
    awk -v v="$1" -v op="$2" -v b="$3" 'BEGIN {
        ok = (op == "le") ? (v <= b) : (v >= b); print ok ? "MET" : "NOT MET" }'
}

{
    echo "make node-bench: fenec-node against PostgreSQL 15 pgbench -S -M prepared, one run"
    echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ); $(nproc) CPUs; load average before $load_before," \
        "after $load_after"
    echo "$node_version (--sync always, loopback TCP); $pg_version (TCP 127.0.0.1, defaults)"
    echo "$rows rows (pgbench -i -s 1); ${seconds}s per measurement after a ${warmup}s warm-up;" \
        "wrk -t1 -c1 / -t2 -c8, pgbench -j1 -c1 / -j2 -c8,"
    echo "load generators on the same $(nproc) cores as the servers. Latencies in microseconds."
    echo "fenec answers the whole row (5 fields, 84-byte filler); pgbench -S one column."
    echo
    echo "PostgreSQL pgbench -S (SELECT abalance FROM pgbench_accounts WHERE aid = :aid);" \
        "the baseline is -M prepared"
    printf "%-22s %5s %8s %8s %10s\n" protocol conns p50 p99 req/s
    for m in prepared simple; do
        for c in "${connections[@]}"; do
            printf "%-22s %5s %8s %8s %10s\n" \
                "$([[ $m == prepared ]] && echo "prepared (baseline)" || echo "simple (information)")" \
                "$c" "${result[pg/$m/$c/p50_us]}" "${result[pg/$m/$c/p99_us]}" \
                "${result[pg/$m/$c/rps]}"
        done
    done
    echo
    echo "fenec-node; ratios are fenec/PostgreSQL prepared (p50 lower is better, req/s higher is" \
        "better), and in brackets against the simple protocol, for information"
    printf "%-12s %7s %5s %8s %8s %10s %17s %17s\n" workload workers conns p50 p99 req/s \
        "p50 ratio" "req/s ratio"
    for mode in id filter; do
        for w in "${workers_list[@]}"; do
            for c in "${connections[@]}"; do
                k=fenec/$mode/$w/$c
                printf "%-12s %7s %5s %8s %8s %10s %7s (%7s) %7s (%7s)\n" \
                    "$([[ $mode == id ]] && echo row-by-id || echo filtered)" "$w" "$c" \
                    "${result[$k/p50_us]}" "${result[$k/p99_us]}" "${result[$k/rps]}" \
                    "$(ratio "${result[$k/p50_us]}" "${result[pg/prepared/$c/p50_us]}")" \
                    "$(ratio "${result[$k/p50_us]}" "${result[pg/simple/$c/p50_us]}")" \
                    "$(ratio "${result[$k/rps]}" "${result[pg/prepared/$c/rps]}")" \
                    "$(ratio "${result[$k/rps]}" "${result[pg/simple/$c/rps]}")"
            done
        done
    done
    echo
    echo "CPU a request, microseconds (user + system over the timed run): the server's, its load" \
        "generator's, and both; busy = both"
    echo "at the run's rate as a share of the $(nproc) CPUs (the rest: the kernel's own threads, idle)"
    printf "%-28s %5s %8s %8s %8s %6s\n" side conns server client both busy
    cpu_row() {  # label conns server_us client_us rps
        awk -v l="$1" -v c="$2" -v s="$3" -v k="$4" -v r="$5" -v n="$(nproc)" 'BEGIN {
            if (s == "-" || k == "-" || s == "" || k == "") {  # a side not counted: no sum
                printf "%-28s %5s %8s %8s %8s %6s\n", l, c, s, k, "-", "-"; exit }
            printf "%-28s %5s %8s %8s %8.1f %5.0f%%\n", l, c, s, k, s + k, (s + k) * r / 1e6 / n * 100 }'
    }
    for c in "${connections[@]}"; do
        cpu_row "PostgreSQL prepared" "$c" "${result[pg/prepared/$c/server_us]}" \
            "${result[pg/prepared/$c/client_us]}" "${result[pg/prepared/$c/rps]}"
        for w in "${workers_list[@]}"; do
            k=fenec/id/$w/$c
            cpu_row "fenec row-by-id, workers $w" "$c" "${result[$k/server_us]}" \
                "${result[$k/client_us]}" "${result[$k/rps]}"
        done
    done
    awk -v n="$(nproc)" -v r="${result[pg/prepared/8/rps]:-0}" 'BEGIN {
        if (r <= 0) { print "At 8 connections: no PostgreSQL rate, no budget"; exit }
        printf "At 8 connections, 2x PostgreSQL'"'"'s req/s (%d) on %d CPUs leaves at most %.1f us of CPU a\n", 2 * r, n, n * 1e6 / (2 * r)
        print "request for the node and wrk together (less what the kernel threads take):" }'
    for w in "${workers_list[@]}"; do
        k=fenec/id/$w/8
        echo "  workers $w: the node took ${result[$k/server_us]}, wrk ${result[$k/client_us]}" \
            "(PostgreSQL took ${result[pg/prepared/8/server_us]}, pgbench ${result[pg/prepared/8/client_us]})"
    done
    echo
    echo "Goals (issue), against pgbench -M prepared: row-by-id p50 <= 0.5x PostgreSQL's at 1" \
        "connection; row-by-id req/s >= 2x PostgreSQL's at 8 connections"
    for w in "${workers_list[@]}"; do
        r1=$(ratio "${result[fenec/id/$w/1/p50_us]}" "${result[pg/prepared/1/p50_us]}")
        r8=$(ratio "${result[fenec/id/$w/8/rps]}" "${result[pg/prepared/8/rps]}")
        printf "  workers %s  p50 %5sx: %-8s  req/s %5sx: %s\n" "$w" \
            "$r1" "$(verdict "$r1" le 0.5)" "$r8" "$(verdict "$r8" ge 2)"
    done
    echo "For information, against the simple protocol (PostgreSQL parses and plans each query):"
    for w in "${workers_list[@]}"; do
        printf "  workers %s  p50 %5sx  req/s %5sx\n" "$w" \
            "$(ratio "${result[fenec/id/$w/1/p50_us]}" "${result[pg/simple/1/p50_us]}")" \
            "$(ratio "${result[fenec/id/$w/8/rps]}" "${result[pg/simple/8/rps]}")"
    done
} | tee "$tmp/report"
mkdir -p "$(dirname "$report")"
cp "$tmp/report" "$report"
log "report written to $report"
