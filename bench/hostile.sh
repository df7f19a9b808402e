#!/usr/bin/env bash
# bench/hostile.sh: issue 17's attacks replayed against real release binaries of two versions,
# side by side (`make hostile`). Prints a table `attack | before | after` of what was measured.
#
# Each attack starts fresh processes of one version (loopback only, each on its own temp data
# dir), attacks, measures and stops them; then the same against the other version:
#   1  slow loris on a node (--max-connections 20, --head-timeout 1000 where the version has it):
#      20 sockets from 127.0.0.2 send one byte of a head every 0.5 s and reconnect when closed
#      (20 ms after, so they race a newcomer for any slot freed); a valid client on 127.0.0.1
#      asks GET /_health for 6 s, each time on a new connection, 200 ms apart
#   2  the same against a router's /_health
#   1b, 2b the same with --max-connections-per-address 10, where the version has it
#   3  `where a in $1` with 100 000 items over 2 000 rows: median time of 3, and the status
#   4  a statement over 2 000 rows under --statement-rows 1000 (where the version has it)
#   5  a foreign Host on an open admin plane (node without tokens) and an open router (no --token)
#   6  no credential, Content-Length 10 000 000 and Expect: 100-continue on a guarded node:
#      does 100 Continue (and the body read) come before the 401?
#   7  a POST through the router to /t/<t>/query chunked, and with no length at all
#   8  under umask 022: a tenant file's and the data dir's modes; a node's admin token in the
#      router's directory file
#   9  a subscription resumed (since=<last event id>) after its one row was deleted
#   10 2 000 rows of ~600 bytes, every row set twice, 5 s waited: file size over the size before
# A version that cannot run an attack gets "n/a" and the reason; an attack that fails gets
# "error" and its log's tail on stderr. Nothing is hidden: each cell is what was seen.
#
# Usage: bench/hostile.sh BEFORE AFTER [report, default build/hostile.txt]
#   BEFORE and AFTER each a folder holding fenec-node and fenec-shard, or a build folder
#   (server/fenec-node, shard/fenec-shard).
# Environment: HOSTILE_ONLY="a_expect a_host_node ..." runs only the attacks named (their
# functions below). Needs curl and python3 (raw sockets, timing). Takes about 90 s.
set -euo pipefail

