# bench/shard_bench_lib.sh: what the router's bench scripts share (shard_bench_leases.sh,
# shard_bench_standby.sh, shard_bench_regions.sh, shard_bench_throughput.sh); sourced, not run. It
# sources tools/demo-lib.sh (`listening`). The caller keeps `pids`, the processes it started, for `stop_all`.
# shellcheck shell=bash

# shellcheck source=tools/demo-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tools/demo-lib.sh"

pids=()

# SIGCONT (a process the run stopped), then SIGTERM and SIGKILL after `grace` tenths of a second
# (default 0: SIGKILL at once), each process in `pids`; `pids` emptied.
stop_all() {  # [grace tenths]
    local grace=${1:-0} pid i
    for pid in "${pids[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        if ((grace > 0)); then
            kill -TERM "$pid" 2>/dev/null || continue
            for ((i = 0; i < grace; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    pids=()
}

now_ms() { date +%s%3N; }

# The accounts of `make shard-bench` (pgbench's rows, an 84-byte filler) 1..rows, as one /batch
# body inserting them all into `accounts`, on stdout.
accounts_batch() {  # rows
    awk -v rows="$1" 'BEGIN {
        filler = sprintf("%84s", "")
        line = "{\"query\":\"insert accounts $1\",\"params\":[["
        for (aid = 1; aid <= rows; aid++) {
            line = line (aid > 1 ? "," : "") "{\"_id\":" aid ",\"aid\":" aid ",\"bid\":1" \
                ",\"abalance\":0,\"filler\":\"" filler "\"}"
        }
        print line "]]}"
    }'
}

# A port no socket holds now, in any state (a process that needs one named before it starts:
# HAProxy, or a router started again on its port). Not only one nothing listens on: a client's
# connection in TIME-WAIT on the port (thousands, on a machine running tests) refuses the bind.
free_port() {
    local port tries
    for ((tries = 0; tries < 100; tries++)); do
        port=$((20000 + RANDOM % 30000))
        [[ -z "$(ss -Htan "sport = :$port")" ]] && { echo "$port"; return 0; }
    done
    return 1
}

# CPU time (user + system, ms) a process has used so far; fields 14 and 15 of /proc/<pid>/stat,
# counted after the `(comm)` field, which may hold spaces.
cpu_ms() {
    local stat
    stat=$(<"/proc/$1/stat")
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.0f", ($12 + $13) * 1000 / hz }' <<<"${stat##*) }"
}

minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a - b }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
spread() {  # values...: "min–max"
    printf '%s\n' "$@" | sort -g | sed -n '1h; $!d; x; G; s/\n/–/p'
}

# A writer without pause on one keep-alive connection (a process per write, as curl is, would add
# its own start to every figure), in the background (its pid appended to `pids` and left in
# `writer_pid`): a note `{"k":"w<n>"}` to collection `w` of each tenant of the comma-separated
# list in turn, until the file `stop` exists; each answer logged to `log` as
# "<answered ms> <status> w<n> <sent ms> <tenant>" (status 0: no answer, the connection dropped).
# `token` is the data token, if any.
start_writer() {  # url tenants stop log [token]
    python3 - "$@" <<'PY' &
import http.client, os, sys, time, urllib.parse
url, tenants, stop, log = sys.argv[1:5]
token = sys.argv[5] if len(sys.argv) > 5 else ""
tenants = tenants.split(",")
host = urllib.parse.urlparse(url).netloc
headers = {"Content-Type": "application/json"}
if token:
    headers["Authorization"] = "Bearer " + token
conn, k = None, 0
with open(log, "a", buffering=1) as out:
    while not os.path.exists(stop):
        tenant = tenants[k % len(tenants)]
        k += 1
        sent = time.time() * 1000
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, timeout=30)
            conn.request("POST", f"/t/{tenant}/c/w", body='{"k":"w%d"}' % k, headers=headers)
            r = conn.getresponse()
            r.read()
            status = r.status
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            status = 0
            conn = None
        out.write("%d %d w%d %d %s\n" % (time.time() * 1000, status, k, sent, tenant))
PY
    writer_pid=$!
    pids+=("$writer_pid")
}
