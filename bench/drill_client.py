#!/usr/bin/env python3
# bench/drill_client.py: the client half of `make drill` (bench/drill.sh starts the network
# namespaces, the nodes and the router, and stops them). Standard library only.
#
#   run    one drill: writers and lease pollers, the cut and the kill, the figures, the checker
#   sink   a name server that never answers: it reads each query, logs it, and says nothing
#   table  the report over every run's result (JSON lines), spreads and verdicts
#
# `run`, in order:
#   * a writer per tenant through the router, one keep-alive connection, without pause: each
#     write a POST of {"k": key} with `Idempotency-Key: key`, retried with the same key until a
#     201 (so a write the failover cuts goes to the new primary, router.md §9.10); every answer
#     is kept with its send and answer instants (CLOCK_MONOTONIC, ns) and its Fenec-History;
#   * with --reader-timeout, a reader per tenant too, GETs on a fresh connection each, giving up
#     after that many seconds (an impatient client: while the dead node is not yet failed over,
#     each of its requests has the router open a new connection to the node, looking its name up);
#   * a poller per node asking GET /_admin/lease every 20 ms (the lease as the node reports it),
#     and one asking the router's GET /_shard/nodes every 20 ms (when it marks the node failed
#     over);
#   * after `--warmup` s of writes on every tenant: the cut (`--cut`, a shell command: the dead
#     node's veth down), then SIGKILL to the dead node, then, when asked, its name commented out
#     of the given hosts files, in place, one byte (`ip netns exec` bind-mounts those files, so the
#     inode must stay; one byte, so no lookup ever reads half a file);
#   * until every dead-node tenant has a write acknowledged after the kill by its new primary
#     (an answer of another history) and the router shows the node failed over, then `--settle`
#     s more (or `--deadline` s after the kill);
#   * the rows each tenant's primary holds afterwards, read straight from the node the directory
#     names; each acknowledged write looked up there (lost: missing, or another id);
#   * the recording (acknowledged writes with the node that answered, found by the Fenec-History
#     of the answer: the tenant's history on its first node before the drill, its history on its
#     primary after it, which a failover forked; leases; final rows) handed to fenec-lease-check
#     (test/support/lease_check_main.cc).
# It prints one JSON line of figures on stdout.
import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

POLL_S = 0.02  # a lease poll and a router poll every 20 ms: well under the 2 s lease
WRITE_TIMEOUT_S = 30  # longer than the router's --upstream-timeout, so the router answers first
LEASE_TIMEOUT_S = 0.5  # a poll of the dead node gives up quickly and asks again
ROWS_PAGE = 10000  # the node's REST `limit` ceiling (node-http.md §5.3)
RATE_WINDOW_S = 2  # the other tenants' write rate at the end of a run, over this window


def now_ns():
    return time.monotonic_ns()  # CLOCK_MONOTONIC on Linux, the checker's clock


def host_port(url):
    u = urllib.parse.urlsplit(url)
    return u.hostname, u.port


def get_json(url, path, token, timeout):
    host, port = host_port(url)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Authorization": "Bearer " + token})
        r = conn.getresponse()
        body = r.read()
        return r.status, (json.loads(body) if body else None)
    finally:
        conn.close()