if (($# < 2)); then
    echo "usage: $0 BEFORE_DIR AFTER_DIR [report file]" >&2
    exit 2
fi
report=${3:-build/hostile.txt}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/demo-lib.sh
source "$here/../tools/demo-lib.sh"

log() { echo "hostile: $*" >&2; }

declare -A bin help
find_bins() {  # tag dir
    local d=$2 name sub
    [[ -d "$d" ]] || { echo "hostile: $1: $d is not a folder" >&2; exit 2; }
    for name in fenec-node fenec-shard; do
        sub=server; [[ $name == fenec-shard ]] && sub=shard
        if [[ -x "$d/$name" ]]; then bin[$1.$name]=$(realpath "$d/$name")
        elif [[ -x "$d/$sub/$name" ]]; then bin[$1.$name]=$(realpath "$d/$sub/$name")
        else echo "hostile: $1: no $name in $d (nor $d/$sub)" >&2; exit 1; fi
        help[$1.$name]=$("${bin[$1.$name]}" --help 2>&1 || true)
    done
}
find_bins before "$1"
find_bins after "$2"
for tool in curl python3 stat; do
    command -v "$tool" >/dev/null || { echo "hostile: $tool is missing" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/fenec-hostile.XXXXXX)
# Every process started is listed in $tmp/pids ("pid binary"), so the outer trap can stop what an
# attack's own trap did not (an interrupted run); a pid is killed only while it still runs that
# binary.
: >"$tmp/pids"
stop_listed() {  # file of "pid binary" lines
    local pid exe i
    while read -r pid exe; do
        [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$exe" ]] || continue
        kill -TERM "$pid" 2>/dev/null || continue
        for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done <"$1"
}
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    stop_listed "$tmp/pids"
    rm -rf "$tmp"
    exit "$status"
}
trap cleanup EXIT INT TERM

# ---- the raw-socket and parsing helpers, in one python file ----
cat >"$tmp/h.py" <<'PY'
import json, select, socket, statistics, sys, threading, time

def addr(s):
    h, p = s.rsplit(':', 1)
    return h, int(p)

def status_of(data):
    line = data.split(b'\r\n', 1)[0].split()
    return int(line[1]) if len(line) > 1 and line[1].isdigit() else None

def loris(target, path, n=20, src='127.0.0.2', seconds=6.0, period=0.5):
    """n slow sockets from src, one head byte each every period, reconnecting when closed;
    meanwhile a valid client from 127.0.0.1 asks GET path, each on a new connection."""
    n, seconds, period = int(n), float(seconds), float(period)
    stop = threading.Event()
    head = ('GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ' % path).encode()
    stats = {'reconnects': 0}

    def attacker():
        socks = {}  # socket -> bytes sent
        next_try = 0.0
        while not stop.is_set():
            now = time.monotonic()
            if len(socks) < n and now >= next_try:
                try:
                    s = socket.socket()
                    s.bind((src, 0))
                    s.settimeout(1)
                    s.connect(addr(target))
                    s.setblocking(False)
                    s.send(head[:1])
                    socks[s] = 1
                    stats['reconnects'] += 1
                except OSError:
                    s.close()
                    next_try = now + 0.05
                continue
            r, _, _ = select.select(list(socks), [], [], 0.05) if socks else ([], [], [])
            for s in r:  # an answer (503, 408) or a close: drop it, connect again
                socks.pop(s, None)
                s.close()
                next_try = time.monotonic() + 0.02
            if time.monotonic() >= attacker.tick:
                attacker.tick = time.monotonic() + period
                for s in list(socks):
                    k = socks[s]
                    b = head[k:k + 1] if k < len(head) else b'a'
                    try:
                        s.send(b)
                        socks[s] = k + 1
                    except OSError:
                        socks.pop(s, None)
                        s.close()
        for s in socks:
            s.close()
    attacker.tick = 0.0

    t = threading.Thread(target=attacker, daemon=True)
    t.start()
    time.sleep(1.5)  # let the slow sockets take the slots
    asked = ok = 0
    others = {}
    end = time.monotonic() + seconds
    req = ('GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' % path).encode()
    while time.monotonic() < end:
        asked += 1
        st = None
        try:
            c = socket.create_connection(addr(target), timeout=2)
            c.sendall(req)
            data = b''
            while b'\r\n' not in data:
                d = c.recv(4096)
                if not d:
                    break
                data += d
            st = status_of(data)
            c.close()
        except OSError as e:
            st = type(e).__name__
        if st == 200:
            ok += 1
        else:
            others[str(st)] = others.get(str(st), 0) + 1
        time.sleep(0.2)
    stop.set()
    t.join(3)
    rest = ', '.join('%s x%d' % kv for kv in sorted(others.items()))
    print('valid client: %d of %d answered 200%s' % (ok, asked, ' (' + rest + ')' if rest else ''))

def expect(target):
    """a POST head with no credential, Content-Length 10 000 000 and Expect: 100-continue."""
    total = 10000000
    s = socket.create_connection(addr(target), timeout=5)
    s.sendall(b'POST /t/t/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n'
              b'Content-Length: %d\r\nExpect: 100-continue\r\n\r\n' % total)
    try:
        first = s.recv(4096)
    except socket.timeout:
        first = b''
    st = status_of(first)
    if st != 100:
        print('%s first, no 100 Continue' % (st if st else 'nothing in 5 s'))
        return
    rest = first.split(b'\r\n\r\n', 1)[1] if b'\r\n\r\n' in first else b''
    sent, chunk, answer = 0, b'x' * 65536, rest
    s.setblocking(False)
    while sent < total and not answer:
        try:
            sent += s.send(chunk[:min(len(chunk), total - sent)])
        except BlockingIOError:
            select.select([s], [s], [], 0.5)
        except OSError:
            break
        try:
            answer = s.recv(4096) or b'closed'
        except BlockingIOError:
            pass
    s.setblocking(True)
    s.settimeout(5)
    if not answer:
        try:
            answer = s.recv(4096)
        except OSError:
            answer = b''
    print('100 Continue first, then %s after %d body bytes' % (status_of(answer) or 'nothing', sent))

def nolength(target, path, body):
    """a POST with a body but neither Content-Length nor Transfer-Encoding."""
    s = socket.create_connection(addr(target), timeout=5)
    s.sendall(('POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\r\n%s'
               % (path, body)).encode())
    data = b''
    try:
        while b'\r\n\r\n' not in data:
            d = s.recv(4096)
            if not d:
                break
            data += d
        time.sleep(0.2)
        s.setblocking(False)
        try:
            data += s.recv(4096)
        except OSError:
            pass
    except OSError:
        pass
    body = data.split(b'\r\n\r\n', 1)[1] if b'\r\n\r\n' in data else b''
    print('%s %s' % (status_of(data), body.split(b'\r\n')[0][:60].decode(errors='replace')))

def sse(path, what, row=None):
    """what=last: the id of the last event; what=resumed: what the resumed stream said of row."""
    text = open(path, encoding='utf-8', errors='replace').read()
    events = []
    for block in text.split('\n\n'):
        ev = {'event': 'message', 'id': None, 'data': ''}
        for line in block.split('\n'):
            if line.startswith('event:'):
                ev['event'] = line[6:].strip()
            elif line.startswith('id:'):
                ev['id'] = line[3:].strip()
            elif line.startswith('data:'):
                ev['data'] += line[5:].strip()
        if ev['id'] is not None or ev['data']:
            events.append(ev)
    if what == 'last':
        ids = [e['id'] for e in events if e['id']]
        print(ids[-1] if ids else '')
        return
    row = int(row)
    told = []
    for e in events:
        try:
            d = json.loads(e['data'])
        except ValueError:
            continue
        if e['event'] == 'change' and row in (d.get('dels') or []):
            told.append('change dels=[%d]' % row)
        elif e['event'] == 'seed' and all(r.get('_id') != row for r in d.get('rows', [])):
            told.append('fresh seed without the row (%d rows)' % len(d.get('rows', [])))
        elif e['event'] == 'seed':
            told.append('seed still holding the row')
    names = ' '.join(e['event'] for e in events) or 'none'
    print('%s (events: %s)' % (told[0] if told else 'nothing of the delete', names))

def ints(n, start, out):
    n, start = int(n), int(start)
    with open(out, 'w') as f:
        json.dump({'query': 'get docs select count(*) where a in $1',
                   'params': [list(range(start, start + n))]}, f)

def puts(n, width, out):
    n, width = int(n), int(width)
    with open(out, 'w') as f:
        for i in range(n):
            f.write(json.dumps({'query': 'put docs {a: $1, s: $2}',
                                'params': [i, ('%d' % i).rjust(width, 'x')]}) + '\n')

def field(path, *keys):
    try:
        d = json.load(open(path))
    except (OSError, ValueError):
        print('')
        return
    out = []
    for k in keys:
        v = d
        for part in k.split('.'):
            v = v.get(part) if isinstance(v, dict) else (v[int(part)] if isinstance(v, list) and part.isdigit() and int(part) < len(v) else None)
        out.append('%s=%s' % (k.split('.')[-1], json.dumps(v) if v is not None else '-'))
    print(' '.join(out))

def median(*xs):
    print('%.3f' % statistics.median(float(x) for x in xs))

if __name__ == '__main__':
    f = globals()[sys.argv[1]]
    f(*sys.argv[2:])
PY
py() { python3 "$tmp/h.py" "$@"; }

# ---- starting and stopping processes (inside an attack's subshell) ----
# Each attack runs in a subshell with its own pid list and EXIT trap; ATTACK names its files.
mine=()
n_addr="" r_addr=""
start() {  # var binary args... : starts it, sets <var>_pid and <var>_addr
    local var=$1 exe=$2
    shift 2
    local out="$tmp/$ATTACK.$var.out" err="$tmp/$ATTACK.$var.err"
    (umask "${UMASK:-$(umask)}" && { [[ -z ${NOFILE:-} ]] || ulimit -n "$NOFILE"; } &&
        exec "$exe" --listen 127.0.0.1:0 "$@") >"$out" 2>"$err" &
    local pid=$!
    echo "$pid $exe" >>"$tmp/pids"
    echo "$pid $exe" >>"$tmp/$ATTACK.pids"
    mine+=("$pid")
    printf -v "${var}_pid" '%s' "$pid"
    local a
    a=$(listening "$out" "$pid" "$(basename "$exe")")
    [[ -n "$a" ]] || { echo "$(basename "$exe") did not start: $(head -c 300 "$err")" >&2; return 1; }
    printf -v "${var}_addr" '%s' "$a"
}
node() {  # var version extra-args...: a node on a fresh data dir of its own
    local var=$1 v=$2
    shift 2
    start "$var" "${bin[$v.fenec-node]}" --data-dir "$tmp/$ATTACK.$var.data" --workers 2 "$@"
}
router() {  # var version extra-args...
    local var=$1 v=$2
    shift 2
    start "$var" "${bin[$v.fenec-shard]}" --directory "$tmp/$ATTACK.$var.fenec" --workers 1 "$@"
}
has_flag() {  # version binary-name flag: whether its --help names the flag
    [[ "${help[$1.$2]}" == *"$3 "* ]]
}
J='Content-Type: application/json'
# curl that prints "<status>" and keeps the body in $tmp/$ATTACK.body; never fails the script.
req() {
    curl -s -o "$tmp/$ATTACK.body" -w '%{http_code}' "$@" || true
}
admin_put_tenant() {  # addr tenant schema-json-list [curl args]
    local a=$1 t=$2 schema=$3
    shift 3
    local st
    st=$(req -X PUT -H "$J" "$@" "http://$a/_admin/tenants/$t" -d "{\"schema\":$schema}")
    [[ $st == 201 ]] || { echo "create $t: $st $(cat "$tmp/$ATTACK.body")" >&2; return 1; }
}
load_rows() {  # addr tenant rows width
    py puts "$3" "$4" "$tmp/$ATTACK.rows.ndjson"
    local st
    st=$(req -X POST -H 'Content-Type: application/x-ndjson' --data-binary "@$tmp/$ATTACK.rows.ndjson" \
        "http://$1/t/$2/batch")
    [[ $st == 200 ]] || { echo "batch: $st $(head -c 300 "$tmp/$ATTACK.body")" >&2; return 1; }
}

# ---- the attacks: each writes its cell on stdout ----
a_loris_node() {
    local v=$1 flags=(--max-connections 20)
    local note=" (no --head-timeout)"
    if has_flag "$v" fenec-node --head-timeout; then flags+=(--head-timeout 1000); note=""; fi
    node n "$v" "${flags[@]}"
    echo "$(py loris "$n_addr" /_health)$note"
}
a_loris_router() {
    local v=$1 flags=(--max-connections 20)
    local note=" (no --head-timeout)"
    if has_flag "$v" fenec-shard --head-timeout; then flags+=(--head-timeout 1000); note=""; fi
    router r "$v" "${flags[@]}"
    echo "$(py loris "$r_addr" /_health)$note"
}
# 1b, 2b: the same with the cap on one address's connections the issue also asked for (the
# node's is off by default, the router's 64 is above --max-connections 20 here).
a_loris_node_cap() {
    local v=$1
    if ! has_flag "$v" fenec-node --max-connections-per-address; then
        echo "n/a: no --max-connections-per-address"
        return 0
    fi
    node n "$v" --max-connections 20 --head-timeout 1000 --max-connections-per-address 10
    py loris "$n_addr" /_health
}
a_loris_router_cap() {
    local v=$1
    if ! has_flag "$v" fenec-shard --max-connections-per-address; then
        echo "n/a: no --max-connections-per-address"
        return 0
    fi
    router r "$v" --max-connections 20 --head-timeout 1000 --max-connections-per-address 10
    py loris "$r_addr" /_health
}
a_in_list() {
    local v=$1 i times=() st t out
    node n "$v"
    admin_put_tenant "$n_addr" t '["create collection docs (a int, s text)"]'
    load_rows "$n_addr" t 2000 8
    py ints 100000 100000 "$tmp/$ATTACK.in.json"
    for i in 1 2 3; do
        out=$(curl -s -o "$tmp/$ATTACK.body" -w '%{http_code} %{time_total}' -X POST -H "$J" \
            --data-binary "@$tmp/$ATTACK.in.json" "http://$n_addr/t/t/query" || echo "000 0")
        st=${out% *}
        t=${out#* }
        times+=("$t")
    done
    echo "$(py median "${times[@]}") s median of 3, status $st"
}
a_statement_rows() {
    local v=$1 st
    if has_flag "$v" fenec-node --statement-rows; then
        node n "$v" --statement-rows 1000
    else
        node n "$v"
    fi
    admin_put_tenant "$n_addr" t '["create collection docs (a int, s text)"]'
    load_rows "$n_addr" t 2000 8
    st=$(req -X POST -H "$J" "http://$n_addr/t/t/query" -d '{"query":"get docs select count(*)"}')
    local note=""
    has_flag "$v" fenec-node --statement-rows || note=" (no --statement-rows)"
    if [[ $st == 200 ]]; then
        echo "$st $(py field "$tmp/$ATTACK.body" rows.0.count\(\*\))$note"
    else
        echo "$st $(py field "$tmp/$ATTACK.body" budget max)$note"
    fi
}
a_descriptors() {
    local v=$1
    NOFILE=256 node n "$v" --max-connections 32
    python3 - "$n_addr" "$n_pid" <<'PY'
import http.client, sys
host, port = sys.argv[1].rsplit(":", 1)
pid = sys.argv[2]
c = http.client.HTTPConnection(host, int(port), timeout=30)
def ask(method, path, body):
    global c
    try:
        c.request(method, path, body, {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as e:
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        return 0, str(e)
done, first = 0, ""
for i in range(300):
    st, body = ask("PUT", f"/_admin/tenants/t{i}", '{"schema":["create collection notes (title text)"]}')
    if st == 201:
        st, body = ask("POST", f"/t/t{i}/query", '{"query":"put notes {title: \\"x\\"}"}')
    if st == 200:
        done += 1
    elif not first:
        first = f"; first refused: t{i} {st} {body[:50]}"
st, body = ask("GET", "/_admin/hello", None)
def field(name):
    key = f'"{name}":'
    return body.split(key, 1)[1].split(",", 1)[0] if key in body else "?"
tenants, memory = field("tenants"), field("memory_bytes")
rss = next(int(l.split()[1]) * 1024 for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS:"))
mb = lambda b: "%.1f MB" % (int(b) / 1e6) if b != "?" else "?"
print(f"{done} of 300 created and written{first}; hello tenants {tenants}, "
      f"memory_bytes {mb(memory)} (process RSS {mb(rss)})")
PY
}
a_memory() {
    local v=$1
    node n "$v"
    python3 - "$n_addr" "$n_pid" <<'PY'
import http.client, json, random, sys
host, port = sys.argv[1].rsplit(":", 1)
pid = sys.argv[2]
c = http.client.HTTPConnection(host, int(port), timeout=60)
def ask(method, path, body=None):
    c.request(method, path, body, {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read().decode(errors="replace")
def figures():
    st, body = ask("GET", "/_admin/hello")
    memory = int(body.split('"memory_bytes":', 1)[1].split(",", 1)[0])
    rss = next(int(l.split()[1]) * 1024 for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS:"))
    return memory, rss
st, body = ask("PUT", "/_admin/tenants/m", json.dumps({"schema": [
    "create collection notes (title text @hash, body text @text, year int @sorted, v vector<32> @hnsw)"]}))
assert st == 201, body
m0, r0 = figures()
rng = random.Random(7)
words = ["w%d" % i for i in range(5000)]
for b in range(10):
    rows = [{"title": "title %d" % (b * 2000 + i), "body": " ".join(rng.choice(words) for _ in range(12)),
             "year": b * 2000 + i, "v": [rng.random() for _ in range(32)]} for i in range(2000)]
    st, body = ask("POST", "/t/m/c/notes", json.dumps(rows))
    assert st == 201, body[:200]
m1, r1 = figures()
# RSS also keeps what malloc freed (the request bodies parsed on the way): an upper bound, not
# the tenant's holding; test/index/memory_test.cc compares the figure with the heap in use.
print("memory_bytes +%.1f MB (process RSS +%.1f MB)" % ((m1 - m0) / 1e6, (r1 - r0) / 1e6))
PY
}
a_host_node() {
    local v=$1 st
    node n "$v"
    st=$(req -H 'Host: evil.example' "http://$n_addr/_admin/tenants")
    echo "$st $(head -c 60 "$tmp/$ATTACK.body")"
}
a_host_router() {
    local v=$1 st
    router r "$v"
    st=$(req -H 'Host: evil.example' "http://$r_addr/_shard/nodes")
    echo "$st $(head -c 60 "$tmp/$ATTACK.body")"
}
a_expect() {
    local v=$1
    node n "$v" --token d --admin-token a
    py expect "$n_addr"
}
# A node with an admin token registered in an open router, and tenant t created through it.
node_behind_router() {  # version admin-token
    node n "$1" --admin-token "$2"
    router r "$1"
    local st
    st=$(req -X PUT -H "$J" "http://$r_addr/_shard/nodes/n1" -d "{\"addr\":\"$n_addr\",\"token\":\"$2\"}")
    [[ $st == 201 ]] || { echo "register: $st $(cat "$tmp/$ATTACK.body")" >&2; return 1; }
    st=$(req -X PUT -H "$J" "http://$r_addr/_shard/tenants/t" \
        -d '{"schema":["create collection docs (a int)"]}')
    [[ $st == 201 ]] || { echo "create via router: $st $(cat "$tmp/$ATTACK.body")" >&2; return 1; }
}
a_router_length() {
    local v=$1 st
    node_behind_router "$v" admin-token-7
    st=$(req -X POST -H "$J" -H 'Transfer-Encoding: chunked' --data-binary '{"query":"put docs {a: 1}"}' \
        "http://$r_addr/t/t/query")
    echo "chunked $st; no length $(py nolength "$r_addr" /t/t/query '{"query":"put docs {a: 1}"}')"
}
a_file_modes() {
    local v=$1
    UMASK=022 node n "$v"
    admin_put_tenant "$n_addr" t '["create collection docs (a int)"]'
    echo "tenant file $(stat -c %a "$tmp/$ATTACK.n.data/t.fenec"), data dir $(stat -c %a "$tmp/$ATTACK.n.data")"
}
a_directory_token() {
    local v=$1 tok=hostile-admin-token-5f3a9c count side=""
    UMASK=022 node_behind_router "$v" "$tok"
    count=$(grep -a -c -- "$tok" "$tmp/$ATTACK.r.fenec" || true)
    [[ -e "$tmp/$ATTACK.r.fenec.tokens" ]] && side=", sidecar $(stat -c %a "$tmp/$ATTACK.r.fenec.tokens")"
    if ((count > 0)); then
        echo "token in directory: found (grep -c $count), file $(stat -c %a "$tmp/$ATTACK.r.fenec")$side"
    else
        echo "token in directory: not found, file $(stat -c %a "$tmp/$ATTACK.r.fenec")$side"
    fi
}
a_resume_delete() {
    local v=$1 st last
    node n "$v"
    admin_put_tenant "$n_addr" t '["create collection docs (a int)"]'
    st=$(req -X POST -H "$J" "http://$n_addr/t/t/query" -d '{"query":"put docs {a: 1}"}')
    [[ $st == 200 ]] || { echo "put: $st" >&2; return 1; }
    curl -s -N --max-time 1.5 "http://$n_addr/t/t/c/docs/changes" >"$tmp/$ATTACK.sse1" || true
    last=$(py sse "$tmp/$ATTACK.sse1" last)
    [[ -n "$last" ]] || { echo "no event on the first stream: $(head -c 300 "$tmp/$ATTACK.sse1")" >&2; return 1; }
    st=$(req -X DELETE "http://$n_addr/t/t/c/docs/1")
    [[ $st == 200 || $st == 204 ]] || { echo "delete: $st $(cat "$tmp/$ATTACK.body")" >&2; return 1; }
    curl -s -N --max-time 2 -G --data-urlencode "since=$last" "http://$n_addr/t/t/c/docs/changes" \
        >"$tmp/$ATTACK.sse2" || true
    echo "since=$last: $(py sse "$tmp/$ATTACK.sse2" resumed 1)"
}
a_dead_share() {
    local v=$1 st size0 size1 i
    node n "$v"
    admin_put_tenant "$n_addr" t '["create collection docs (a int, s text)"]'
    load_rows "$n_addr" t 2000 600
    size0=$(stat -c %s "$tmp/$ATTACK.n.data/t.fenec")
    for i in 1 2; do
        st=$(req -X POST -H "$J" "http://$n_addr/t/t/query" \
            -d "{\"query\":\"set docs {s: \$1} where true\",\"params\":[\"$(printf "%0600d" "$i")\"]}")
        [[ $st == 200 ]] || { echo "set: $st $(cat "$tmp/$ATTACK.body")" >&2; return 1; }
    done
    size1=$(stat -c %s "$tmp/$ATTACK.n.data/t.fenec")
    sleep 5
    local size2
    size2=$(stat -c %s "$tmp/$ATTACK.n.data/t.fenec")
    python3 -c "import sys; a,b,c=map(int,sys.argv[1:]); print('%.2fx (%d -> %d bytes; %.2fx right after the sets)' % (c/a, a, c, b/a))" \
        "$size0" "$size1" "$size2"
}

attacks=(
    "a_loris_node|1 slow loris, node (--max-connections 20)"
    "a_loris_router|2 slow loris, router (--max-connections 20)"
    "a_loris_node_cap|1b the same, --max-connections-per-address 10"
    "a_loris_router_cap|2b the same on the router, --max-connections-per-address 10"
    "a_in_list|3 in list of 100 000 over 2 000 rows"
    "a_statement_rows|4 count(*) over 2 000 rows, --statement-rows 1000"
    "a_host_node|5a Host: evil.example, open node /_admin/tenants"
    "a_host_router|5b Host: evil.example, open router /_shard/nodes"
    "a_expect|6 no credential + Expect: 100-continue, 10 MB"
    "a_router_length|7 POST via router without Content-Length"
    "a_file_modes|8a modes under umask 022 (tenant file, data dir)"
    "a_directory_token|8b node admin token in router directory"
    "a_resume_delete|9 subscription resumed after a delete"
    "a_dead_share|10 file after 2 sets of every row, 5 s later / before"
    "a_descriptors|11 300 tenants created and written, ulimit -n 256, --max-connections 32"
    "a_memory|12 one tenant, 20 000 rows under @hash, @text, @sorted, vector<32> @hnsw"
)

# Runs one attack against one version in a subshell that stops what it started; the cell is its
# last line of output, or "error" with its stderr's tail.
run_one() {  # function version
    local fn=$1 v=$2 rc f
    ATTACK="$fn.$v"
    : >"$tmp/$ATTACK.pids"
    # Not in an && list: there bash would ignore the subshell's set -e.
    set +e
    (
        set -e
        trap 'stop_listed "$tmp/$ATTACK.pids"' EXIT
        "$fn" "$v"
    ) >"$tmp/$ATTACK.cell" 2>"$tmp/$ATTACK.log"
    rc=$?
    set -e
    if ((rc != 0)) || [[ ! -s "$tmp/$ATTACK.cell" ]]; then
        log "$fn on $v failed (exit $rc):"
        tail -n 5 "$tmp/$ATTACK.log" >&2
        for f in "$tmp/$ATTACK".*.err; do [[ -s "$f" ]] && tail -n 5 "$f" >&2; done
        echo "error (exit $rc): $(tail -n 1 "$tmp/$ATTACK.log" | head -c 80)"
    else
        tail -n 1 "$tmp/$ATTACK.cell"
    fi
}

started=$SECONDS
declare -A cell
if [[ -n "${HOSTILE_ONLY:-}" ]]; then
    kept=()
    for entry in "${attacks[@]}"; do
        [[ " $HOSTILE_ONLY " == *" ${entry%%|*} "* ]] && kept+=("$entry")
    done
    attacks=("${kept[@]}")
fi
for entry in "${attacks[@]}"; do
    fn=${entry%%|*}
    for v in before after; do
        log "${entry#*|}: $v"
        cell[$fn.$v]=$(run_one "$fn" "$v")
        log "  ${cell[$fn.$v]}"
    done
done
took=$((SECONDS - started))

mkdir -p "$(dirname "$report")"
{
    echo "# make hostile, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, ${took}s"
    echo "# before: ${bin[before.fenec-node]} ${bin[before.fenec-shard]}"
    echo "# after:  ${bin[after.fenec-node]} ${bin[after.fenec-shard]}"
    echo
    echo "| attack | before | after |"
    echo "|---|---|---|"
    for entry in "${attacks[@]}"; do
        fn=${entry%%|*}
        echo "| ${entry#*|} | ${cell[$fn.before]//|/\\|} | ${cell[$fn.after]//|/\\|} |"
    done
} | tee "$report"
