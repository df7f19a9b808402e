-- bench/node_bench.lua: wrk's request script for bench/node_bench.sh. Each request reads one
-- random account of 1..NODE_BENCH_ROWS from tenant "bench", the way `pgbench -S` picks its aid:
--   NODE_BENCH_MODE=id      GET /t/bench/c/accounts/<id>                       (row by id)
--   NODE_BENCH_MODE=filter  POST /t/bench/query {"query":"get accounts where aid = $1",...}
-- done() prints one line the shell script parses: p50 and p99 in microseconds (wrk's own
-- histogram, no coordinated-omission correction), requests per second, and the failures.

local mode = os.getenv("NODE_BENCH_MODE") or "id"
local rows = tonumber(os.getenv("NODE_BENCH_ROWS") or "100000")
local threads = 0

function setup(thread)
    threads = threads + 1
    thread:set("thread_no", threads)
end

function init(args)
    -- Each wrk thread has its own Lua state: seed each apart so they do not walk the same ids.
    math.randomseed(os.time() * 1000 + (thread_no or 0) * 7919)
end

local json_headers = { ["Content-Type"] = "application/json" }

function request()
    local aid = math.random(1, rows)
    if mode == "filter" then
        local body = '{"query":"get accounts where aid = $1","params":[' .. aid .. ']}'
        return wrk.format("POST", "/t/bench/query", json_headers, body)
    end
    return wrk.format("GET", "/t/bench/c/accounts/" .. aid)
end

function done(summary, latency, requests)
    local seconds = summary.duration / 1e6
    local e = summary.errors
    io.write(string.format(
        "NODE_BENCH p50_us=%d p99_us=%d rps=%.0f requests=%d non2xx=%d socket_errors=%d\n",
        latency:percentile(50), latency:percentile(99), summary.requests / seconds,
        summary.requests, e.status, e.connect + e.read + e.write + e.timeout))
end
