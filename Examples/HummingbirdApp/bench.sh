#!/usr/bin/env bash
# wrk against sluice-hummingbird-app's like route with and without ThrottleMiddleware, in one run:
# POST /like-ungoverned/<post> (no middleware) and POST /like/<post> (the throttle, decided by
# the gate on the NIO thread that handles the request), alternating, three rounds, on one app
# process.
#
#   Examples/HummingbirdApp/bench.sh [--seconds 10] [--connections 50] [--port 8097] [--skip-build]
#
# Two loads per route: "fresh keys" (every request likes another post, so every like runs: the
# decision, the handler, the RateLimit fields) and "one key" (every request likes post 1, so
# all but one a second are 429s answered by the gate without the handler). Prints req/s, p50
# and p99 of each run, and the governed/ungoverned throughput ratio of each load (the medians of
# the three rounds; the target is at least 0.92). Builds release with the
# Hummingbird trait in .build-hb (--skip-build uses what is built). Linux or macOS with wrk.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
seconds=10
connections=50
port=8097
skip_build=false
while (($#)); do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        --skip-build) skip_build=true; shift ;;
        -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "bench: unknown option $1" >&2; exit 2 ;;
    esac
done

cd "$root"
scripts/install-deps.sh --bench
if ! $skip_build; then
    swift build -c release --scratch-path .build-hb --traits Hummingbird --product sluice-hummingbird-app
fi
bin=".build-hb/release/sluice-hummingbird-app"
work="$(mktemp -d)"
"$bin" "$port" >"$work/app.log" 2>&1 &
app=$!
trap 'kill "$app" 2>/dev/null || true; wait "$app" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 200); do
    curl -s -o /dev/null -X POST "http://127.0.0.1:$port/like-ungoverned/0" && break
    kill -0 "$app" 2>/dev/null || { cat "$work/app.log" >&2; exit 1; }
    sleep 0.05
done

# A script per route and load: "fresh" numbers the posts, "one" likes post 1 every time.
script() { # route load
    cat >"$work/$1-$2.lua" <<LUA
local n = 0
request = function()
    n = n + 1
    local post = "$2" == "fresh" and tostring(n) or "1"
    return wrk.format("POST", "/$1/" .. post, { ["Content-Length"] = "0" })
end
LUA
    echo "$work/$1-$2.lua"
}

# Runs wrk; prints "req/s p50 p99 non2xx".
measure() { # route load
    local out
    out="$(wrk -t1 -c"$connections" -d"${seconds}s" --latency -s "$(script "$1" "$2")" "http://127.0.0.1:$port")"
    awk '
        /Requests\/sec:/ { rps = $2 }
        /^ +50%/ { p50 = $2 }
        /^ +99%/ { p99 = $2 }
        /Non-2xx or 3xx responses:/ { non2xx = $5 }
        END { printf "%s %s %s %s\n", rps, p50, p99, (non2xx == "" ? 0 : non2xx) }' <<<"$out"
}

printf '%-10s %-18s %12s %10s %10s %12s\n' load route req/s p50 p99 non-2xx
declare -A runs
for load in fresh one; do
    for round in 1 2 3; do
        for route in like-ungoverned like; do
            read -r rps p50 p99 non2xx <<<"$(measure "$route" "$load")"
            printf '%-10s %-18s %12s %10s %10s %12s\n' "$load" "/$route" "$rps" "$p50" "$p99" "$non2xx"
            runs[$load/$route]="${runs[$load/$route]:-} $rps"
        done
    done
done
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for load in fresh one; do
    awk -v g="$(median "${runs[$load/like]}")" -v u="$(median "${runs[$load/like-ungoverned]}")" -v load="$load" \
        'BEGIN { printf "%-5s /like / ungoverned = %.0f / %.0f req/s (medians of three) = %.2fx\n", load, g, u, g / u }'
done