class Drill:
    def __init__(self, a):
        self.a = a
        self.nodes = dict(kv.split("=", 1) for kv in a.node)  # name -> url
        self.tenants = dict(kv.split("=", 1) for kv in a.tenant)  # tenant -> first node
        self.dead_tenants = sorted(t for t, n in self.tenants.items() if n == a.dead)
        self.answers = []  # (tenant, key, status, id, history, sent_ns, acked_ns, error)
        self.leases = []  # (node, asked_ns, answered_ns, left_ms, [tenants])
        self.router_polls = []  # (asked_ns, answered_ns, failed_over)
        self.beats = []  # (before_ns, after_ns) of each 1 ms sleep
        self.reads = []  # (tenant, status, sent_ns, answered_ns) of the readers
        self.placements = []  # (seen_ns, tenant, (node, replica)) as the directory changed
        self.stop_writes = threading.Event()
        self.stop_polls = threading.Event()
        self.cut_ns = self.kill_ns = None

    # --- the threads ---------------------------------------------------------------------

    def writer(self, tenant):
        host, port = host_port(self.a.router)
        conn = None
        k = 0
        key = None
        while not self.stop_writes.is_set():
            if key is None:
                k += 1
                key = "%s-%d" % (tenant, k)
            body = json.dumps({"k": key})
            headers = {
                "Authorization": "Bearer " + self.a.data_token,
                "Content-Type": "application/json",
                "Idempotency-Key": key,
            }
            status, ident, history, error = 0, 0, "", ""
            sent = now_ns()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(host, port, timeout=WRITE_TIMEOUT_S)
                conn.request("POST", "/t/%s/c/w" % tenant, body, headers)
                r = conn.getresponse()
                data = r.read()
                status = r.status
                history = r.getheader("Fenec-History") or ""
                if status == 201:
                    ident = json.loads(data)["ids"][0]
                if (r.getheader("Connection") or "").lower() == "close":
                    conn.close()
                    conn = None
            except Exception as e:  # a reset, a timeout: the write was not acknowledged
                error = type(e).__name__
                if conn is not None:
                    conn.close()
                conn = None
            acked = now_ns()
            self.answers.append((tenant, key, status, ident, history, sent, acked, error))
            if status == 201:
                key = None
            elif status == 0:
                time.sleep(0.005)  # no answer at all: do not spin on a refused connection
        if conn is not None:
            conn.close()

    def reader(self, tenant):
        # A reader that gives up after `--reader-timeout` s and asks again on a new connection,
        # as an impatient client does: while the tenant's node is dead and not yet failed over,
        # each new request out to it needs a new connection, and so a lookup of its name.
        host, port = host_port(self.a.router)
        headers = {"Authorization": "Bearer " + self.a.data_token}
        while not self.stop_writes.is_set():
            conn = http.client.HTTPConnection(host, port, timeout=self.a.reader_timeout)
            sent = now_ns()
            status = 0
            try:
                conn.request("GET", "/t/%s/c/w?limit=1" % tenant, headers=headers)
                r = conn.getresponse()
                r.read()
                status = r.status
            except Exception:
                pass
            finally:
                conn.close()
            self.reads.append((tenant, status, sent, now_ns()))
            if status != 200:
                time.sleep(0.01)

    def lease_poller(self, node, url):
        host, port = host_port(url)
        conn = None
        while not self.stop_polls.is_set():
            asked = now_ns()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(host, port, timeout=LEASE_TIMEOUT_S)
                conn.request("GET", "/_admin/lease",
                             headers={"Authorization": "Bearer " + self.a.admin_token})
                r = conn.getresponse()
                body = r.read()
                answered = now_ns()
                if r.status == 200:
                    j = json.loads(body)
                    self.leases.append((node, asked, answered, int(j.get("left_ms") or 0),
                                        list(j.get("tenants") or [])))
            except Exception:
                if conn is not None:
                    conn.close()
                conn = None
            time.sleep(POLL_S)

    def heartbeat(self):
        # A control: this process's own lateness waking from a 1 ms sleep. A pause every writer
        # shows at once while this one is late is the client's (the machine's, the GIL's), not
        # the cluster's.
        while not self.stop_polls.is_set():
            before = now_ns()
            time.sleep(0.001)
            self.beats.append((before, now_ns()))

    def router_poller(self):
        host, port = host_port(self.a.router)
        conn = None
        polls = 0
        placed = {}  # tenant -> (node, replica) as last seen
        while not self.stop_polls.is_set():
            asked = now_ns()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(host, port, timeout=5)
                conn.request("GET", "/_shard/nodes",
                             headers={"Authorization": "Bearer " + self.a.router_token})
                r = conn.getresponse()
                body = r.read()
                answered = now_ns()
                if r.status == 200:
                    failed = any(n.get("name") == self.a.dead and
                                 (n.get("lease") or {}).get("failed_over") for n in json.loads(body))
                    self.router_polls.append((asked, answered, bool(failed)))
                # Every fifth round, where each tenant is and its replica: the directory's
                # changes (the failover, the repair's new replicas) beside the writers' pauses.
                polls += 1
                if polls % 5 == 0:
                    conn.request("GET", "/_shard/tenants",
                                 headers={"Authorization": "Bearer " + self.a.router_token})
                    r = conn.getresponse()
                    body = r.read()
                    if r.status == 200:
                        for row in json.loads(body):
                            where = (row.get("node"), row.get("replica"))
                            if placed.get(row["name"]) != where:
                                placed[row["name"]] = where
                                self.placements.append((now_ns(), row["name"], where))
            except Exception:
                if conn is not None:
                    conn.close()
                conn = None
            time.sleep(POLL_S)

    # --- the drill -----------------------------------------------------------------------

    def acks(self, tenant, after_ns=None):
        return [x for x in self.answers
                if x[0] == tenant and x[2] == 201 and (after_ns is None or x[6] > after_ns)]

    def written_again(self, tenant):
        # A dead-node tenant's writes acknowledged after the kill by its new primary (another
        # history): an answer of the old node the router had before the cut can reach the client
        # just after the kill.
        first = [h for (t, h) in self.first_histories if t == tenant]
        return [x for x in self.acks(tenant, self.kill_ns) if x[4] not in first]

    def failover_ns(self):
        for asked, answered, failed in self.router_polls:
            if failed and answered > self.kill_ns:
                return answered
        return None

    def forget_names(self):
        for path in self.a.hosts:
            with open(path, "r+b") as f:
                text = f.read()
                at = 0
                for line in text.split(b"\n"):
                    fields = line.split()
                    if len(fields) >= 2 and self.a.forget.encode() in fields[1:]:
                        f.seek(at)
                        f.write(b"#")  # one byte, in place: the bind-mounted inode sees it
                        f.flush()
                        os.fsync(f.fileno())
                    at += len(line) + 1

    def history_on(self, tenant, node):
        # The history the node's copy of the tenant is on (GET /t/<t>/, node-http.md §5): a
        # failover forks it, so it tells the old primary's writes from the new one's.
        try:
            status, head = get_json(self.nodes[node], "/t/%s/" % tenant, self.a.data_token, 10)
        except (OSError, socket.timeout):
            return None
        return head.get("history") if status == 200 else None

    def run(self):
        self.first_histories = {}
        for t, n in self.tenants.items():
            history = self.history_on(t, n)
            if not history:
                raise SystemExit("drill_client: %s on %s has no history to read" % (t, n))
            self.first_histories[(t, history)] = n
        threads = [threading.Thread(target=self.writer, args=(t,), daemon=True)
                   for t in sorted(self.tenants)]
        if self.a.reader_timeout > 0:
            threads += [threading.Thread(target=self.reader, args=(t,), daemon=True)
                        for t in sorted(self.tenants)]
        pollers = [threading.Thread(target=self.lease_poller, args=(n, u), daemon=True)
                   for n, u in sorted(self.nodes.items())]
        pollers.append(threading.Thread(target=self.router_poller, daemon=True))
        pollers.append(threading.Thread(target=self.heartbeat, daemon=True))
        for th in pollers + threads:
            th.start()
        # Every tenant written, then the warm-up.
        start = time.monotonic()
        while not all(self.acks(t) for t in self.tenants):
            if time.monotonic() - start > 20:
                raise SystemExit("drill_client: not every tenant took a write within 20 s: " +
                                 ", ".join(t for t in self.tenants if not self.acks(t)))
            time.sleep(0.05)
        time.sleep(self.a.warmup)
        self.warm_ns = now_ns()
        # The cut, the kill, the name forgotten.
        subprocess.run(self.a.cut, shell=True, check=True)
        self.cut_ns = now_ns()
        os.kill(self.a.dead_pid, signal.SIGKILL)
        self.kill_ns = now_ns()
        if self.a.forget:
            self.forget_names()
        # Until every dead-node tenant wrote again and the router failed the node over.
        deadline = self.kill_ns + int(max(self.a.deadline, self.a.settle + 20) * 1e9)
        done_ns = None
        while now_ns() < deadline:
            if done_ns is None and self.failover_ns() and \
                    all(self.written_again(t) for t in self.dead_tenants):
                done_ns = now_ns()
            if done_ns is not None and now_ns() - done_ns >= self.a.settle * 1e9:
                break
            time.sleep(0.05)
        self.stop_ns = now_ns()
        self.stop_writes.set()
        for th in threads:
            th.join(WRITE_TIMEOUT_S + 5)
        self.end_ns = now_ns()
        self.stop_polls.set()
        for th in pollers:
            th.join(5)

    # --- afterwards ----------------------------------------------------------------------

    def final_rows(self):
        rows, where, errors = {}, {}, []
        for t in sorted(self.tenants):
            status, row = get_json(self.a.router, "/_shard/tenants/" + t, self.a.router_token, 5)
            if status != 200:
                errors.append("%s: GET /_shard/tenants answered %d" % (t, status))
                continue
            where[t] = row
            node = row["node"]
            held = {}
            offset = 0
            while True:
                try:
                    status, page = get_json(
                        self.nodes[node], "/t/%s/c/w?limit=%d&offset=%d" % (t, ROWS_PAGE, offset),
                        self.a.data_token, 10)
                except (OSError, socket.timeout) as e:
                    errors.append("%s: its primary %s did not answer: %s" % (t, node, e))
                    break
                if status != 200:
                    errors.append("%s: GET rows on %s answered %d" % (t, node, status))
                    break
                for r in page:
                    held[r["k"]] = r["_id"]
                if len(page) < ROWS_PAGE:
                    break
                offset += ROWS_PAGE
            rows[t] = held
        return rows, where, errors

    def cut_counts(self):
        # fenec_router_cut_requests_total by outcome (router.md §9.10): what the failover cut.
        host, port = host_port(self.a.router)
        conn = http.client.HTTPConnection(host, port, timeout=5)
        counts = {}
        try:
            conn.request("GET", "/_metrics",
                         headers={"Authorization": "Bearer " + self.a.router_token})
            for line in conn.getresponse().read().decode().splitlines():
                if line.startswith("fenec_router_cut_requests_total{"):
                    outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
                    counts[outcome] = int(float(line.rsplit(" ", 1)[1]))
        except (OSError, IndexError, ValueError):
            counts["unread"] = 1
        finally:
            conn.close()
        return counts

    def figures(self):
        rows, where, errors = self.final_rows()
        # The node that acknowledged each write, by its history.
        node_of = dict(self.first_histories)  # (tenant, history) -> node
        for t, row in where.items():
            history = self.history_on(t, row["node"])
            if history:
                node_of[(t, history)] = row["node"]
        record, lost, unknown, acked = [], [], 0, 0
        for (tenant, key, status, ident, history, sent, ack, _) in self.answers:
            if status != 201:
                continue
            acked += 1
            node = node_of.get((tenant, history))
            if node is None:
                unknown += 1
                node = "unknown"
            record.append("write %s %s %d %s %d %d" % (tenant, node, ident, key, sent, ack))
            if rows.get(tenant, {}).get(key) != ident:
                lost.append(key)
        for (node, asked, answered, left, tenants) in self.leases:
            record.append("lease %s %d %d %d %s" % (node, asked, answered, left,
                                                    ",".join(tenants) or "-"))
        for t, held in sorted(rows.items()):
            for key, ident in sorted(held.items()):
                record.append("row %s %s %d" % (t, key, ident))
        path = os.path.join(self.a.out, "record.txt")
        with open(path, "w") as f:
            f.write("\n".join(record) + "\n")
        checked = subprocess.run([self.a.checker, path], capture_output=True, text=True)
        with open(os.path.join(self.a.out, "checker.txt"), "w") as f:
            f.write(checked.stdout + checked.stderr)
        with open(os.path.join(self.a.out, "answers.txt"), "w") as f:
            f.write("# tenant key status id history sent_ns acked_ns error; cut %d kill %d\n" %
                    (self.cut_ns, self.kill_ns))
            for x in self.answers:
                f.write("%s %s %d %d %s %d %d %s\n" % (x[0], x[1], x[2], x[3], x[4] or "-",
                                                      x[5], x[6], x[7] or "-"))
        # When each dead-node tenant wrote again; what else its writers were answered.
        again, other_answers = {}, {}
        for t in self.dead_tenants:
            after = self.written_again(t)
            again[t] = round((after[0][6] - self.kill_ns) / 1e9, 3) if after else None
            for x in self.answers:
                if x[0] == t and x[6] > self.kill_ns and x[2] != 201:
                    label = str(x[2]) if x[2] else x[7]
                    other_answers[label] = other_answers.get(label, 0) + 1
        failover = self.failover_ns()
        # The longest pause of every other tenant: between two acknowledged writes, the later
        # after the cut; and, for scale, before the cut in the warm-up.
        def longest_pause(lo, hi):
            worst = (0, None, None)
            for t in self.tenants:
                if t in self.dead_tenants:
                    continue
                times = [x[6] for x in self.acks(t)]
                for a, b in zip(times, times[1:]):
                    if b > lo and a < hi and b - a > worst[0]:
                        worst = (b - a, t, a)
            return round(worst[0] / 1e6, 1), worst[1], worst[2]
        pause_ms, pause_tenant, pause_from = longest_pause(self.cut_ns, self.end_ns)
        before_ms, _, _ = longest_pause(self.warm_ns - int(self.a.warmup * 1e9), self.cut_ns)

        # The other tenants' write rate over the last RATE_WINDOW_S before the writers stopped,
        # against the warm-up's: the slowest tenant's ratio (a primary that waits on a dead
        # follower for each write shows here, not as one long pause).
        def slowest_rate():
            lo_before = self.warm_ns - int(self.a.warmup * 1e9)
            lo_after = self.stop_ns - int(RATE_WINDOW_S * 1e9)
            worst = (None, None)
            for t in self.tenants:
                if t in self.dead_tenants:
                    continue
                times = [x[6] for x in self.acks(t)]
                before = sum(1 for x in times if lo_before < x <= self.cut_ns) / self.a.warmup
                after = sum(1 for x in times if lo_after < x <= self.stop_ns) / RATE_WINDOW_S
                ratio = after / before if before else 0
                if worst[0] is None or ratio < worst[0]:
                    worst = (round(ratio, 2), t)
            return worst
        rate_ratio, rate_tenant = slowest_rate()

        def client_late(lo, hi):
            late = [b - a - 1_000_000 for a, b in self.beats if lo < b and a < hi]
            return round(max(late, default=0) / 1e6, 1)
        violations = max(0, len(checked.stdout.strip().splitlines()) - 1) \
            if checked.returncode in (0, 1) else None
        result = {
            "run": self.a.run_no, "mode": self.a.mode,
            "write_again_s": again,
            "failover_s": round((failover - self.kill_ns) / 1e9, 3) if failover else None,
            "cut_to_kill_ms": round((self.kill_ns - self.cut_ns) / 1e6, 1),
            "dead_answers_not_201": other_answers,
            "other_pause_ms": pause_ms, "other_pause_tenant": pause_tenant,
            "other_pause_before_cut_ms": before_ms,
            "other_rate_ratio": rate_ratio, "other_rate_tenant": rate_tenant,
            "other_pause_from_s": round((pause_from - self.kill_ns) / 1e9, 2)
            if pause_from else None,
            "directory_changes": ["%s %s%s at %.2f" % (
                t, node, (" replica " + replica) if replica else " no replica",
                (at - self.kill_ns) / 1e9) for at, t, (node, replica) in self.placements
                if at > self.kill_ns],
            "client_late_ms": client_late(self.cut_ns, self.end_ns),
            "client_late_before_cut_ms": client_late(
                self.warm_ns - int(self.a.warmup * 1e9), self.cut_ns),
            "acked": acked, "lost": len(lost), "lost_keys": lost[:10],
            "unknown_node": unknown,
            "checker_rc": checked.returncode, "violations": violations,
            "checker_last": (checked.stdout.strip().splitlines() or [checked.stderr.strip()])[-1],
            "lease_reports": len(self.leases),
            "errors": errors,
        }
        result["cut_requests"] = self.cut_counts()
        if self.a.reader_timeout > 0:
            result["reads_after_kill"] = {}
            for (t, status, sent, answered) in self.reads:
                if sent > self.kill_ns:
                    k = "%s %s" % (t, status or "no answer")
                    result["reads_after_kill"][k] = result["reads_after_kill"].get(k, 0) + 1
        if self.a.sink_log:
            result["silent_resolver_queries"] = count_sink_after(self.a.sink_log, self.kill_ns)
        return result


