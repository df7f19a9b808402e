#!/usr/bin/env bash
# tools/run-cluster.sh: what `make run-cluster` runs. Three fenec-nodes under --lease sharing one
# replication token, a router under `--auto-failover 2 --replicas` in front of them and a standby
# router following its directory, on loopback; the tenant `demo` created through the router with a replica of its own on another
# node, and a row written. It prints how to stop a node (SIGSTOP: a machine cut off answers
# nothing and closes nothing) and watch the tenant fail over onto its replica within about
# 2.2 s, then stays in the foreground until Ctrl-C, which stops everything (SIGTERM; a stopped
# node is continued first).
#
# Tokens are a demo's, on loopback only, printed below. The nodes are registered with
# `token_env`: each router reads the admin token from its own environment
# (FENEC_DEMO_ADMIN_TOKEN), so no token is written into the directory file (router docs).
#
#   tools/run-cluster.sh <fenec-node> <fenec-shard> <demo dir> [first node port] [router host:port]
#                        [standby router host:port]
set -euo pipefail

usage="usage: run-cluster.sh <fenec-node> <fenec-shard> <demo-dir> [first node port] [router host:port]"
node_bin=${1:?$usage}
shard_bin=${2:?$usage}
demo=${3:?$usage}
first_port=${4:-8181}
router_listen=${5:-127.0.0.1:8180}
standby_listen=${6:-127.0.0.1:8179}
admin_token=demo-admin-token
replication_token=demo-replication-token

outs=()
pids=()
stop() {
    trap - EXIT INT TERM
    local pid
    for pid in "${pids[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -f "${outs[@]}"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

source "$(dirname "$0")/demo-lib.sh"

call() {  # method url [body]: prints the answer, fails on a status of 300 or more
    local out status
    out=$(mktemp)
    outs+=("$out")
    status=$(curl -s -o "$out" -w '%{http_code}' -X "$1" "$2" -H 'Content-Type: application/json' \
        ${3:+-d "$3"})
    if ((status >= 300)) && [[ "$status" != 409 ]]; then
        echo "$1 $2: $status $(cat "$out")" >&2
        exit 1
    fi
    cat "$out"
}

addrs=()
for i in 1 2 3; do
    mkdir -p -m 700 "$demo/n$i"  # the node's alone: it warns at start about a wider folder
    out=$(mktemp)
    outs+=("$out")
    "$node_bin" --listen "127.0.0.1:$((first_port + i - 1))" --data-dir "$demo/n$i" \
        --node-name "n$i" --admin-token "$admin_token" \
        --replication-token "$replication_token" --lease >"$out" &
    pids+=($!)
    addrs+=("$(listening "$out" "${pids[-1]}" "fenec-node n$i")")
    head -n 1 "$out"
done
out=$(mktemp)
outs+=("$out")
FENEC_DEMO_ADMIN_TOKEN="$admin_token" \
    "$shard_bin" --listen "$router_listen" --directory "$demo/shard.fenec" --auto-failover 2 \
    --replicas --replication-token "$replication_token" >"$out" &
router_pid=$!
pids+=("$router_pid")
router_addr=$(listening "$out" "$router_pid" fenec-shard)
head -n 1 "$out"
url="http://$router_addr"
out=$(mktemp)
outs+=("$out")
FENEC_DEMO_ADMIN_TOKEN="$admin_token" \
    "$shard_bin" --listen "$standby_listen" --directory "$demo/standby.fenec" --auto-failover 2 \
    --replica-of "$url" --replication-token "$replication_token" >"$out" &
pids+=($!)
standby_addr=$(listening "$out" "${pids[-1]}" "fenec-shard (standby)")
head -n 1 "$out"

for i in 1 2 3; do
    call PUT "$url/_shard/nodes/n$i" \
        "{\"addr\":\"${addrs[$((i - 1))]}\",\"token_env\":\"FENEC_DEMO_ADMIN_TOKEN\",\"zone\":\"z$i\"}" \
        >/dev/null
done
created=$(call PUT "$url/_shard/tenants/demo" \
    '{"node":"n1","schema":["create collection notes (title text)"]}')
echo "tenant demo: $created"
for _ in $(seq 1 50); do  # the first write waits for n1's first grant
    status=$(curl -s -o /dev/null -w '%{http_code}' "$url/t/demo/c/notes" \
        -H 'Content-Type: application/json' -d '{"title":"hello"}')
    [[ "$status" == 201 ]] && break
    sleep 0.1
done
n1_pid=${pids[0]}
cat <<EOT

A cluster on loopback: nodes n1..n3 (under --lease), the router on $url (--auto-failover 2),
a standby router on http://$standby_addr following its directory.
  curl -s $url/_shard/tenants/demo              # where demo is, and its replica
  curl -s $url/t/demo/c/notes                   # read through the router
  kill -STOP $n1_pid                            # cut n1 off: no answer, nothing closed
  watch -n 0.2 curl -s $url/_shard/tenants/demo # demo moves to its replica in ~2.2 s
  curl -s $url/t/demo/c/notes -d '{"title":"after"}'   # written on the new primary
  kill -CONT $n1_pid                            # n1 back: it refuses demo's writes, follows
  curl -s $url/_shard/nodes                     # each node's lease
  curl -s http://$standby_addr/t/demo/c/notes    # the standby forwards too
  curl -s -H 'Authorization: Bearer $replication_token' http://$standby_addr/_replication/status
  curl -s -X POST -H 'Authorization: Bearer $replication_token' http://$standby_addr/_replication/promote
Ctrl-C stops everything.
EOT
wait "$router_pid"
