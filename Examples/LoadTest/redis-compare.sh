#!/usr/bin/env bash
# Decisions per second through the Redis store beside redis-benchmark on the same Redis server,
# in one run, and the latency a decision through Redis adds.
#
#   Examples/LoadTest/redis-compare.sh [--seconds N] [--rate R] [--skip-build]
#
# Starts its own redis-server (no persistence, a free port) and a release sluice-echo with one
# loop (one Redis connection, every client connection's decisions pipelined on it), then:
#   1. redis-benchmark SET, 50 clients, unpipelined and with -P 16;
#   2. sluice-load closed loop (50 connections, depth 16) with TAP only (100,000 keys) and PAY
#      only (every pair new, processor latency 0) against sluice-echo --redis: decisions/s;
#   3. the same verbs open loop at --rate (default 5,000/s) against sluice-echo with and without
#      --redis: p50/p99 and the difference, the latency Redis adds to a decision.
# Prints a Markdown table. Needs redis-server and redis-benchmark (apt: redis-server).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
seconds=10
rate=5000
build=1
while (($#)); do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --rate) rate="$2"; shift 2 ;;
        --skip-build) build=0; shift ;;
        *) echo "usage: $0 [--seconds N] [--rate R] [--skip-build]" >&2; exit 64 ;;
    esac
done
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null \
    || { echo "redis-compare: needs redis-server and redis-benchmark (apt-get install redis-server)" >&2; exit 1; }
if ((build)); then
    (cd "$root" && swift build -c release --product sluice-echo >&2 && swift build -c release --product sluice-load >&2)
fi
bin="$(cd "$root" && swift build -c release --show-bin-path)"
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do nc -z 127.0.0.1 "$1" 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened" >&2; exit 1; }

redis_port="$(free_port)"
redis-server --port "$redis_port" --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
wait_port "$redis_port"

bench() { # prints requests/s of redis-benchmark SET with the given extra options
    redis-benchmark -p "$redis_port" -c 50 -n "$1" -t set -q "${@:2}" | tr '\r' '\n' | awk '/requests per second/ { print $2 }' | tail -1
}

start_echo() { # port, extra options...
    "$bin/sluice-echo" --port "$1" --http-port 0 --loops 1 --log-level warning --pay-latency-ms 0 \
        --pay-records-per-key 0 "${@:2}" >"$work/echo-$1.log" 2>&1 &
    pids+=($!)
    wait_port "$1"
}

load() { # port, json, options... (sluice-load exits 1 when a correctness check fails: the script stops)
    "$bin/sluice-load" --port "$1" --json "$2" "${@:3}" >/dev/null
}
field() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }

echo "redis-benchmark …" >&2
set_plain="$(bench 200000)"
set_pipelined="$(bench 2000000 -P 16)"

shared_port="$(free_port)"
start_echo "$shared_port" --redis "redis://127.0.0.1:$redis_port"
memory_port="$(free_port)"
start_echo "$memory_port"

echo "sluice-load through Redis …" >&2
load "$shared_port" "$work/tap.json" --connections 50 --depth 16 --duration "${seconds}s" --mix tap=1 --keys 100000
load "$shared_port" "$work/pay.json" --connections 50 --depth 16 --duration "${seconds}s" --mix pay=1 --keys 100000 --dup-ratio 0
tap_rate="$(field "$work/tap.json" "round(d['throughput'])")"
pay_rate="$(field "$work/pay.json" "round(d['throughput'])")"

echo "latency at $rate/s, with and without Redis …" >&2
for verb in tap pay; do
    for target in shared memory; do
        port_var="${target}_port"
        load "${!port_var}" "$work/lat-$verb-$target.json" --connections 16 --rate "$rate" --duration "${seconds}s" \
            --mix "$verb=1" --keys 100000 --dup-ratio 0
    done
done
lat() { field "$work/lat-$1-$2.json" "round(d['latencyMicroseconds']['$3'])"; }

echo "| measure (one Redis $(redis-server --version | awk '{print $3}' | cut -d= -f2), 50 clients, same run) | per second | ratio to redis-benchmark SET unpipelined | ratio to SET -P 16 |"
echo "| --- | ---: | ---: | ---: |"
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
echo "| redis-benchmark SET | $set_plain | 1.00 | $(ratio "$set_plain" "$set_pipelined") |"
echo "| redis-benchmark SET -P 16 | $set_pipelined | $(ratio "$set_pipelined" "$set_plain") | 1.00 |"
echo "| sluice TAP decisions through Redis (one EVALSHA each) | $tap_rate | $(ratio "$tap_rate" "$set_plain") | $(ratio "$tap_rate" "$set_pipelined") |"
echo "| sluice PAY decisions through Redis (claim + complete: two EVALSHA each; exactly-once check passed) | $pay_rate | $(ratio "$pay_rate" "$set_plain") | $(ratio "$pay_rate" "$set_pipelined") |"
echo
echo "| verb at $rate/s open loop | p50 memory µs | p50 Redis µs | added p50 µs | p99 memory µs | p99 Redis µs | added p99 µs |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for verb in tap pay; do
    m50="$(lat "$verb" memory p50)"; r50="$(lat "$verb" shared p50)"
    m99="$(lat "$verb" memory p99)"; r99="$(lat "$verb" shared p99)"
    echo "| ${verb^^} | $m50 | $r50 | $((r50 - m50)) | $m99 | $r99 | $((r99 - m99)) |"
done