def count_sink_after(path, since_ns):
    n = 0
    try:
        with open(path) as f:
            for line in f:
                if int(line.split()[0]) > since_ns:
                    n += 1
    except FileNotFoundError:
        pass
    return n


def cmd_run(a):
    d = Drill(a)
    d.run()
    print(json.dumps(d.figures()), flush=True)


def cmd_sink(a):
    # UDP and TCP on port 53 of the given address; queries are read and logged, never answered.
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((a.address, 53))
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((a.address, 53))
    tcp.listen(64)
    log = open(a.log, "a", buffering=1)
    held = []

    def accept():
        while True:
            c, _ = tcp.accept()
            held.append(c)  # kept open, never answered
            log.write("%d tcp\n" % now_ns())

    threading.Thread(target=accept, daemon=True).start()
    while True:
        data, peer = udp.recvfrom(4096)
        name, i = [], 12
        while i < len(data) and data[i]:
            name.append(data[i + 1:i + 1 + data[i]].decode(errors="replace"))
            i += 1 + data[i]
        qtype = int.from_bytes(data[i + 1:i + 3], "big") if i + 3 <= len(data) else 0
        log.write("%d %s %s type=%d\n" % (now_ns(), peer[0], ".".join(name), qtype))


def spread(values, unit_fmt="%.2f"):
    values = [v for v in values if v is not None]
    if not values:
        return "none"
    lo, hi = min(values), max(values)
    return (unit_fmt % lo) if lo == hi else (unit_fmt % lo) + "–" + (unit_fmt % hi)


