#!/usr/bin/env bash
# tools/run-demo.sh: what `make run` runs. Starts a fenec-node and a fenec-shard (the router) on
# loopback, registers the node with the router as `n1`, creates the tenant `demo` through the
# router (PUT /_shard/tenants/demo with its schema: a `notes` collection) and two rows, once (a
# second run finds them), prints curl examples through the router and one straight to the node,
# and stays in the foreground until Ctrl-C, which stops both cleanly (SIGTERM).
#
# The node leaves its data plane open on loopback (node-http.md §1.2); its admin plane takes the
# token below, which the router holds to create tenants on it: given as `token`, the router keeps
# it in `shard.fenec.tokens` (0600) beside its directory, never in the directory file itself. The
# router, on loopback, takes no token for /_shard/ (router.md §2.2).
#
#   tools/run-demo.sh <fenec-node> <fenec-shard> <demo dir> [node host:port] [router host:port]
set -euo pipefail

usage="usage: run-demo.sh <fenec-node> <fenec-shard> <demo-dir> [node host:port] [router host:port]"
node_bin=${1:?$usage}
shard_bin=${2:?$usage}
demo=${3:?$usage}
node_listen=${4:-127.0.0.1:8081}
router_listen=${5:-127.0.0.1:8080}
admin_token=demo-admin-token  # loopback only: a demo's, printed below

mkdir -p -m 700 "$demo/node"  # the node's alone: it warns at start about a wider folder
node_out=$(mktemp)
router_out=$(mktemp)
pids=()
stop() {
    trap - EXIT INT TERM
    local pid
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -f "$node_out" "$router_out"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

source "$(dirname "$0")/demo-lib.sh"

"$node_bin" --listen "$node_listen" --data-dir "$demo/node" --admin-token "$admin_token" \
    >"$node_out" &
pids+=($!)
node_addr=$(listening "$node_out" "${pids[-1]}" fenec-node)
"$shard_bin" --listen "$router_listen" --directory "$demo/shard.fenec" >"$router_out" &
pids+=($!)
router_addr=$(listening "$router_out" "${pids[-1]}" fenec-shard)
head -n 1 "$node_out"
head -n 1 "$router_out"
node="http://$node_addr"
url="http://$router_addr"

status=$(curl -s -o "$demo/last-answer" -w '%{http_code}' -X PUT "$url/_shard/nodes/n1" \
    -H 'Content-Type: application/json' \
    -d "{\"addr\":\"$node_addr\",\"token\":\"$admin_token\"}")
if [[ "$status" != 200 && "$status" != 201 ]]; then
    echo "registering the node with the router: $status $(cat "$demo/last-answer")" >&2
    exit 1
fi
status=$(curl -s -o "$demo/last-answer" -w '%{http_code}' -X PUT "$url/_shard/tenants/demo" \
    -H 'Content-Type: application/json' \
    -d '{"node":"n1","schema":["create collection notes (title text, year int @sorted, tags [text])"]}')
if [[ "$status" == 201 ]]; then
    curl -s "$url/t/demo/batch" -H 'Content-Type: application/x-ndjson' --data-binary $'{"query":"put notes {title: $1, year: 2024, tags: [\\"fenec\\"]}","params":["hello"]}\n{"query":"put notes {title: $1, year: 2025}","params":["world"]}\n' >/dev/null
    echo "created tenant demo on node n1 through the router, files in $demo"
elif [[ "$status" == 409 ]]; then
    echo "tenant demo already in $demo"
else
    echo "creating tenant demo through the router: $status $(cat "$demo/last-answer")" >&2
    exit 1
fi
rm -f "$demo/last-answer"

cat <<EOF

fenec-shard (the router) on $router_addr, fenec-node n1 on $node_addr.
Try it (Ctrl-C stops both):
  curl $url/_health
  curl $url/_shard/nodes
  curl $url/_shard/tenants
  curl $url/t/demo/c/notes/1
  curl '$url/t/demo/c/notes?year=ge.2025'
  curl $url/t/demo/query --json '{"query":"get notes where year >= \$1 order year desc","params":[2024]}'
  curl $url/t/demo/query --json '{"query":"put notes {title: \$1, year: 2026}","params":["again"]}'
  curl -X PUT $url/t/demo/c/notes/9 --json '{"title":"by id"}'
  curl -N $url/t/demo/c/notes/changes          # a subscription: write from another shell
  curl $url/_metrics
  curl $node/t/demo/c/notes/1                   # the same row, straight from the node
EOF
# Until Ctrl-C, or until either exits on its own.
wait -n "${pids[@]}" || true
