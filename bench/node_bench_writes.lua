-- bench/node_bench_writes.lua: wrk's request script for bench/node_bench_writes.sh. Each request
-- inserts one document, answered after its fsync (the node's --sync always):
--   POST /t/<tenant>/c/items {"aid":<random 1..100000>,"filler":"<84 blanks>"}
-- NODE_BENCH_TENANTS (1) tenants named w00, w01, ...; with more than one, each request goes to
-- the next tenant in turn (each wrk thread starting at its own), so every tenant is written at
-- once. done() prints one line the shell script parses: p50 and p99 in microseconds (wrk's own
-- histogram), requests per second, and the failures.

local tenants = tonumber(os.getenv("NODE_BENCH_TENANTS") or "1")
local threads = 0

function setup(thread)
    threads = threads + 1
    thread:set("thread_no", threads)
end

local turn = 0
local filler = string.rep(" ", 84)
local headers = { ["Content-Type"] = "application/json" }

function init(args)
    math.randomseed(os.time() * 1000 + (thread_no or 0) * 7919)
    turn = (thread_no or 0) * 7
end

function request()
    turn = turn + 1
    local path = string.format("/t/w%02d/c/items", turn % tenants)
    local body = '{"aid":' .. math.random(1, 100000) .. ',"filler":"' .. filler .. '"}'
    return wrk.format("POST", path, headers, body)
end

function done(summary, latency, requests)
    local seconds = summary.duration / 1e6
    local e = summary.errors
    io.write(string.format(
        "NODE_BENCH p50_us=%d p99_us=%d rps=%.0f requests=%d non2xx=%d socket_errors=%d\n",
        latency:percentile(50), latency:percentile(99), summary.requests / seconds,
        summary.requests, e.status, e.connect + e.read + e.write + e.timeout))
end
