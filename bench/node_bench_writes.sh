#!/usr/bin/env bash
# bench/node_bench_writes.sh: durable single-row writes, fenec-node against PostgreSQL 15 in one
# run, as `make node-bench ARGS=writes` runs it (issue 18 item 6).
#
# What it measures: writes per second and their p50/p99 at 8 and 64 connections, each write one
# row answered only once an fsync covers it:
#   fenec, 1 tenant:   POST /t/w00/c/items {"aid":n,"filler":"<84 blanks>"}      (wrk, --sync always)
#   fenec, 16 tenants: the same, each request to the next of w00..w15 in turn     (one node)
#   PostgreSQL:        INSERT INTO items (aid, filler) VALUES (:aid, '<84 blanks>') into
#                      items (id bigserial PRIMARY KEY, aid int, filler text), pgbench -M prepared,
#                      synchronous_commit = on and fsync = on (the defaults, set explicitly)
# and the ratios fenec/PostgreSQL with the issue's goal (>= 1.2x at both connection counts).
# PostgreSQL has one WAL for every table, so one baseline serves both fenec cases.
#
# How: a private PostgreSQL cluster (initdb in a temp dir on the same file system as the node's
# data dir, a free port on 127.0.0.1) and one fenec-node (port 0, its data dir beside it). Each
# measurement follows a warm-up of its own; NODE_BENCH_ROUNDS rounds, each running every side at
# every connection count in turn, so a change in the machine's load touches all sides alike; the
# report gives each round's ratio and their spread. wrk -t2 and pgbench -j2: the load generators
# run on the same cores as the servers. Each side's CPU a write is counted over its timed runs
# (bench/cpu_lib.sh): the server's (the node's process; PostgreSQL's postmaster with its backends)
# and the load generator's (bash's `time`), so the report says where a write's CPU goes and how
# busy the CPUs were. Everything started is stopped and the temp dir removed on exit, failure and
# signals included.
#
# NODE_BENCH_BEFORE=<another fenec-node> runs that binary too, as a second node measured in the
# same rounds ("before" in the report): a change's before and after beside one baseline. With
# NODE_BENCH_BEFORE_ARGS set, the before node takes those flags instead of NODE_BENCH_NODE_ARGS
# (the same binary under two settings: NODE_BENCH_BEFORE=<it> NODE_BENCH_BEFORE_ARGS="--sync-scope
# file" NODE_BENCH_NODE_ARGS="--sync-scope fs").
#
# Usage: bench/node_bench_writes.sh <path/to/fenec-node> [report, default build/node-bench-writes.txt]
# Environment: NODE_BENCH_SECONDS (8), NODE_BENCH_WARMUP (2), NODE_BENCH_ROUNDS (3),
#              NODE_BENCH_CONNECTIONS ("8 64"), NODE_BENCH_NODE_ARGS (extra fenec-node flags),
#              NODE_BENCH_BEFORE (unset), NODE_BENCH_BEFORE_ARGS (unset).
set -euo pipefail

