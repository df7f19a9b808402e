#!/usr/bin/env bash
# tools/run-node-demo.sh: what `make run` runs. Starts fenec-node on loopback with its embedded
# defaults (node-http.md §1.2: every plane open on loopback, --sync always), creates the tenant
# `demo` with a `notes` collection and two rows (once: a second run finds them), prints curl
# examples, and stays in the foreground until Ctrl-C, which stops the node cleanly (SIGTERM).
#
#   tools/run-node-demo.sh <fenec-node binary> <data dir> [listen host:port]
set -euo pipefail

bin=${1:?usage: run-node-demo.sh <fenec-node> <data-dir> [host:port]}
data=${2:?usage: run-node-demo.sh <fenec-node> <data-dir> [host:port]}
listen=${3:-127.0.0.1:8081}

out=$(mktemp)
"$bin" --listen "$listen" --data-dir "$data" >"$out" &
node=$!
trap 'kill -TERM $node 2>/dev/null; wait $node 2>/dev/null; rm -f "$out"' EXIT INT TERM

# The first line names the address it listens on.
for _ in $(seq 1 100); do
    grep -q listening= "$out" 2>/dev/null && break
    kill -0 $node 2>/dev/null || { echo "fenec-node did not start" >&2; exit 1; }
    sleep 0.05
done
cat "$out"
addr=$(grep -o 'listening=[^ ]*' "$out" | cut -d= -f2)
url="http://$addr"

status=$(curl -s -o /dev/null -w '%{http_code}' -X PUT "$url/_admin/tenants/demo" -H 'Content-Type: application/json' \
    -d '{"schema":["create collection notes (title text, year int @sorted, tags [text])"]}')
if [[ "$status" == 201 ]]; then
    curl -s "$url/t/demo/batch" -H 'Content-Type: application/x-ndjson' --data-binary $'{"query":"put notes {title: $1, year: 2024, tags: [\\"fenec\\"]}","params":["hello"]}\n{"query":"put notes {title: $1, year: 2025}","params":["world"]}\n' >/dev/null
    echo "created tenant demo in $data"
else
    echo "tenant demo already in $data"
fi

cat <<EOF

Try it (Ctrl-C stops the node):
  curl $url/_health
  curl $url/t/demo/
  curl $url/t/demo/c/notes/1
  curl '$url/t/demo/c/notes?year=ge.2025'
  curl $url/t/demo/query --json '{"query":"get notes where year >= \$1 order year desc","params":[2024]}'
  curl $url/t/demo/query --json '{"query":"put notes {title: \$1, year: 2026}","params":["again"]}'
  curl -X PUT $url/t/demo/c/notes/9 --json '{"title":"by id"}'
  curl -N $url/t/demo/c/notes/changes          # a subscription: write from another shell
  curl $url/_metrics
EOF
wait $node
