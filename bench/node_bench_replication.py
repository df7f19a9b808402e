#!/usr/bin/env python3
# bench/node_bench_replication.py: the client half of `make node-bench ARGS=replication`
# (bench/node_bench_replication.sh starts the nodes). Standard library only.
#
# Given a primary and a follower already following tenant "bench" (collection notes), it:
#   * subscribes to the follower's GET /t/bench/c/notes/changes (SSE) on a thread, timestamping
#     (monotonic clock) the arrival of every `change` event by its `id` (the block's seq);
#   * writes RATE puts a second for SECONDS seconds to the primary, one keep-alive connection,
#     paced against a schedule (a late put is sent at once, not skipped), timestamping each 200
#     and reading its Fenec-Seq s;
#   * waits up to 5 s for the follower to catch up, then prints, per write, the lag: the first
#     SSE arrival with id >= s minus the primary's 200 for s (what a reader of the follower sees
#     after the writer was told "done"). A lag below 0 (the event came before the writer read
#     its answer; `early` counts them) counts as 0.
# Output: one line of key=value figures on stdout (the shell script formats the report).
import http.client
import json
import sys
import threading
import time


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, int(round(p / 100.0 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def main():
    primary_port, follower_port = int(sys.argv[1]), int(sys.argv[2])
    rate, seconds = float(sys.argv[3]), float(sys.argv[4])

    arrivals = []  # (seq, monotonic time), in arrival order
    arrivals_lock = threading.Lock()
    ready = threading.Event()
    stop = threading.Event()

    def watch():
        conn = http.client.HTTPConnection("127.0.0.1", follower_port, timeout=30)
        conn.request("GET", "/t/bench/c/notes/changes")
        resp = conn.getresponse()
        if resp.status != 200:
            print("changes answered %d: %s" % (resp.status, resp.read()[:200]), file=sys.stderr)
            ready.set()
            return
        event, ident = None, None
        while not stop.is_set():
            line = resp.fp.readline()
            if not line:
                break
            now = time.monotonic()
            line = line.rstrip(b"\r\n")
            if line.startswith(b"event: "):
                event = line[7:]
            elif line.startswith(b"id: "):
                ident = int(line[4:])
            elif line == b"":
                if event == b"seed":
                    ready.set()
                elif event == b"change" and ident is not None:
                    with arrivals_lock:
                        arrivals.append((ident, now))
                event, ident = None, None
        conn.close()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    if not ready.wait(10):
        print("no seed from the follower's /changes in 10 s", file=sys.stderr)
        return 1

    conn = http.client.HTTPConnection("127.0.0.1", primary_port, timeout=30)
    acks = []  # (seq, monotonic time of the 200)
    n = int(rate * seconds)
    start = time.monotonic()
    for i in range(n):
        due = start + i / rate
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        body = json.dumps({"query": "put notes {title: $1}", "params": ["note %d" % i]})
        conn.request("POST", "/t/bench/query", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        t = time.monotonic()
        if resp.status != 200:
            print("put answered %d" % resp.status, file=sys.stderr)
            return 1
        acks.append((int(resp.getheader("Fenec-Seq")), t))
    elapsed = time.monotonic() - start
    last = acks[-1][0]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with arrivals_lock:
            if arrivals and max(s for s, _ in arrivals) >= last:
                break
        time.sleep(0.01)
    stop.set()

    with arrivals_lock:
        arr = sorted(arrivals)
    lags, missing, early, j = [], 0, 0, 0
    for seq, t in sorted(acks):
        while j < len(arr) and arr[j][0] < seq:
            j += 1
        if j == len(arr):
            missing += 1
            continue
        early += arr[j][1] <= t
        lags.append(max(0.0, arr[j][1] - t) * 1000.0)
    lags.sort()
    print("writes=%d seconds=%.1f rate=%.0f events=%d missing=%d early=%d p50_ms=%.2f p90_ms=%.2f "
          "p99_ms=%.2f max_ms=%.2f mean_ms=%.2f" % (
              len(acks), elapsed, len(acks) / elapsed, len(arr), missing, early,
              percentile(lags, 50), percentile(lags, 90), percentile(lags, 99),
              lags[-1] if lags else float("nan"), sum(lags) / len(lags) if lags else float("nan")))
    return 0 if missing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
