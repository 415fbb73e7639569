#!/usr/bin/env bash
# wrk against sluice-hummingbird-app's like route with and without ThrottleMiddleware, in one run:
# POST /like-ungoverned/<post> (no middleware) and POST /like/<post> (the throttle, decided by
# the gate on the NIO thread that handles the request), alternating, on one app process.
#
#   Examples/HummingbirdApp/bench.sh [--seconds 6] [--rounds 5] [--connections 50] [--port 8097] [--skip-build]
#
# Two loads per route: "fresh keys" (every request likes another post, so every like runs: the
# decision, the handler, the RateLimit fields) and "one key" (every request likes post 1, so
# all but one a second are 429s answered by the gate without the handler). Each round runs the
# two routes back to back, in turn first (ungoverned first in odd rounds, /like first in even
# ones), so that a machine growing slower or faster during the bench favours neither. Prints
# req/s, p50 and p99 of each run, each round's governed/ungoverned throughput ratio, and per load
# the median of those ratios (the target is at least 0.92). Builds release with the Hummingbird
# trait in .build-hb (--skip-build uses what is built). Linux or macOS with wrk.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
seconds=6
rounds=5
connections=50
port=8097
skip_build=false
while (($#)); do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        --skip-build) skip_build=true; shift ;;
        -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "bench: unknown option $1" >&2; exit 2 ;;
    esac
done

# A fresh key is liked again only in the next /like run, --seconds later: longer than the window.
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 2)); then
    echo "bench: --seconds must be a whole number of at least 2 (the like window is 1 s)" >&2
    exit 2
fi
if ! [[ "$rounds" =~ ^[0-9]+$ ]] || ((rounds < 1)); then
    echo "bench: --rounds must be a whole number of at least 1" >&2
    exit 2
fi

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

printf '%-10s %-6s %-18s %12s %10s %10s %12s\n' load round route req/s p50 p99 non-2xx
declare -A ratios
for load in fresh one; do
    for round in $(seq 1 "$rounds"); do
        order="like-ungoverned like"
        ((round % 2)) || order="like like-ungoverned"
        declare -A rps_of=()
        for route in $order; do
            read -r rps p50 p99 non2xx <<<"$(measure "$route" "$load")"
            [[ "$rps" =~ ^[0-9.]+$ ]] && [[ "$rps" != 0* ]] || { echo "bench: wrk measured no requests on /$route" >&2; exit 1; }
            printf '%-10s %-6s %-18s %12s %10s %10s %12s\n' "$load" "$round" "/$route" "$rps" "$p50" "$p99" "$non2xx"
            rps_of[$route]="$rps"
        done
        ratio="$(awk -v g="${rps_of[like]}" -v u="${rps_of[like-ungoverned]}" 'BEGIN { printf "%.3f", g / u }')"
        printf '%-10s %-6s governed/ungoverned %.3fx\n' "$load" "$round" "$ratio"
        ratios[$load]="${ratios[$load]:-} $ratio"
    done
done
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for load in fresh one; do
    printf '%-5s /like / ungoverned = %.2fx (median of the ratios of %s rounds:%s)\n' \
        "$load" "$(median "${ratios[$load]}")" "$rounds" "${ratios[$load]}"
done