if (($# < 1)); then
    echo "usage: $0 <fenec-node> [report file]" >&2
    exit 2
fi
node_bin=$(realpath "$1")
before_bin=${NODE_BENCH_BEFORE:+$(realpath "$NODE_BENCH_BEFORE")}
report=${2:-build/node-bench-writes.txt}
seconds=${NODE_BENCH_SECONDS:-8}
warmup=${NODE_BENCH_WARMUP:-2}
rounds=${NODE_BENCH_ROUNDS:-3}
read -r -a connections <<<"${NODE_BENCH_CONNECTIONS:-8 64}"
read -r -a node_args <<<"${NODE_BENCH_NODE_ARGS:-}"
read -r -a before_args <<<"${NODE_BENCH_BEFORE_ARGS-${NODE_BENCH_NODE_ARGS:-}}"
here=$(cd "$(dirname "$0")" && pwd)
lua=$here/node_bench_writes.lua
# shellcheck source=bench/cpu_lib.sh
source "$here/cpu_lib.sh"
pg_bin=/usr/lib/postgresql/15/bin
tenants_many=16
filler=$(printf '%84s' '')

for tool in "$node_bin" "$pg_bin/initdb" "$pg_bin/pg_ctl" "$pg_bin/pgbench" "$pg_bin/psql"; do
    [[ -x "$tool" ]] || { echo "node_bench_writes: $tool is missing (run ci/setup-bench)" >&2; exit 1; }
done
for tool in wrk curl ss; do
    command -v "$tool" >/dev/null || { echo "node_bench_writes: $tool is missing" >&2; exit 1; }
done

log() { echo "node_bench_writes: $*" >&2; }

# ---- cleanup: whatever was started is stopped, also on failure and signals ----

tmp=$(mktemp -d /tmp/fenec-writes-bench.XXXXXX)
pg_root=$tmp/pg
pg_started=0
node_pids=()
if ((EUID == 0)); then as_pg=(runuser -u postgres --); else as_pg=(); fi

cleanup() {
    local status=$? i pid
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

free_port() {
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
    chmod 711 "$tmp"
    chown postgres: "$pg_root"
fi
pg_port=$(free_port)
log "PostgreSQL: initdb, port $pg_port"
(cd "$pg_root" && "${as_pg[@]}" "$pg_bin/initdb" -D "$pg_root/data" -U postgres -A trust -E UTF8 \
    --no-sync >"$pg_root/initdb.log" 2>&1) || { cat "$pg_root/initdb.log" >&2; exit 1; }
pg_started=1
(cd "$pg_root" && "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_root/data" -l "$pg_root/server.log" \
    -w -t 60 -o "-c port=$pg_port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$pg_root \
    -c synchronous_commit=on -c fsync=on" start >/dev/null)
pg_conn=(-h 127.0.0.1 -p "$pg_port" -U postgres)
"$pg_bin/psql" "${pg_conn[@]}" -q -v ON_ERROR_STOP=1 postgres \
    -c 'CREATE TABLE items (id bigserial PRIMARY KEY, aid int NOT NULL, filler text NOT NULL)' \
    >/dev/null
pg_settings=$("$pg_bin/psql" "${pg_conn[@]}" -Atq postgres -c "SELECT string_agg(name || '=' ||
    setting, ' ' ORDER BY name) FROM pg_settings WHERE name IN ('synchronous_commit', 'fsync',
    'wal_sync_method', 'commit_delay', 'full_page_writes')")
printf '\\set aid random(1, 100000)\nINSERT INTO items (aid, filler) VALUES (:aid, '"'%s'"');\n' \
    "$filler" >"$tmp/insert.sql"
chmod 644 "$tmp/insert.sql"
pg_version=$("$pg_bin/postgres" --version)
pg_pid=$(head -n 1 "$pg_root/data/postmaster.pid")

# ---- fenec-node: "after" (the binary under test) and, with NODE_BENCH_BEFORE, "before" ----

declare -A url node_pid
start_node() {  # label binary
    local label=$1 bin=$2 dir=$tmp/node-$1 port="" i t name answer
    local -a args=("${node_args[@]}")
    [[ "$label" == before ]] && args=("${before_args[@]}")
    mkdir -p "$dir"
    : >"$dir.out"
    "$bin" --listen 127.0.0.1:0 --data-dir "$dir" --sync always "${args[@]}" \
        >"$dir.out" 2>"$tmp/node-$label.err" &
    node_pids+=($!)
    for ((i = 0; i < 100; i++)); do
        port=$(sed -n '1s/.* listening=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir.out")
        [[ -n "$port" ]] && break
        kill -0 "${node_pids[-1]}" 2>/dev/null || { log "fenec-node ($label) exited at start"; exit 1; }
        sleep 0.1
    done
    [[ -n "$port" ]] || { log "fenec-node ($label) printed no listening= line in 10 s"; exit 1; }
    url[$label]=http://127.0.0.1:$port
    node_pid[$label]=${node_pids[-1]}
    for ((t = 0; t < tenants_many; t++)); do
        name=$(printf 'w%02d' "$t")
        curl -sS --fail-with-body -X PUT -H 'Content-Type: application/json' \
            "${url[$label]}/_admin/tenants/$name" \
            -d '{"schema":["create collection items (aid int, filler text)"]}' >/dev/null
    done
    # The write answers 201 before anything is timed.
    answer=$(curl -sS --fail-with-body -H 'Content-Type: application/json' \
        "${url[$label]}/t/w00/c/items" -d "{\"aid\":1,\"filler\":\"$filler\"}")
    [[ "$answer" == *'"id'* ]] || { log "first write ($label): $answer"; exit 1; }
}

labels=()
if [[ -n "$before_bin" ]]; then
    start_node before "$before_bin"
    labels+=(before)
fi
start_node after "$node_bin"
labels+=(after)
node_version=$(head -n 1 "$tmp/node-after.out" | awk '{print $1, $2}')

# ---- the runs ----

declare -A result  # "<side>/<connections>/<round>/<field>"

threads_for() { (($1 >= 8)) && echo 2 || echo 1; }

run_wrk() {  # label tenants connections round
    local label=$1 n=$2 c=$3 r=$4 t line field k
    t=$(threads_for "$c")
    NODE_BENCH_TENANTS=$n wrk -t"$t" -c"$c" -d"${warmup}s" -s "$lua" "${url[$label]}" >/dev/null
    local server_ticks client TIMEFORMAT='%3U %3S'
    server_ticks=$(proc_ticks "${node_pid[$label]}")
    # wrk's own stderr apart from time's line, and shown should wrk fail.
    { time NODE_BENCH_TENANTS=$n wrk -t"$t" -c"$c" -d"${seconds}s" -s "$lua" "${url[$label]}" \
        >"$tmp/wrk.out" 2>"$tmp/wrk.err"; } 2>"$tmp/wrk.time" || { cat "$tmp/wrk.err" >&2; exit 1; }
    server_ticks=$(($(proc_ticks "${node_pid[$label]}") - server_ticks))
    line=$(grep '^NODE_BENCH ' "$tmp/wrk.out")
    k=$label$n/$c/$r
    for field in p50_us p99_us rps requests non2xx socket_errors; do
        result[$k/$field]=$(sed -n "s/.* $field=\([0-9.]*\).*/\1/p" <<<"$line")
    done
    client=$(time_ticks "$tmp/wrk.time")
    result[$k/server_us]=$(us_per "$server_ticks" "${result[$k/requests]}")
    result[$k/client_us]=$(us_per "$client" "${result[$k/requests]}")
    log "round $r $label tenants=$n c=$c: ${line#NODE_BENCH } node_cpu_us=${result[$k/server_us]}" \
        "wrk_cpu_us=${result[$k/client_us]}"
    if [[ "${result[$k/non2xx]}" != 0 || "${result[$k/socket_errors]}" != 0 ]]; then
        log "$label tenants=$n c=$c had failures: $line"
        exit 1
    fi
}

run_pgbench() {  # connections round
    local c=$1 r=$2 j out prefix k=pg/$1/$2
    j=$(threads_for "$c")
    prefix=$tmp/pglog-$c
    local children server_ticks client TIMEFORMAT='%3U %3S'
    children=$(child_count "$pg_pid")
    "$pg_bin/pgbench" "${pg_conn[@]}" -n -f "$tmp/insert.sql" -M prepared -c "$c" -j "$j" \
        -T "$warmup" postgres >/dev/null 2>&1
    wait_children "$pg_pid" "$children"  # the warm-up's backends reaped before the count starts
    server_ticks=$(tree_ticks "$pg_pid")
    { time "$pg_bin/pgbench" "${pg_conn[@]}" -n -f "$tmp/insert.sql" -M prepared -c "$c" -j "$j" \
        -T "$seconds" -l --log-prefix="$prefix" postgres >"$tmp/pgbench.out" 2>&1; } \
        2>"$tmp/pgbench.time" || { cat "$tmp/pgbench.out" >&2; exit 1; }
    wait_children "$pg_pid" "$children"
    server_ticks=$(($(tree_ticks "$pg_pid") - server_ticks))
    out=$(<"$tmp/pgbench.out")
    client=$(time_ticks "$tmp/pgbench.time")
    result[$k/rps]=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' \
        <<<"$out" | awk '{printf "%.0f", $1}')
    result[$k/requests]=$(sed -n \
        's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    result[$k/server_us]=$(us_per "$server_ticks" "${result[$k/requests]}")
    result[$k/client_us]=$(us_per "$client" "${result[$k/requests]}")
    read -r "result[$k/p50_us]" "result[$k/p99_us]" < <(
        cat "$prefix".* | awk '{print $3}' | sort -n | awk '{v[NR] = $1} END {
            p50 = int(NR * 0.50); if (p50 < NR * 0.50) p50++
            p99 = int(NR * 0.99); if (p99 < NR * 0.99) p99++
            print v[p50], v[p99]
        }')
    rm -f -- "$prefix".*
    log "round $r pg c=$c: p50_us=${result[$k/p50_us]} p99_us=${result[$k/p99_us]}" \
        "rps=${result[$k/rps]} postgres_cpu_us=${result[$k/server_us]}" \
        "pgbench_cpu_us=${result[$k/client_us]}"
}

sides=(pg)
for label in "${labels[@]}"; do sides+=("${label}1" "$label$tenants_many"); done
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= rounds; r++)); do
    for c in "${connections[@]}"; do
        run_pgbench "$c" "$r"
        for label in "${labels[@]}"; do
            run_wrk "$label" 1 "$c" "$r"
            run_wrk "$label" "$tenants_many" "$c" "$r"
        done
    done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
rows_pg=$("$pg_bin/psql" "${pg_conn[@]}" -Atq postgres -c 'SELECT count(*) FROM items')

# ---- the report ----

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
side_name() {  # pg | <label><tenants>: "PostgreSQL", "fenec 16t", "before 1t"
    case $1 in
        pg) echo PostgreSQL ;;
        after*) echo "fenec ${1#after}t" ;;
        before*) echo "before ${1#before}t" ;;
    esac
}
span() {  # values...: "min-max"
    printf '%s\n' "$@" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {
        if (lo == hi) print lo; else print lo "-" hi }'
}

{
    echo "make node-bench ARGS=writes: durable single-row inserts, fenec-node against PostgreSQL 15"
    echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ); $(nproc) CPUs; load average before $load_before," \
        "after $load_after"
    echo "$node_version (--sync always ${node_args[*]}, loopback TCP); $pg_version ($pg_settings)"
    [[ -n "$before_bin" ]] && echo "fenec: $node_bin; before: $before_bin (flags: ${before_args[*]})"
    echo "$rounds rounds of ${seconds}s per measurement after a ${warmup}s warm-up; wrk -t2," \
        "pgbench -M prepared -j2; $rows_pg rows in PostgreSQL at the end. Latencies in us."
    echo
    echo "CPU a write in us (user + system over the timed run): the server's (the node; PostgreSQL's"
    echo "postmaster and backends) and the load generator's (wrk; pgbench); busy = both at the run's"
    echo "rate as a share of the $(nproc) CPUs (a lower bound: the kernel threads that carry an"
    echo "fsync's work, and interrupts, are counted to no process here)"
    printf "%-14s %5s %6s %8s %8s %8s %12s %7s %7s %5s\n" side conns round p50 p99 writes/s \
        "x PostgreSQL" server client busy
    for c in "${connections[@]}"; do
        for ((r = 1; r <= rounds; r++)); do
            for s in "${sides[@]}"; do
                k=$s/$c/$r
                printf "%-14s %5s %6s %8s %8s %8s %12s %7s %7s %4s%%\n" \
                    "$(side_name "$s")" "$c" "$r" \
                    "${result[$k/p50_us]}" "${result[$k/p99_us]}" "${result[$k/rps]}" \
                    "$([[ $s == pg ]] && echo "" || ratio "${result[$k/rps]}" "${result[pg/$c/$r/rps]}")" \
                    "${result[$k/server_us]}" "${result[$k/client_us]}" \
                    "$(awk -v a="${result[$k/server_us]}" -v b="${result[$k/client_us]}" \
                        -v r="${result[$k/rps]}" -v n="$(nproc)" \
                        'BEGIN { if (a == "-" || b == "-") print "-"; else printf "%.0f", (a + b) * r / 1e6 / n * 100 }')"
            done
        done
    done
    echo
    echo "Spread over the rounds (min-max of each round's writes/s, and of its ratio to the same" \
        "round's PostgreSQL); goal >= 1.2x at every connection count"
    for c in "${connections[@]}"; do
        for s in "${sides[@]}"; do
            rps=() ratios=()
            for ((r = 1; r <= rounds; r++)); do
                rps+=("${result[$s/$c/$r/rps]}")
                ratios+=("$(ratio "${result[$s/$c/$r/rps]}" "${result[pg/$c/$r/rps]}")")
            done
            if [[ $s == pg ]]; then
                printf "  c=%-3s %-14s %14s writes/s\n" "$c" PostgreSQL "$(span "${rps[@]}")"
            else
                lo=$(span "${ratios[@]}" | cut -d- -f1)
                printf "  c=%-3s %-14s %14s writes/s  %11sx  %s\n" "$c" "$(side_name "$s")" \
                    "$(span "${rps[@]}")" "$(span "${ratios[@]}")" \
                    "$(awk -v v="$lo" 'BEGIN { print (v >= 1.2) ? "MET" : "NOT MET" }')"
            fi
        done
    done
} | tee "$tmp/report"
mkdir -p "$(dirname "$report")"
cp "$tmp/report" "$report"
log "report written to $report"
