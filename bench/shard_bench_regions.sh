#!/usr/bin/env bash
# bench/shard_bench_regions.sh: a region keeping its own directory (router.md §17 `ARGS=regions`,
# §11.6, §11.10), as `make shard-bench ARGS=regions` runs it. Two parts, fresh processes each run.
#
# 1. The relay. The global router G (no --region) and us's router U (`--region us --global`),
#    both with one --token (the relay mark's key) and the flags `make shard-bench` gives its
#    router (--workers SHARD_BENCH_WORKERS, --upstream-poll-us SHARD_BENCH_UPSTREAM_POLL_US); one
#    fenec-node us1 recorded on U; HAProxy in TCP mode standing for the link between the regions
#    both ways (G → U, the address G's `regions` row names; U → G, where U follows the global
#    directory). The tenant `bench` is created through U in two levels (G takes its name, home
#    `@us`; U places it on us1) with SHARD_BENCH_ROWS rows. A second global router Gd, the same
#    flags, whose `regions` row names U itself (no proxy between): `bench`'s home written into its
#    directory with `fenec shell` while it is stopped, Gd started again on its port (U follows G,
#    not Gd). Measured per run: p50/p95/p99 of a row-by-id read (GET /t/bench/c/accounts/<id>)
#    from one keep-alive client straight to the node, to U, to U through the link's proxy (the
#    proxy's hop alone, the control), to G (relayed to U over the link) and to Gd (relayed to U
#    on loopback), one request to each in turn, each round starting one place further along
#    (bench/latency_client.cc `measure --rotate`); reported: each path's p50, U's added p50 over
#    the node's, the relay's (G's p50 less U's) split into G's forward (G's p50 less the link
#    path's) and the proxy's hop (the link path's less U's), and the relay without the proxy
#    (Gd's p50 less U's), REGIONS_BENCH_RUNS runs and the spread. Seed 002's reference: the relay
#    32–42 µs p50, a router's 24 and the proxy's 8–18. Two floors in the same rotation: a loopback
#    round trip (`latency_client echo`, an answer of the row's size at once: the goal's unit, one
#    round trip added per relay) and a hop in front of U (`latency_client hop`: a blocking thread
#    passing bytes, no work; its p50 less U's is what any proxy whose thread sleeps for the
#    request and for the answer adds). REGIONS_BENCH_COMPARE=<another fenec-shard> starts a third
#    global router Gc from that binary, relaying to U straight like Gd, asked in the same
#    rotation (relay.cmp: Gc's p50 less U's): a before and an after under one load.
#    REGIONS_BENCH_CUT_RUNS=0 runs this part alone.
#
# 2. A partition. The link's proxy is not running throughout (U's --global names its port, where
#    nothing listens, and G is not started: nothing of the global level is reached). Three nodes
#    under --lease recorded on U, which runs `--auto-failover L --replicas`; us1 reached by U
#    through a HAProxy of its own (its replicas follow it there too: it is us1's link); ten
#    tenants on us1 with replicas on us2 or us3; a writer per tenant through U, and one writer
#    straight to us1 (a client of us1's own, cycling the tenants). Then us1 is cut off: its
#    HAProxy SIGSTOPped, so U's grants, U's forwards and the replicas' feeds over it hang, as in a
#    network cut, while us1 goes on answering its own client. Measured per run: cut → the last
#    write us1 acknowledged to its own client (it stops as its lease lapses: 503 `Fenec-Lease`);
#    cut → the slowest tenant's first acknowledged write sent after the cut (through U, on its
#    replica); writes lost: acknowledged through U and missing from the tenant's primary
#    afterwards (must be 0), and, counted apart, those us1 acknowledged to its own client after
#    the cut and never sent its replicas (lost as a crash takes them, router.md §9.4).
#    REGIONS_BENCH_CUT_RUNS runs at each lease of REGIONS_BENCH_LEASES. Seed 002's reference:
#    0.38–0.63 s and 1.41–1.70 s at 1 s; 3.9–4.1 s and 5.5–6.7 s at 5 s.
#
# Everything it started is stopped on exit, failure and signals.
#
# Usage: bench/shard_bench_regions.sh <fenec-node> <fenec-shard> <fenec> [report, default
#        build/shard-bench-regions.txt]
# Environment: REGIONS_BENCH_RUNS (5), REGIONS_BENCH_CUT_RUNS (10), REGIONS_BENCH_LEASES ("1 5"),
#              REGIONS_BENCH_TENANTS (10), SHARD_BENCH_REQUESTS (5000), SHARD_BENCH_WARMUP (500),
#              SHARD_BENCH_ROWS (1000), SHARD_BENCH_WORKERS (1), SHARD_BENCH_UPSTREAM_POLL_US (50),
#              REGIONS_BENCH_PROXY_POLL (0: the link's HAProxy without busy-polling),
#              REGIONS_BENCH_COMPARE (unset), CXX (c++).
set -euo pipefail

