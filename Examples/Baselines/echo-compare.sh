#!/usr/bin/env bash
# Echo comparison: server CPU time per echoed line, sluice-echo (--loops 1, release) against the
# plain C libevent echo server (c-echo), under the same load in the same run.
#
# Both servers run side by side; the rounds alternate C, Swift, C, Swift, … so machine noise
# hits both. For each round the load client sends --lines lines of --line-bytes bytes over
# --connections connections with --depth lines in flight each, checks every echoed byte, and
# the server's CPU time (utime + stime of the whole process, from /proc/<pid>/stat) before and
# after gives CPU per line. The ratio is Swift / C over all rounds (target ≤ 1.10).
#
#   Examples/Baselines/echo-compare.sh [--rounds 4] [--lines 2000000] [--connections 16]
#       [--depth 16] [--line-bytes 64] [--client c-load|sluice-load] [--baseline-load verbatim|raw]
#
# When sluice-echo speaks the line protocol (`0 PING` → `0 PONG`), it is driven through
# the gate with sluice-load `--mix echo=1` (`<id> ECHO <text>`, text sized so the request line is
# about --line-bytes) and its ECHO rate limit lifted; the client is then always sluice-load.
# c-echo gets the very same request lines (`--verbatim-echo`: its `<id> ECHO <text>` reply counts
# as OK), so the client does the same work per line against both servers and drives them at the
# same pace. `--baseline-load raw` gives c-echo bare --line-bytes lines instead (`--raw-echo`):
# a cheaper client, so the C server is measured under a different (faster) load.
#
# Linux only (/proc). Prints a Markdown table; the last line is `ratio=<swift/c>`.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

rounds=4
lines=2000000
connections=16
depth=16
line_bytes=64
client=c-load
baseline_load=verbatim
while (($#)); do
    [[ $# -ge 2 || "$1" == -h || "$1" == --help ]] || { echo "echo-compare: $1 needs a value" >&2; exit 2; }
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --lines) lines="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        --depth) depth="$2"; shift 2 ;;
        --line-bytes) line_bytes="$2"; shift 2 ;;
        --client) client="$2"; shift 2 ;;
        --baseline-load) baseline_load="$2"; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "echo-compare: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ "$baseline_load" == verbatim || "$baseline_load" == raw ]] \
    || { echo "echo-compare: --baseline-load must be verbatim or raw, not $baseline_load" >&2; exit 2; }

"$here/build.sh" >&2
(cd "$root" && swift build -c release --product sluice-echo >&2)
bin="$(cd "$root" && swift build -c release --show-bin-path)"
(cd "$root" && swift build -c release --product sluice-load >&2)

pick_port() {
    # A free TCP port from the kernel (bind to port 0).
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
        || echo $((20000 + RANDOM % 20000))
}
c_port="$(pick_port)"
swift_port="$(pick_port)"
while [[ "$swift_port" == "$c_port" ]]; do swift_port="$(pick_port)"; done

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

"$here/bin/c-echo" --port "$c_port" 2>/dev/null &
c_pid=$!
pids+=("$c_pid")
echo_args=(--port "$swift_port" --http-port 0 --loops 1 --log-level warning)
# The help is read whole: `grep -q` closing the pipe early fails the pipeline under pipefail.
help_text="$("$bin/sluice-echo" --help 2>&1)"
if [[ "$help_text" == *--echo-rate* ]]; then
    echo_args+=(--echo-rate 1000000000 --echo-burst 1000000000)
fi
"$bin/sluice-echo" "${echo_args[@]}" &
swift_pid=$!
pids+=("$swift_pid")

wait_for_port() {
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "echo-compare: nothing listens on port $1" >&2
    return 1
}
wait_for_port "$c_port"
wait_for_port "$swift_port"

probe="$( (printf '0 PING\n'; sleep 0.3) | nc -q1 127.0.0.1 "$swift_port" 2>/dev/null | head -n1 || true)"
protocol=false
if [[ "$probe" == "0 PONG" ]]; then
    protocol=true
    client=sluice-load
fi

ticks_per_second="$(getconf CLK_TCK)"

