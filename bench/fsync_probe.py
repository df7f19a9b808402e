#!/usr/bin/env python3
"""bench/fsync_probe.py: what a group commit across files could buy on this file system.

Appends 256-byte records to N files (as N tenants' files grow) and makes them durable two ways:
  per-file  N threads, each: append to its own file, fdatasync it (what the node's Syncer does:
            one fsync a file, up to engine::limits::sync_threads at once; here N at once)
  syncfs    one thread: append to each of the N files, then one syncfs(2) for the file system
Prints, for each N, records made durable per second and the p50/p99 of one sync call, each way,
in rounds that alternate the two ways. Run it on the file system a node's data dir lives on,
with nothing else writing there (syncfs flushes everything dirty on it).

Usage: python3 bench/fsync_probe.py [dir, default /tmp] ; env PROBE_SECONDS (3), PROBE_ROUNDS (3),
PROBE_FILES ("1 4 8 16").
"""
import ctypes
import os
import statistics
import sys
import tempfile
import threading
import time

libc = ctypes.CDLL(None, use_errno=True)
RECORD = b"r" * 255 + b"\n"


def syncfs(fd):
    if libc.syncfs(fd) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def per_file(fds, seconds):
    lat = []
    counts = [0] * len(fds)
    stop = time.monotonic() + seconds
    lock = threading.Lock()

    def run(i):
        mine = []
        while time.monotonic() < stop:
            os.write(fds[i], RECORD)
            t = time.perf_counter()
            os.fdatasync(fds[i])
            mine.append(time.perf_counter() - t)
            counts[i] += 1
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fds))]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.monotonic() - start), lat


def one_syncfs(fds, seconds):
    lat = []
    n = 0
    start = time.monotonic()
    stop = start + seconds
    while time.monotonic() < stop:
        for fd in fds:
            os.write(fd, RECORD)
        t = time.perf_counter()
        syncfs(fds[0])
        lat.append(time.perf_counter() - t)
        n += len(fds)
    return n / (time.monotonic() - start), lat


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] * 1e6


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
    seconds = float(os.environ.get("PROBE_SECONDS", "3"))
    rounds = int(os.environ.get("PROBE_ROUNDS", "3"))
    counts = [int(x) for x in os.environ.get("PROBE_FILES", "1 4 8 16").split()]
    with tempfile.TemporaryDirectory(dir=base, prefix="fsync-probe.") as d:
        print(f"fsync_probe: {d}, {seconds:g} s a measurement, {rounds} rounds, 256-byte appends")
        print(f"{'files':>5} {'round':>5} {'way':>8} {'records/s':>10} {'p50 us':>8} {'p99 us':>8}")
        for n in counts:
            fds = [os.open(os.path.join(d, f"t{n}-{i}"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                   for i in range(n)]
            try:
                for r in range(1, rounds + 1):
                    for name, way in (("per-file", per_file), ("syncfs", one_syncfs)):
                        rate, lat = way(fds, seconds)
                        print(f"{n:>5} {r:>5} {name:>8} {rate:>10.0f} {pct(lat, 0.5):>8.0f} {pct(lat, 0.99):>8.0f}",
                              flush=True)
            finally:
                for fd in fds:
                    os.close(fd)


if __name__ == "__main__":
    main()