if (($# < 3)); then
    echo "usage: $0 <fenec-node> <fenec-shard> <fenec> [report file]" >&2
    exit 2
fi
node_bin=$(realpath "$1")
shard_bin=$(realpath "$2")
fenec_bin=$(realpath "$3")
report=${4:-build/shard-bench-regions.txt}
runs=${REGIONS_BENCH_RUNS:-5}
cut_runs=${REGIONS_BENCH_CUT_RUNS:-10}
leases=${REGIONS_BENCH_LEASES:-"1 5"}
tenants=${REGIONS_BENCH_TENANTS:-10}
requests=${SHARD_BENCH_REQUESTS:-5000}
warmup=${SHARD_BENCH_WARMUP:-500}
rows=${SHARD_BENCH_ROWS:-1000}
workers=${SHARD_BENCH_WORKERS:-1}
poll_us=${SHARD_BENCH_UPSTREAM_POLL_US:-50}
# The proxies stand for the network, not for a proxy measured against the router: they do not
# busy-poll (a HAProxy busy-polling spins a whole CPU, one of the two these machines have).
proxy_poll=${REGIONS_BENCH_PROXY_POLL:-0}
compare_bin=${REGIONS_BENCH_COMPARE:+$(realpath "$REGIONS_BENCH_COMPARE")}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/shard_bench_lib.sh
source "$here/shard_bench_lib.sh"

log() { echo "shard_bench_regions: $*" >&2; }

for v in runs cut_runs tenants requests warmup rows workers poll_us proxy_poll; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || { log "$v=${!v} is not a number"; exit 2; }
done
for tool in "$node_bin" "$shard_bin" "$fenec_bin" ${compare_bin:+"$compare_bin"}; do
    [[ -x "$tool" ]] || { log "$tool is missing"; exit 1; }
done
for tool in curl haproxy python3 ss "${CXX:-c++}"; do
    command -v "$tool" >/dev/null || { log "$tool is missing (ci/setup, ci/setup-bench)"; exit 1; }
done

tmp=$(mktemp -d /tmp/fenec-shard-regions.XXXXXX)
cleanup() {
    local status=$? f
    trap - EXIT INT TERM
    stop_all
    if ((status != 0)); then
        log "failed (exit $status); logs follow"
        for f in "$tmp"/*/*.err; do
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
replication=bench-replication-token
rcurl() { curl -sS --fail-with-body -H "Authorization: Bearer $root" "$@"; }

# Starts a binary printing `listening=<addr>` first, as `name` in `dir`; sets started_pid and
# started_port. Not to be run in a $(…) subshell: the pid must reach `pids` here.
start_in() {  # dir name binary args...
    local dir=$1 name=$2 addr
    shift 2
    "$@" >"$dir/$name.out" 2>"$dir/$name.err" &
    pids+=($!)
    started_pid=$!
    addr=$(listening "$dir/$name.out" "$started_pid" "$name")
    started_port=${addr##*:}
}

# HAProxy in TCP mode, one frontend a "listen-port:target-port" pair; sets started_pid. Waits
# until every frontend listens.
start_tcp_proxy() {  # dir name pair...
    local dir=$1 name=$2 pair i poll
    shift 2
    if ((proxy_poll)); then poll=busy-polling; else poll="no busy-polling"; fi
    {
        printf 'global\n    nbthread 1\n    maxconn 1024\n    %s\n' "$poll"
        printf 'defaults\n    mode tcp\n    timeout connect 5s\n'
        printf '    timeout client 1h\n    timeout server 1h\n'
        for pair in "$@"; do
            printf 'listen p%s\n    bind 127.0.0.1:%s\n    server s 127.0.0.1:%s\n' \
                "${pair%%:*}" "${pair%%:*}" "${pair##*:}"
        done
    } >"$dir/$name.cfg"
    haproxy -db -f "$dir/$name.cfg" >"$dir/$name.out" 2>"$dir/$name.err" &
    pids+=($!)
    started_pid=$!
    for pair in "$@"; do
        for ((i = 0; i < 100; i++)); do
            [[ -n "$(ss -Htln "sport = :${pair%%:*}")" ]] && break
            kill -0 "$started_pid" 2>/dev/null || { log "$name (HAProxy) exited"; exit 1; }
            sleep 0.05
        done
        ((i < 100)) || { log "$name (HAProxy) does not listen on ${pair%%:*}"; exit 1; }
    done
}

# us's router: its directory in `dir`, following the global directory at `global_port`.
start_us_router() {  # dir global_port more flags...
    local dir=$1 global_port=$2
    shift 2
    start_in "$dir" us "$shard_bin" --listen 127.0.0.1:0 --workers "$workers" \
        --upstream-poll-us "$poll_us" --directory "$dir/us.fenec" --token "$root" \
        --region us --global "http://127.0.0.1:$global_port" --replication-token "$replication" \
        "$@"
}

# ---- 1. the relay ----

client=$tmp/latency_client
"${CXX:-c++}" -O2 -std=c++20 -pthread -o "$client" "$here/latency_client.cc"
schema='create collection accounts (aid int @unique, bid int, abalance int, filler text)'
accounts_batch "$rows" >"$tmp/rows.ndjson"

# A global router named `name` on `port`: its directory `dir/name.fenec`; the binary
# `binary`, fenec-shard's by default.
start_global() {  # dir name port [binary]
    start_in "$1" "$2" "${4:-$shard_bin}" --listen "127.0.0.1:$3" --workers "$workers" \
        --upstream-poll-us "$poll_us" --directory "$1/$2.fenec" --token "$root" \
        --replication-token "$replication"
}

# The CPU time (user + system) a process has used so far, in ns: fields 14 and 15 of
# /proc/<pid>/stat, counted after the `(comm)` field, which may hold spaces. They count threads
# that have exited (the hop's, one a connection), in ticks of 1/CLK_TCK s.
cpu_ns() {  # pid
    local stat
    stat=$(<"/proc/$1/stat")
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.0f", ($12 + $13) * 1e9 / hz }' <<<"${stat##*) }"
}

# `latency_client <kind> <port file> <arg>` in `dir`; sets started_pid and started_port.
start_floor() {  # dir kind arg
    local dir=$1 kind=$2 i
    "$client" "$kind" "$dir/$kind.port" "$3" 2>"$dir/$kind.err" &
    pids+=($!)
    started_pid=$!
    for ((i = 0; i < 100; i++)); do
        [[ -s "$dir/$kind.port" ]] && break
        kill -0 "$started_pid" 2>/dev/null || { log "latency_client $kind exited"; exit 1; }
        sleep 0.05
    done
    ((i < 100)) || { log "latency_client $kind wrote no port"; exit 1; }
    started_port=$(cat "$dir/$kind.port")
}

# The global router `name` (pid `pid`, on `port`) given a `regions` row sending us's tenants to
# `router` (a URL, which must answer), and `bench` at home `@us` in its directory: written while
# it is stopped (two-level creates are not built yet), then started again on its port.
home_in_global() {  # dir name port pid router [binary]
    local dir=$1 name=$2 port=$3 pid=$4 router=$5 binary=${6:-}
    rcurl -X PUT "http://127.0.0.1:$port/_shard/regions/us" -d "{\"routers\":[\"$router\"]}" \
        >/dev/null
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
    "$fenec_bin" shell "$dir/$name.fenec" \
        -c 'insert tenants {name: "bench", node: "@us", state: "active"}' >/dev/null
    start_global "$dir" "$name" "$port" "$binary"
}

# One run of part 1, in this shell; writes the client's lines to $dir/result.
relay_run() {
    local run=$1 dir="$tmp/relay-$1" g_port gd_port gd_pid link_port back_port u_port
    local node_port node_pid u_pid addr echo_port hop_port gc_port gc_pid answer_bytes targets=()
    mkdir -p "$dir/node"
    g_port=$(free_port)
    gd_port=$(free_port)
    link_port=$(free_port)
    back_port=$(free_port)
    start_in "$dir" node "$node_bin" --listen 127.0.0.1:0 --data-dir "$dir/node" \
        --workers "$workers" --admin-token "$admin"
    node_port=$started_port
    node_pid=$started_pid
    start_global "$dir" global "$g_port"
    start_us_router "$dir" "$back_port"
    u_port=$started_port
    u_pid=$started_pid
    start_tcp_proxy "$dir" link "$link_port:$u_port" "$back_port:$g_port"
    # Gd: a second global router whose regions row names U itself, no proxy between (U follows
    # G, not Gd; Gd only relays).
    start_global "$dir" global-direct "$gd_port"
    gd_pid=$started_pid
    log "run $run: us1 on $node_port, U on $u_port, G on $g_port, the link on $link_port" \
        "(G → U) and $back_port (U → G), Gd on $gd_port (Gd → U)"

    rcurl -X PUT "http://127.0.0.1:$g_port/_shard/regions/us" \
        -d "{\"routers\":[\"http://127.0.0.1:$link_port\"]}" >/dev/null
    rcurl -X PUT "http://127.0.0.1:$u_port/_shard/nodes/us1" \
        -d "{\"addr\":\"127.0.0.1:$node_port\",\"token\":\"$admin\",\"region\":\"us\"}" >/dev/null
    rcurl -X PUT "http://127.0.0.1:$u_port/_shard/tenants/bench" \
        -d "{\"node\":\"us1\",\"schema\":[\"$schema\"]}" >/dev/null
    curl -sS --fail-with-body -X POST -H 'Content-Type: application/x-ndjson' \
        --data-binary @"$tmp/rows.ndjson" "http://127.0.0.1:$u_port/t/bench/batch" >/dev/null
    home_in_global "$dir" global-direct "$gd_port" "$gd_pid" "http://127.0.0.1:$u_port"
    gd_pid=$started_pid
    if [[ -n "$compare_bin" ]]; then
        gc_port=$(free_port)
        start_global "$dir" global-compare "$gc_port" "$compare_bin"
        gc_pid=$started_pid
        rcurl -X PUT "http://127.0.0.1:$gc_port/_shard/regions/us" \
            -d "{\"routers\":[\"http://127.0.0.1:$u_port\"]}" >/dev/null
        home_in_global "$dir" global-compare "$gc_port" "$gc_pid" "http://127.0.0.1:$u_port" \
            "$compare_bin"
        gc_pid=$started_pid
        targets+=(compare="$gc_port")
    fi
    answer_bytes=$(curl -sS "http://127.0.0.1:$node_port/t/bench/c/accounts/1" | wc -c)
    start_floor "$dir" echo "$answer_bytes"
    echo_port=$started_port
    start_floor "$dir" hop "$u_port"
    hop_port=$started_port
    local -A cpu_pid=([direct]=$gd_pid [hop]=$started_pid [node]=$node_pid [us]=$u_pid) \
        cpu_before=() served=([direct]=1 [hop]=1 [node]=6 [us]=5)
    if [[ -n "$compare_bin" ]]; then
        cpu_pid[compare]=$gc_pid served[compare]=1 served[node]=7 served[us]=6
    fi

    for addr in "$node_port" "$u_port" "$g_port" "$gd_port" "$hop_port" ${gc_port:+"$gc_port"}; do
        answer=$(curl -sS --fail-with-body "http://127.0.0.1:$addr/t/bench/c/accounts/$rows")
        [[ "$answer" == *"\"aid\":$rows,"* ]] || { log "row by id from $addr: $answer"; exit 1; }
    done
    local load_before p
    load_before=$(cut -d' ' -f1 /proc/loadavg)
    for p in "${!cpu_pid[@]}"; do cpu_before[$p]=$(cpu_ns "${cpu_pid[$p]}"); done
    "$client" measure --rotate "$requests" "$warmup" /t/bench/c/accounts/%d "$rows" \
        node="$node_port" us="$u_port" link="$link_port" relayed="$g_port" \
        direct="$gd_port" loopback="$echo_port" hop="$hop_port" "${targets[@]}" >"$dir/result"
    echo "load $load_before/$(cut -d' ' -f1 /proc/loadavg)" >>"$dir/result"
    # The CPU time each spent per request it took (warm-up included; the node and U take those
    # of every path through them), in µs.
    for p in "${!cpu_pid[@]}"; do
        echo "cpu/$p $(awk -v a="$(cpu_ns "${cpu_pid[$p]}")" -v b="${cpu_before[$p]}" \
            -v n="$(((requests + warmup) * served[$p]))" 'BEGIN { printf "%.1f", (a - b) / 1000 / n }')"
    done >>"$dir/result"
    stop_all 100
}

# ---- 2. a partition ----

# One run of part 2 at `lease` seconds, in this shell; writes "<stop ms> <replicas ms> <lost
# through U> <us1's own acknowledged after the cut> <of which lost> <last status us1 gave its
# own client>" to $tmp/result.
cut_run() {
    local lease=$1 run=$2 dir="$tmp/cut-$1-$2" i u_port us1_proxy_port proxy_pid
    mkdir -p "$dir"
    local ports=()
    for i in 1 2 3; do
        mkdir -p "$dir/us$i"
        start_in "$dir" "us$i" "$node_bin" --listen 127.0.0.1:0 --data-dir "$dir/us$i" \
            --node-name "us$i" --workers "$workers" --admin-token "$admin" \
            --replication-token "$replication" --lease
        ports+=("$started_port")
    done
    us1_proxy_port=$(free_port)
    start_tcp_proxy "$dir" us1-link "$us1_proxy_port:${ports[0]}"
    proxy_pid=$started_pid
    # The link to the global level is down throughout: nothing listens on its port.
    start_us_router "$dir" "$(free_port)" --auto-failover "$lease" --replicas
    u_port=$started_port
    local url="http://127.0.0.1:$u_port" us1_url="http://127.0.0.1:${ports[0]}"
    rcurl -X PUT "$url/_shard/nodes/us1" -d "{\"addr\":\"127.0.0.1:$us1_proxy_port\",\
\"token\":\"$admin\",\"region\":\"us\",\"zone\":\"z1\"}" >/dev/null
    for i in 2 3; do
        rcurl -X PUT "$url/_shard/nodes/us$i" -d "{\"addr\":\"127.0.0.1:${ports[$((i - 1))]}\",\
\"token\":\"$admin\",\"region\":\"us\",\"zone\":\"z$i\"}" >/dev/null
    done
    local names=()
    for i in $(seq 1 "$tenants"); do
        rcurl -X PUT "$url/_shard/tenants/t$i" \
            -d '{"node":"us1","schema":["create collection w (k text)"]}' >/dev/null
        names+=("t$i")
    done
    local writers=() all
    for i in $(seq 1 "$tenants"); do
        start_writer "$url" "t$i" "$dir/stop" "$dir/t$i.log"
        writers+=("$writer_pid")
    done
    all=$(IFS=,; echo "${names[*]}")
    start_writer "$us1_url" "$all" "$dir/stop" "$dir/own.log"
    writers+=("$writer_pid")
    # Writing on us1 (every tenant through U, and us1's own client) for a moment, then the cut.
    for ((i = 0; i < 600; i++)); do
        local ok=1 f
        for f in "$dir"/t*.log "$dir/own.log"; do
            grep -q ' 201 ' "$f" 2>/dev/null || { ok=0; break; }
        done
        ((ok)) && break
        sleep 0.05
    done
    if ((i == 600)); then
        log "lease $lease run $run: not every writer had a 201 after 30 s"
        for f in "$dir"/t*.log "$dir/own.log"; do echo "== $f: $(tail -n 2 "$f")" >&2; done
        exit 1
    fi
    sleep 0.5
    local cut
    cut=$(now_ms)
    kill -STOP "$proxy_pid"
    # Until every tenant has a write sent after the cut acknowledged (on its replica), and us1
    # has refused its own client.
    local deadline=$((cut + lease * 1000 * 4 + 5000))
    while (($(now_ms) < deadline)); do
        local done_all=1
        for i in $(seq 1 "$tenants"); do
            awk -v c="$cut" '$4 > c && $2 == 201 { f = 1 } END { exit !f }' "$dir/t$i.log" ||
                { done_all=0; break; }
        done
        awk -v c="$cut" '$4 > c && $2 == 503 { f = 1 } END { exit !f }' "$dir/own.log" ||
            done_all=0
        ((done_all)) && break
        sleep 0.05
    done
    touch "$dir/stop"
    # Each writer ends at its next turn: every answer logged before the rows are read.
    wait "${writers[@]}" 2>/dev/null || true
    kill -CONT "$proxy_pid"
    # The slowest tenant's first write sent after the cut and acknowledged; us1's own last 201.
    local slowest=0 first stop_ms last_status
    for i in $(seq 1 "$tenants"); do
        first=$(awk -v c="$cut" '$4 > c && $2 == 201 { print $1 - c; exit }' "$dir/t$i.log")
        [[ -n "$first" ]] || first=-1
        ((first > slowest || first < 0)) && slowest=$first
        ((slowest < 0)) && break
    done
    stop_ms=$(awk -v c="$cut" '$2 == 201 && $1 > c { l = $1 - c } END { print l + 0 }' \
        "$dir/own.log")
    last_status=$(awk -v c="$cut" '$1 > c { s = $2 } END { print s + 0 }' "$dir/own.log")
    # Lost: through U, acknowledged and not on the tenant's primary now (read through U); us1's
    # own, acknowledged after the cut, apart.
    local lost=0 own_after=0 own_lost=0 held key st
    for i in $(seq 1 "$tenants"); do
        held=$(curl -sS "$url/t/t$i/c/w?limit=10000")
        while read -r _ st key _ _; do
            [[ "$st" == 201 ]] || continue
            [[ "$held" == *"\"$key\""* ]] || lost=$((lost + 1))
        done <"$dir/t$i.log"
        while read -r key; do
            own_after=$((own_after + 1))
            [[ "$held" == *"\"$key\""* ]] || own_lost=$((own_lost + 1))
        done < <(awk -v c="$cut" -v t="t$i" '$2 == 201 && $1 > c && $5 == t { print $3 }' \
            "$dir/own.log")
    done
    echo "$stop_ms $slowest $lost $own_after $own_lost $last_status" >"$tmp/result"
    stop_all
}

{
    echo "make shard-bench ARGS=regions: a region keeping its own directory"
    echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ); $(nproc) CPUs; $(uname -r);" \
        "$(haproxy -v | head -n 1 | cut -d' ' -f1-3) in TCP mode for each link," \
        "busy-polling $proxy_poll"
    echo "routers and nodes --workers $workers, routers --upstream-poll-us $poll_us"
    echo
    echo "1. the relay: GET /t/bench/c/accounts/<id> ($rows rows) straight to us1, to us's router"
    echo "U, to U through the link's proxy (link), to the global router G (relayed to U over the"
    echo "link's proxy) and to a second global router Gd relaying to U straight (direct), one"
    echo "request to each in turn, rounds rotating; $requests requests per path after $warmup of"
    echo "warm-up; p50 µs. relay = relayed − U = G.fwd (relayed − link) + proxy.hop (link − U);"
    echo "relay.direct = direct − U: the relay on loopback without the link's proxy. Floors in the"
    echo "same rotation: rtt = a loopback round trip (an answer of the row's size at once); hop.add"
    echo "= hop − U, a blocking proxy with no work in front of U. direct/rtt: relay.direct over one"
    echo "round trip (goal ≤ 1.0); hop/rtt: the sleeping proxy's floor in the same unit${compare_bin:+;
relay.cmp = compare − U, $compare_bin relaying to U straight}"
    echo
    printf "%-3s %7s %7s %7s %8s %7s %9s %9s %7s %9s %12s %6s %7s %10s %8s${compare_bin:+ %9s}  %s\n" \
        run node us link relayed direct "U.added" relay "G.fwd" "proxy.hop" "relay.direct" \
        rtt "hop.add" "direct/rtt" "hop/rtt" ${compare_bin:+relay.cmp} "load before/after"
} >"$tmp/report"
cat "$tmp/report"
relays=() u_added=() node_p50=() g_fwd=() hops=() directs=() rtts=() hop_adds=() cmps=()
d_rtts=() h_rtts=()
for run in $(seq 1 "$runs"); do
    relay_run "$run"
    declare -A r=()
    while read -r name fields; do
        if [[ $name == load ]]; then r[load]=$fields; continue; fi
        if [[ $name == cpu/* ]]; then r[$name]=$fields; continue; fi
        for kv in $fields; do r[$name/${kv%%=*}]=${kv#*=}; done
    done <"$tmp/relay-$run/result"
    ua=$(minus "${r[us/p50_us]}" "${r[node/p50_us]}")
    rl=$(minus "${r[relayed/p50_us]}" "${r[us/p50_us]}")
    gf=$(minus "${r[relayed/p50_us]}" "${r[link/p50_us]}")
    hop=$(minus "${r[link/p50_us]}" "${r[us/p50_us]}")
    rd=$(minus "${r[direct/p50_us]}" "${r[us/p50_us]}")
    ha=$(minus "${r[hop/p50_us]}" "${r[us/p50_us]}")
    dr=$(ratio "$rd" "${r[loopback/p50_us]}")
    hr=$(ratio "$ha" "${r[loopback/p50_us]}")
    cmp=()
    if [[ -n "$compare_bin" ]]; then
        cmp=("$(minus "${r[compare/p50_us]}" "${r[us/p50_us]}")")
        cmps+=("${cmp[0]}")
    fi
    node_p50+=("${r[node/p50_us]}") u_added+=("$ua") relays+=("$rl") g_fwd+=("$gf") hops+=("$hop")
    directs+=("$rd") rtts+=("${r[loopback/p50_us]}") hop_adds+=("$ha") d_rtts+=("$dr") h_rtts+=("$hr")
    printf "%-3s %7s %7s %7s %8s %7s %9s %9s %7s %9s %12s %6s %7s %10s %8s${compare_bin:+ %9s}  %s\n" \
        "$run" "${r[node/p50_us]}" "${r[us/p50_us]}" "${r[link/p50_us]}" "${r[relayed/p50_us]}" \
        "${r[direct/p50_us]}" "$ua" "$rl" "$gf" "$hop" "$rd" "${r[loopback/p50_us]}" "$ha" "$dr" \
        "$hr" "${cmp[@]}" "${r[load]}" | tee -a "$tmp/report"
    for p in node us link relayed direct loopback hop ${compare_bin:+compare}; do
        echo "    run $run $p p50 ${r[$p/p50_us]} p95 ${r[$p/p95_us]} p99 ${r[$p/p99_us]}" \
            "min ${r[$p/min_us]} n ${r[$p/n]}${r[cpu/$p]:+ cpu_us_per_request ${r[cpu/$p]}}"
    done >>"$tmp/details"
    unset r
done
{
    echo "spread over $runs runs (min–max): node p50 $(spread "${node_p50[@]}"); U added" \
        "$(spread "${u_added[@]}"); the relay (G's p50 less U's) $(spread "${relays[@]}"): G's" \
        "forward $(spread "${g_fwd[@]}") and the proxy's hop $(spread "${hops[@]}"); the relay" \
        "without the proxy (Gd's p50 less U's) $(spread "${directs[@]}"), over a loopback round" \
        "trip ($(spread "${rtts[@]}")) $(spread "${d_rtts[@]}"); a blocking hop with no work added" \
        "$(spread "${hop_adds[@]}"), over the round trip $(spread "${h_rtts[@]}")${compare_bin:+; the
relay through $compare_bin $(spread "${cmps[@]}")}"
    cat "$tmp/details"
} | tee -a "$tmp/report"
((cut_runs > 0)) || leases=""  # part 1 alone
[[ -z "$leases" ]] || {
    echo
    echo "2. a partition: the link to the global level down throughout; three nodes under --lease,"
    echo "$tenants tenants on us1 with replicas, a writer each through U and one of us1's own;"
    echo "us1's link to U (its HAProxy) SIGSTOPped. stop: cut → us1's last 201 to its own client;"
    echo "replicas: cut → the slowest tenant's first 201 for a write sent after the cut; lost:"
    echo "acknowledged through U and missing; own: us1's own 201s after the cut / of them lost"
    echo
    printf "%-7s %-3s %8s %11s %5s %9s %-8s %s\n" lease_s run stop_ms replicas_ms lost own \
        "last own" "load before/after"
} | tee -a "$tmp/report"
for lease in $leases; do
    stops=() replicas=()
    for run in $(seq 1 "$cut_runs"); do
        load_before=$(cut -d' ' -f1 /proc/loadavg)
        cut_run "$lease" "$run"
        read -r stop_ms slowest lost own_after own_lost last_status <"$tmp/result"
        printf "%-7s %-3s %8s %11s %5s %9s %-8s %s\n" "$lease" "$run" "$stop_ms" "$slowest" \
            "$lost" "$own_after/$own_lost" "$last_status" \
            "$load_before/$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$tmp/report"
        stops+=("$stop_ms") replicas+=("$slowest")
    done
    echo "# lease $lease s, $cut_runs runs: us1 stopped $(spread "${stops[@]}") ms after the" \
        "cut; every tenant written on its replica $(spread "${replicas[@]}") ms after" |
        tee -a "$tmp/report"
done
mkdir -p "$(dirname "$report")"
cp "$tmp/report" "$report"
log "report written to $report"
