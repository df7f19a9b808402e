#!/usr/bin/env bash
# bench/drill.sh: the failover drills of router.md §17 (`make drill`, `make drill ARGS=resolver`),
# real processes in network namespaces. Needs root (ip netns, veth, a bridge); no netem.
#
# The network: a bridge fdr-br in the root namespace (10.213.77.1/24) and a namespace per process,
# each joined to it by a veth pair: fdr-r the router (10.213.77.10), fdr-n1..fdr-n3 the nodes
# (.11–.13). The drill's client (bench/drill_client.py) runs in the root namespace: a writer per
# tenant through the router and a lease poller per node. Everything is made anew for each run and
# removed after it, and on exit, Ctrl-C or failure.
#
# Each run: three fenec-nodes under --lease, a router under `--auto-failover 2 --replicas
# --upstream-timeout 4`, DRILL_TENANTS_PER_NODE tenants on each node with a replica of its own
# elsewhere, a writer each. Then n1 is cut off the network (its veth down: it answers nothing and
# closes nothing, as a machine lost) and SIGKILLed. Measured from the kill (drill_client.py says
# how): when each of n1's tenants is written again; when the router shows n1 failed over; the
# longest pause of the other tenants' writers; acknowledged writes missing from the tenants'
# primaries afterwards (must be 0); the lease-safety checker over the recording.
#
#   bench/drill.sh failover   each run twice in turn: `cut`, the release fenec-shard, and `timeout`,
#                             fenec-shard-hooks with FENEC_TEST_NO_CUT=1 (requests out to n1 left
#                             to --upstream-timeout, §9.10 off): the seed's before and after
#   bench/drill.sh resolver   nodes registered by name; every namespace resolves through
#                             /etc/netns/<ns>/hosts, then a name server that never answers
#                             (drill_client.py sink, on 10.213.77.53); the kill also comments n1's
#                             name out of the hosts files, so every lookup of it goes there
#   bench/drill.sh regions    a partition between two levels (router.md §11.10): the same three
#                             nodes in region us under us's own router (`r`, --region us), a
#                             global router `g` in a namespace of its own, the link between them
#                             refused (a `prohibit` route each way: every connection across it is
#                             refused at once) before the writers start and throughout; then n1
#                             cut and killed as above, the writers going through us's router. After
#                             the client's checks, across the cut link: a write through g to a us
#                             tenant is 502 naming the region, a create in us through g is 503
#                             `Retry-After: 5`; the link back, the create asked again is made and a
#                             write through g reaches a failed-over tenant on its new node
#   bench/drill.sh check      only the checks below
#
# Refuses with exit 2 when not root, when `ip netns` does not work here, when another drill holds
# the lock, or when 10.213.77.0/24 is already used here. Exit 1 when a run lost a write, broke a lease or never failed over.
#
# Usage: bench/drill.sh <failover|resolver|check> <fenec-node> <fenec-shard> <fenec-shard-hooks>
#                       <fenec-lease-check> [report]
# Environment: DRILL_RUNS (3), DRILL_TENANTS_PER_NODE (2), DRILL_WARMUP_S (5), DRILL_SETTLE_S (10),
# DRILL_READERS_TIMEOUT_S (0: none; > 0: a reader a tenant besides its writer, giving up after that
# many s and asking again on a new connection, so the router opens new connections to the dead
# node while it is not yet failed over).
# Warm-up, settle and readers are in seconds; fractions are fine.
set -euo pipefail

usage="usage: drill.sh <failover|resolver|regions|check> <fenec-node> <fenec-shard> <fenec-shard-hooks> <fenec-lease-check> [report]"
kind=${1:?$usage}