# "utime stime" of a whole process (all threads), in clock ticks.
cpu_ticks() {
    # Field 2 (comm) may hold spaces: cut everything up to the last ')'.
    local stat
    stat="$(cat "/proc/$1/stat")"
    stat="${stat##*) }"
    # After comm: state is field 3, so utime (14) and stime (15) are the 12th and 13th here.
    awk '{ print $12, $13 }' <<<"$stat"
}

drive() { # port lines -> prints lines_per_second
    local port="$1" count="$2" output mode
    if [[ "$client" == sluice-load ]]; then
        # "<id> ECHO <text>\n" with a 6-7 digit id: text = line bytes - 14.
        local text_bytes="$((line_bytes > 24 ? line_bytes - 14 : 10))"
        if [[ "$protocol" == true && "$port" == "$swift_port" ]]; then
            mode=(--mix echo=1 --echo-bytes "$text_bytes")
        elif [[ "$protocol" == true && "$baseline_load" == verbatim ]]; then
            mode=(--verbatim-echo --echo-bytes "$text_bytes")
        else
            mode=(--raw-echo --line-bytes "$line_bytes")
        fi
        output="$("$bin/sluice-load" --port "$port" "${mode[@]}" --connections "$connections" --depth "$depth" \
            --requests "$count" --quiet)" || { echo "echo-compare: sluice-load failed a check on port $port" >&2; echo "$output" >&2; exit 1; }
        awk -F'throughput=' 'NF>1 { split($2, a, " "); print a[1] }' <<<"$output"
    else
        output="$("$here/bin/c-load" --port "$port" --connections "$connections" --depth "$depth" \
            --line-bytes "$line_bytes" --lines "$count")"
        awk -F'lines_per_second=' 'NF>1 { print $2 }' <<<"$output"
    fi
}

# Warm-up (page faults, buffers, lazy initialisation), not measured.
drive "$c_port" 100000 >/dev/null
drive "$swift_port" 100000 >/dev/null

echo "| round | server | lines | CPU ticks | CPU ns/line | lines/s (client) |"
echo "| --- | --- | ---: | ---: | ---: | ---: |"
total_c=0
total_swift=0
user_c=0
user_swift=0
for round in $(seq 1 "$rounds"); do
    for server in c swift; do
        if [[ "$server" == c ]]; then pid="$c_pid"; port="$c_port"; name="c-echo"
        else pid="$swift_pid"; port="$swift_port"; name="sluice-echo"; fi
        read -r user_before system_before < <(cpu_ticks "$pid")
        rate="$(drive "$port" "$lines")"
        read -r user_after system_after < <(cpu_ticks "$pid")
        user=$((user_after - user_before))
        ticks=$((user + system_after - system_before))
        per_line="$(awk -v t="$ticks" -v hz="$ticks_per_second" -v n="$lines" 'BEGIN { printf "%.1f", t * 1e9 / hz / n }')"
        echo "| $round | $name | $lines | $ticks | $per_line | $rate |"
        if [[ "$server" == c ]]; then
            total_c=$((total_c + ticks)); user_c=$((user_c + user))
        else
            total_swift=$((total_swift + ticks)); user_swift=$((user_swift + user))
        fi
    done
done

all_lines=$((rounds * lines))
awk -v c="$total_c" -v s="$total_swift" -v uc="$user_c" -v us="$user_swift" -v hz="$ticks_per_second" -v n="$all_lines" -v conns="$connections" \
    -v depth="$depth" -v bytes="$line_bytes" -v client="$client" \
    -v proto="$([[ "$protocol" == true ]] && echo "; sluice-echo through the gate: <id> ECHO <text>; c-echo load: $baseline_load")" 'BEGIN {
    printf "\nAll rounds (%d lines each server; %s, %d connections x depth %d, %d-byte lines%s):\n", n, client, conns, depth, bytes, proto
    printf "c-echo      %.1f ns CPU/line (user %.1f, system %.1f)\n", c * 1e9 / hz / n, uc * 1e9 / hz / n, (c - uc) * 1e9 / hz / n
    printf "sluice-echo %.1f ns CPU/line (user %.1f, system %.1f)\n", s * 1e9 / hz / n, us * 1e9 / hz / n, (s - us) * 1e9 / hz / n
    if (c == 0) { print "ratio=undefined (c-echo used no measurable CPU)"; exit 1 }
    printf "ratio=%.3f\n", s / c
}'
