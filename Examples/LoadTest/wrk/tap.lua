-- wrk script for POST /tap/<key>: every request is `POST /tap/k<n>` (n uniform in 0..99999) with
-- an empty body (Content-Length: 0). Counts the answers: 200 (the tap ran), 429 (throttled) and
-- anything else (an error). At the end it prints one line the scripts read:
--
--   tap: requests=<n> seconds=<s> rps=<r> p50_us=<µs> p99_us=<µs> ok=<200s> throttled=<429s>
--        other=<other statuses> socket_errors=<connect+read+write+timeout>
--
--   wrk -t1 -c50 -d10s --latency -s Examples/LoadTest/wrk/tap.lua http://127.0.0.1:8081

local threads = {}
local next_id = 0

function setup(thread)
    next_id = next_id + 1
    thread:set("id", next_id)
    table.insert(threads, thread)
end

function init(args)
    ok, throttled, other = 0, 0, 0
    math.randomseed(os.time() * 1000 + id)
end

local headers = { ["Content-Length"] = "0" }

function request()
    return wrk.format("POST", "/tap/k" .. math.random(0, 99999), headers)
end

function response(status, headers, body)
    if status == 200 then
        ok = ok + 1
    elseif status == 429 then
        throttled = throttled + 1
    else
        other = other + 1
    end
end

function done(summary, latency, requests)
    local total_ok, total_throttled, total_other = 0, 0, 0
    for _, thread in ipairs(threads) do
        total_ok = total_ok + thread:get("ok")
        total_throttled = total_throttled + thread:get("throttled")
        total_other = total_other + thread:get("other")
    end
    local errors = summary.errors
    local seconds = summary.duration / 1e6
    io.write(string.format(
        "tap: requests=%d seconds=%.3f rps=%.0f p50_us=%d p99_us=%d ok=%d throttled=%d other=%d socket_errors=%d\n",
        summary.requests, seconds, summary.requests / seconds, latency:percentile(50), latency:percentile(99),
        total_ok, total_throttled, total_other,
        errors.connect + errors.read + errors.write + errors.timeout))
end