refuse() {
    echo "make drill: $*" >&2
    exit 2
}
((EUID == 0)) || refuse "needs root: it makes network namespaces, veth pairs and a bridge (run as root)"
command -v ip >/dev/null || refuse "needs iproute2's ip (ip netns, veth)"
command -v python3 >/dev/null || refuse "needs python3 (bench/drill_client.py)"
ip netns list >/dev/null 2>&1 ||
    refuse "ip netns does not work here (ip netns list failed: $(ip netns list 2>&1 | head -1))"
[[ "$kind" == check ]] && exit 0
[[ "$kind" == failover || "$kind" == resolver || "$kind" == regions ]] || refuse "$usage"

node_bin=${2:?$usage}
shard_bin=${3:?$usage}
hooks_bin=${4:?$usage}
checker=${5:?$usage}
report=${6:-build/drill.txt}
runs=${DRILL_RUNS:-3}
per_node=${DRILL_TENANTS_PER_NODE:-2}
warmup=${DRILL_WARMUP_S:-5}
settle=${DRILL_SETTLE_S:-10}
readers=${DRILL_READERS_TIMEOUT_S:-0}
here=$(cd "$(dirname "$0")" && pwd)
client="$here/drill_client.py"
source "$here/../tools/demo-lib.sh"

net=10.213.77
namespaces=(r n1 n2 n3)
declare -A ip_of=([r]=$net.10 [n1]=$net.11 [n2]=$net.12 [n3]=$net.13 [g]=$net.9)
# regions: `g` the global router too; `r` is us's router there.
[[ "$kind" == regions ]] && namespaces=(g r n1 n2 n3)
resolver_ip=$net.53
node_port=7001
router_port=8080

# One drill at a time on the machine: the names and the subnet are fixed, so that a drill killed
# before its cleanup is cleaned up by the next one.
exec 9>/run/fenec-drill.lock
flock -n 9 || refuse "another drill holds /run/fenec-drill.lock"

taken=$(ip -o addr show to "$net.0/24" | awk '$2 != "fdr-br" { print $2 }')
[[ -z "$taken" ]] || refuse "$net.0/24 is already used here (on $taken)"