def cmd_table(a):
    results = [json.loads(line) for line in open(a.results) if line.strip()]
    dead = sorted({t for r in results for t in r["write_again_s"]}, key=lambda t: int(t[1:]))
    out = ["# <tenant>_s: when each of the dead node's tenants was written again, s after the kill",
           "# failover_s: when GET /_shard/nodes first showed the node failed over, s after the kill",
           "# pause_ms: the longest wait between two acknowledged writes of any other tenant after",
           "#   the cut, and which; before_ms: the same over the warm-up before the cut",
           "# client_late_ms: the drill client's own longest lateness waking from a 1 ms sleep,",
           "#   after the cut (before it): a pause this long is the client's or the machine's",
           "# rate_end: the slowest other tenant's writes a second over the run's last 2 s, as a",
           "#   fraction of its rate in the warm-up, and which tenant",
           "# lost: acknowledged writes missing from their tenant's primary afterwards; checker:",
           "#   fenec-lease-check over the recording (writes, leases as the nodes reported them, rows)"]
    head = "%-4s %-9s " % ("run", "mode") + "".join("%-8s" % (t + "_s") for t in dead) + \
        "%-11s %-15s %-10s %-14s %-11s %-7s %-5s %s" % (
            "failover_s", "pause_ms", "before_ms", "client_late_ms", "rate_end", "acked", "lost",
            "checker")
    out.append(head)
    failed = False
    notes = []
    for r in results:
        again = r["write_again_s"]
        checker = "ok" if r["checker_rc"] == 0 else "violations: %s" % r["violations"]
        if r["checker_rc"] not in (0, 1):
            checker = "did not run (rc %d)" % r["checker_rc"]
        fo = "%.2f" % r["failover_s"] if r["failover_s"] is not None else "never"
        out.append("%-4s %-9s " % (r["run"], r["mode"]) +
                   "".join("%-8s" % ("%.2f" % again[t] if again.get(t) is not None else "never")
                           for t in dead) +
                   "%-11s %-15s %-10s %-14s %-11s %-7d %-5d %s" % (
                       fo, "%.1f %s" % (r["other_pause_ms"], r["other_pause_tenant"] or ""),
                       "%.1f" % r["other_pause_before_cut_ms"],
                       "%.1f (%.1f)" % (r["client_late_ms"], r["client_late_before_cut_ms"]),
                       "%.2f %s" % (r["other_rate_ratio"], r["other_rate_tenant"]),
                       r["acked"], r["lost"], checker))
        note = "run %s %s: the dead node's writers were answered, after the kill, %s besides " \
            "their 201s" % (r["run"], r["mode"], ", ".join(
                "%d × %s" % (n, k) for k, n in sorted(r["dead_answers_not_201"].items()))
                or "nothing")
        note += "; the router cut %s" % (", ".join(
            "%d %s" % (n, k) for k, n in sorted(r.get("cut_requests", {}).items())) or "nothing")
        if "silent_resolver_queries" in r:
            note += "; the silent name server got %d queries after the kill" % \
                r["silent_resolver_queries"]
        if r.get("other_pause_from_s") is not None:
            note += "; the longest pause began %.2f s after the kill" % r["other_pause_from_s"]
        if r.get("directory_changes"):
            note += "; the directory after the kill (polled every 100 ms): " + \
                ", ".join(r["directory_changes"])
        if r.get("reads_after_kill"):
            note += "; impatient readers after the kill: " + ", ".join(
                "%d × %s" % (n, k) for k, n in sorted(r["reads_after_kill"].items()))
        if r.get("unknown_node"):
            note += "; %d acknowledged writes of an unknown history" % r["unknown_node"]
        if r.get("lost_keys"):
            note += "; lost: " + " ".join(r["lost_keys"])
        if r.get("errors"):
            note += "; errors: " + "; ".join(r["errors"])
        notes.append("# " + note)
        never = any(s is None for s in again.values())
        if r["lost"] or r["checker_rc"] != 0 or never or r["failover_s"] is None or r["errors"]:
            failed = True
    out += notes
    for mode in sorted(set(r["mode"] for r in results)):
        rs = [r for r in results if r["mode"] == mode]
        out.append("# %s, %d runs: the dead node's tenants written again %s s after the kill; "
                   "failed over %s s after it; other tenants' longest pause %s ms (before the "
                   "cut %s ms); slowest other tenant's rate at the end %s of its warm-up's; "
                   "acknowledged writes lost: %s; lease-safety violations: %s" % (
                       mode, len(rs),
                       spread([s for r in rs for s in r["write_again_s"].values()]),
                       spread([r["failover_s"] for r in rs]),
                       spread([r["other_pause_ms"] for r in rs], "%.1f"),
                       spread([r["other_pause_before_cut_ms"] for r in rs], "%.1f"),
                       spread([r["other_rate_ratio"] for r in rs]),
                       spread([r["lost"] for r in rs], "%d"),
                       spread([r["violations"] for r in rs], "%d")))
    if any(r["mode"] == "resolver" for r in results):
        out.append("# reference (seed 001): failed over 2.1–3.3 s after the kill at a lease of "
                   "2 s; the other tenants never pause more than 19 ms")
    else:
        out.append("# reference (seed 001): written again 1.93 and 2.52 s after the kill with the "
                   "cut, 3.94–3.95 s with requests left to time out; no acknowledged write lost")
    print("\n".join(out))
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--router", required=True)
    r.add_argument("--router-token", required=True)
    r.add_argument("--data-token", required=True)
    r.add_argument("--admin-token", required=True)
    r.add_argument("--node", action="append", required=True, help="name=http://host:port")
    r.add_argument("--tenant", action="append", required=True, help="tenant=its first node")
    r.add_argument("--dead", required=True)
    r.add_argument("--dead-pid", type=int, required=True)
    r.add_argument("--cut", required=True, help="shell command cutting the dead node off")
    r.add_argument("--forget", default="", help="the dead node's name, commented out of --hosts")
    r.add_argument("--hosts", action="append", default=[])
    r.add_argument("--sink-log", default="")
    r.add_argument("--warmup", type=float, default=3)
    r.add_argument("--settle", type=float, default=4)
    r.add_argument("--deadline", type=float, default=30,
                   help="s after the kill to give up waiting (at least --settle + 20)")
    r.add_argument("--reader-timeout", type=float, default=0,
                   help="> 0: a reader a tenant too, giving up after this many s")
    r.add_argument("--checker", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--run-no", default="1")
    r.add_argument("--mode", default="cut")
    s = sub.add_parser("sink")
    s.add_argument("address")
    s.add_argument("log")
    t = sub.add_parser("table")
    t.add_argument("results")
    a = p.parse_args()
    if a.cmd == "run":
        cmd_run(a)
    elif a.cmd == "sink":
        cmd_sink(a)
    else:
        sys.exit(cmd_table(a))


if __name__ == "__main__":
    main()