work=$(mktemp -d "${TMPDIR:-/tmp}/fenec-drill.XXXXXX")
pids=()
stop_all() {
    local pid
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    # Quiet: bash would report each process it reaps killed.
    { for pid in "${pids[@]}"; do wait "$pid" || true; done; } 2>/dev/null
    pids=()
}
# Idempotent: what a run (or a drill killed before its cleanup) left is removed. The root side of
# each veth is deleted by name, which takes its peer with it at once, rather than waiting for the
# kernel to free a namespace whose sockets are still closing.
net_down() {
    local ns
    for ns in "${namespaces[@]}"; do
        ip link del "fdr-$ns" 2>/dev/null || true
        ip netns del "fdr-$ns" 2>/dev/null || true
        rm -rf "/etc/netns/fdr-$ns"
    done
    ip link del fdr-br 2>/dev/null || true
}
[[ -d /etc/netns ]] && had_etc_netns=1 || had_etc_netns=0
cleanup() {
    stop_all
    net_down
    ((had_etc_netns)) || rmdir /etc/netns 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "drill: interrupted; stopping what it started" >&2; exit 130' INT
trap 'echo "drill: terminated; stopping what it started" >&2; exit 143' TERM

net_up() {
    local ns
    ip link add fdr-br type bridge
    ip addr add "$net.1/24" dev fdr-br
    ip link set fdr-br up
    for ns in "${namespaces[@]}"; do
        ip netns add "fdr-$ns"
        ip link add "fdr-$ns" type veth peer name eth0 netns "fdr-$ns"
        ip link set "fdr-$ns" master fdr-br up
        ip -n "fdr-$ns" addr add "${ip_of[$ns]}/24" dev eth0
        ip -n "fdr-$ns" link set eth0 up
        ip -n "fdr-$ns" link set lo up
    done
}

# resolver: every namespace's /etc/hosts names the nodes, and its name server never answers.
# `ip netns exec` bind-mounts these files over /etc/hosts and /etc/resolv.conf for what it starts.
names_up() {
    local ns i
    for ns in "${namespaces[@]}"; do
        mkdir -p "/etc/netns/fdr-$ns"
        {
            echo "127.0.0.1 localhost"
            for i in 1 2 3; do echo "${ip_of[n$i]} n$i.drill"; done
        } >"/etc/netns/fdr-$ns/hosts"
        echo "nameserver $resolver_ip" >"/etc/netns/fdr-$ns/resolv.conf"
    done
    ip addr add "$resolver_ip/24" dev fdr-br
}

call() {  # method url [body]: prints the answer; fails on a status of 300 or more
    local out=$work/answer status
    status=$(curl -s -o "$out" -w '%{http_code}' -m 30 -X "$1" "$2" \
        -H 'Authorization: Bearer root' -H 'Content-Type: application/json' ${3:+-d "$3"})
    if ((status >= 300)); then
        echo "drill: $1 $2: $status $(cat "$out")" >&2
        exit 1
    fi
    cat "$out"
}

ask() {  # method url [body]: prints "<status> <body>", whatever the status
    local out=$work/answer status
    status=$(curl -s -o "$out" -w '%{http_code}' -m 30 -X "$1" "$2" -D "$work/headers" \
        -H 'Authorization: Bearer root' -H 'Content-Type: application/json' ${3:+-d "$3"})
    echo "$status $(cat "$out")"
}
# The link between the global router and region us refused both ways, or back.
link() {  # add|del
    local ns
    for ns in r n1 n2 n3; do ip -n fdr-g route "$1" prohibit "${ip_of[$ns]}/32"; done
    for ns in r n1 n2 n3; do ip -n "fdr-$ns" route "$1" prohibit "${ip_of[g]}/32"; done
}
# `what` checked: `got` must start with `want`; the line goes to the run's partition log.
expect() {  # what want got
    local verdict=ok
    [[ "$3" == "$2"* ]] || { verdict=FAILED; partition_failed=1; }
    echo "$verdict  $1: ${3:0:300}" >>"$work/partition.txt"
}

# regions, one run: $1 the run's number. As one_run's cut, under a region's router with the link
# to the global router refused throughout; then the partition's own checks.
one_run_regions() {
    local run=$1 dir="$work/regions-$1" i t n
    mkdir -p "$dir"
    net_up
    ip netns exec fdr-g "$shard_bin" --listen "${ip_of[g]}:$router_port" --token root \
        --directory "$dir/global.fenec" --replication-token repl --upstream-timeout 4 \
        >"$dir/global.out" 2>"$dir/global.err" &
    pids+=($!)
    listening "$dir/global.out" "$!" "fenec-shard (global)" >/dev/null
    local g_url="http://${ip_of[g]}:$router_port" url="http://${ip_of[r]}:$router_port"
    ip netns exec fdr-r "$shard_bin" --listen "${ip_of[r]}:$router_port" --token root \
        --directory "$dir/us.fenec" --region us --global "$g_url" --replication-token repl \
        --auto-failover 2 --replicas --upstream-timeout 4 >"$dir/router.out" 2>"$dir/router.err" &
    pids+=($!)
    listening "$dir/router.out" "$!" "fenec-shard (us)" >/dev/null
    call PUT "$g_url/_shard/regions/us" "{\"routers\":[\"$url\"]}" >/dev/null
    local node_args=() node_pids=()
    for i in 1 2 3; do
        mkdir -p "$dir/n$i"
        ip netns exec "fdr-n$i" "$node_bin" --listen "${ip_of[n$i]}:$node_port" \
            --data-dir "$dir/n$i" --node-name "n$i" --token data --admin-token admin \
            --replication-token repl --lease >"$dir/n$i.out" 2>"$dir/n$i.err" &
        pids+=($!)
        node_pids+=($!)
        ((i == 1)) && disown $!
        listening "$dir/n$i.out" "${node_pids[-1]}" "fenec-node n$i" >/dev/null
        node_args+=(--node "n$i=http://${ip_of[n$i]}:$node_port")
        call PUT "$url/_shard/nodes/n$i" \
            "{\"addr\":\"${ip_of[n$i]}:$node_port\",\"token\":\"admin\",\"region\":\"us\",\"zone\":\"z$i\"}" >/dev/null
    done
    # Created through us's router, in two levels: the name taken by the global router first.
    local tenant_args=() k
    for k in $(seq 1 $((3 * per_node))); do
        n="n$(((k - 1) % 3 + 1))"
        t="t$k"
        call PUT "$url/_shard/tenants/$t" \
            "{\"node\":\"$n\",\"schema\":[\"create collection w (k text)\"]}" >"$dir/$t.created"
        grep -q '"replica_on":"n' "$dir/$t.created" ||
            { echo "drill: $t got no replica: $(cat "$dir/$t.created")" >&2; exit 1; }
        tenant_args+=(--tenant "$t=$n")
    done
    expect "t1 at home in us on the global router" '200 {"name":"t1","node":"@us"' \
        "$(ask GET "$g_url/_shard/tenants/t1")"
    link add
    python3 "$client" run --router "$url" --router-token root --data-token data \
        --admin-token admin "${node_args[@]}" "${tenant_args[@]}" --dead n1 \
        --dead-pid "${node_pids[0]}" --cut "ip link set fdr-n1 down" \
        --warmup "$warmup" --settle "$settle" --checker "$checker" --out "$dir" \
        --run-no "$run" --mode regions >"$dir/result.json" 2>"$dir/client.err" &
    pids+=($!)
    wait $! || { echo "drill: the client failed (run $run, regions):" >&2; cat "$dir/client.err" >&2; exit 1; }
    local keep=() p
    for p in "${pids[@]}"; do [[ "$p" == "${node_pids[0]}" ]] || keep+=("$p"); done
    pids=("${keep[@]}")
    # Across the refused link: requests 502 naming the region, changes 503 Retry-After: 5.
    echo "run $run:" >>"$work/partition.txt"
    expect "a write through the global router to t1, link refused" \
        '502 {"error":"region `us` is out of reach: none of its routers answered","region":"us"}' \
        "$(curl -s -w '%{http_code} ' -o "$work/body" -m 30 -X POST "$g_url/t/t1/c/w" \
            -H 'Authorization: Bearer data' -H 'Content-Type: application/json' -d '{"k":"g"}'; cat "$work/body")"
    expect "a create in us through the global router, link refused" "503 " \
        "$(ask PUT "$g_url/_shard/tenants/late-$run" '{"region":"us","schema":["create collection w (k text)"]}')"
    expect "  its Retry-After" "Retry-After: 5" "$(grep -i '^Retry-After' "$work/headers" | tr -d '\r')"
    expect "  no row left on the global router" "404 " "$(ask GET "$g_url/_shard/tenants/late-$run")"
    link del
    local made="" tries
    for tries in $(seq 1 50); do
        made=$(ask PUT "$g_url/_shard/tenants/late-$run" '{"region":"us","schema":["create collection w (k text)"]}')
        [[ "$made" == 201* ]] && break
        echo "      asked again $tries: ${made:0:200}" >>"$work/partition.txt"
        sleep 0.2
    done
    expect "the link back: the same create asked again" "201 " "$made"
    expect "  placed by us's router" '200 {"name":"late-' "$(ask GET "$url/_shard/tenants/late-$run")"
    expect "a write through the global router to t1, on n1 before it was cut" "201 " \
        "$(curl -s -w '%{http_code} ' -o "$work/body" -m 30 -X POST "$g_url/t/t1/c/w" \
            -H 'Authorization: Bearer data' -H 'Content-Type: application/json' -d '{"k":"g2"}'; cat "$work/body")"
    expect "  t1's node now" '200 {"name":"t1","node":"n' "$(ask GET "$url/_shard/tenants/t1")"
    cat "$dir/result.json" >>"$work/results.jsonl"
    for f in router.out router.err global.err n1.err n2.err n3.err checker.txt answers.txt record.txt client.err; do
        [[ -f "$dir/$f" ]] && cp "$dir/$f" "$logs/regions-$run-$f"
    done
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("drill: run %s regions: again %s, failover %s s, other pause %s ms, lost %d, checker rc %d" % (r["run"], r["write_again_s"], r["failover_s"], r["other_pause_ms"], r["lost"], r["checker_rc"]))' "$dir/result.json"
    stop_all
    net_down
}

# One run: $1 the mode (cut, timeout, resolver), $2 the run's number. Appends its JSON line to
# $work/results.jsonl.
one_run() {
    local mode=$1 run=$2 dir="$work/$1-$2" i t n addr
    mkdir -p "$dir"
    net_up
    [[ "$mode" == resolver ]] && names_up
    local sink_args=()
    if [[ "$mode" == resolver ]]; then
        python3 "$client" sink "$resolver_ip" "$dir/sink.log" 2>"$dir/sink.err" &
        pids+=($!)
        sink_args=(--sink-log "$dir/sink.log" --forget n1.drill)
        for n in "${namespaces[@]}"; do sink_args+=(--hosts "/etc/netns/fdr-$n/hosts"); done
    fi
    local node_args=() node_pids=()
    for i in 1 2 3; do
        mkdir -p "$dir/n$i"
        ip netns exec "fdr-n$i" "$node_bin" --listen "${ip_of[n$i]}:$node_port" \
            --data-dir "$dir/n$i" --node-name "n$i" --token data --admin-token admin \
            --replication-token repl --lease >"$dir/n$i.out" 2>"$dir/n$i.err" &
        pids+=($!)
        node_pids+=($!)
        # n1 is killed by the drill's client: bash, left to reap it, would say so on stderr.
        ((i == 1)) && disown $!
        listening "$dir/n$i.out" "${node_pids[-1]}" "fenec-node n$i" >/dev/null
        node_args+=(--node "n$i=http://${ip_of[n$i]}:$node_port")
    done
    local bin=$shard_bin env=()
    if [[ "$mode" == timeout ]]; then
        bin=$hooks_bin
        env=(FENEC_TEST_NO_CUT=1)
    fi
    ip netns exec fdr-r env "${env[@]}" "$bin" --listen "${ip_of[r]}:$router_port" --token root \
        --directory "$dir/shard.fenec" --auto-failover 2 --replicas --upstream-timeout 4 \
        >"$dir/router.out" 2>"$dir/router.err" &
    pids+=($!)
    local router_pid=$!
    listening "$dir/router.out" "$router_pid" fenec-shard >/dev/null
    local url="http://${ip_of[r]}:$router_port"
    for i in 1 2 3; do
        addr="${ip_of[n$i]}:$node_port"
        [[ "$mode" == resolver ]] && addr="n$i.drill:$node_port"
        call PUT "$url/_shard/nodes/n$i" \
            "{\"addr\":\"$addr\",\"token\":\"admin\",\"zone\":\"z$i\"}" >/dev/null
    done
    local tenant_args=() k
    for k in $(seq 1 $((3 * per_node))); do
        n="n$(((k - 1) % 3 + 1))"
        t="t$k"
        call PUT "$url/_shard/tenants/$t" \
            "{\"node\":\"$n\",\"schema\":[\"create collection w (k text)\"]}" >"$dir/$t.created"
        grep -q '"replica_on":"n' "$dir/$t.created" ||
            { echo "drill: $t got no replica: $(cat "$dir/$t.created")" >&2; exit 1; }
        tenant_args+=(--tenant "$t=$n")
    done
    python3 "$client" run --router "$url" --router-token root --data-token data \
        --admin-token admin "${node_args[@]}" "${tenant_args[@]}" --dead n1 \
        --dead-pid "${node_pids[0]}" --cut "ip link set fdr-n1 down" "${sink_args[@]}" \
        --warmup "$warmup" --settle "$settle" --reader-timeout "$readers" \
        --checker "$checker" --out "$dir" \
        --run-no "$run" --mode "$mode" >"$dir/result.json" 2>"$dir/client.err" &
    pids+=($!)
    wait $! || { echo "drill: the client failed (run $run, $mode):" >&2; cat "$dir/client.err" >&2; exit 1; }
    # The client killed n1: its pid is no longer ours to signal.
    local keep=() p
    for p in "${pids[@]}"; do [[ "$p" == "${node_pids[0]}" ]] || keep+=("$p"); done
    pids=("${keep[@]}")
    if [[ "$mode" == resolver ]]; then
        # The router saw the name go: its own view of /etc/hosts (through its mount namespace).
        grep -q "^#.* n1.drill" "/proc/$router_pid/root/etc/hosts" ||
            { echo "drill: the router's /etc/hosts still names n1" >&2; exit 1; }
    fi
    cat "$dir/result.json" >>"$work/results.jsonl"
    for f in router.out router.err n1.err n2.err n3.err checker.txt answers.txt record.txt sink.log client.err; do
        [[ -f "$dir/$f" ]] && cp "$dir/$f" "$logs/$mode-$run-$f"
    done
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("drill: run %s %s: again %s, failover %s s, other pause %s ms, lost %d, checker rc %d" % (r["run"], r["mode"], r["write_again_s"], r["failover_s"], r["other_pause_ms"], r["lost"], r["checker_rc"]))' "$dir/result.json"
    stop_all
    net_down
}

# The runs' logs beside the report, for a reader who wants the router's side of a figure.
logs="${report%.txt}-logs"
rm -rf "$logs"
mkdir -p "$logs" "$(dirname "$report")"
net_down
started="$(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
modes=(cut timeout)
[[ "$kind" == resolver ]] && modes=(resolver)
partition_failed=0
: >"$work/partition.txt"
for run in $(seq 1 "$runs"); do
    if [[ "$kind" == regions ]]; then
        one_run_regions "$run"
        continue
    fi
    for mode in "${modes[@]}"; do one_run "$mode" "$run"; done
done
status=0
{
    echo "# make drill$([[ "$kind" == resolver ]] && echo " ARGS=resolver") — $(nproc) CPUs, $(uname -r); started $started; ended $(date -u +%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# three nodes under --lease, a router under --auto-failover 2 --replicas --upstream-timeout 4, each in a network namespace;"
    echo "# $per_node tenants a node with replicas, a writer each through the router; n1 cut off (veth down) and SIGKILLed"
    [[ "$kind" == resolver ]] &&
        echo "# nodes registered by name; names past /etc/netns/<ns>/hosts go to a name server that never answers; n1's name removed at the kill"
    [[ "$readers" != 0 ]] &&
        echo "# and a reader a tenant giving up after $readers s and asking again on a new connection (DRILL_READERS_TIMEOUT_S)"
    [[ "$kind" == failover ]] &&
        echo "# cut: fenec-shard (§9.10 cuts requests out to n1); timeout: fenec-shard-hooks, FENEC_TEST_NO_CUT=1 (left to --upstream-timeout)"
    [[ "$kind" == regions ]] &&
        echo "# regions: us's router (--region us) keeps the nodes; a global router in its own namespace; the link between them refused (prohibit routes) from before the writers start until the checks below"
    python3 "$client" table "$work/results.jsonl"
    if [[ "$kind" == regions ]]; then
        echo "# across the partition (router.md §11.10):"
        cat "$work/partition.txt"
    fi
} | tee "$report" || status=$?
((partition_failed == 0)) || status=1
echo "drill: report in $report, each run's router log, checker output and answers in $logs/"
exit "$status"
