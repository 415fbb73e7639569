#!/usr/bin/env bash
# The load-test script: builds release, starts sluice-echo and the baselines (C
# libevent echo, SwiftNIO echo), runs the scenarios with sluice-load, stops everything it
# started, and writes BENCHMARKS.md (plus latency.png when python3 with matplotlib is there).
#
#   Examples/LoadTest/run.sh [--seconds 10] [--rounds 3] [--out BENCHMARKS.md] [--skip-build]
#
# Scenarios (each table row carries its command):
#   1. ECHO: throughput and server CPU per line, sluice-echo vs c-echo vs nio-echo (one thread
#      each, the same sluice-load requests; the baselines return them verbatim, --verbatim-echo),
#      plus c-echo fed bare lines (--raw-echo), the cheaper client of earlier runs.
#   2. The mixed workload at 50 connections x depth 8.
#   3. Open loop at half the maximum measured in 2, then ECHO alone at that rate against
#      sluice-echo and c-echo: the machine's own latency floor beside ours.
#   4. PAY storm: --dup-ratio 0.5 across 200 connections (zero double charges).
#   5. 1,000,000-key zipf run with the server's RSS before and after.
# Scenarios 2-5 need the line protocol; against a server that only echoes raw lines
# they are reported as skipped.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds=10
rounds=3
out="$root/BENCHMARKS.md"
skip_build=false
while (($#)); do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --skip-build) skip_build=true; shift ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

work="$here/out"
mkdir -p "$work"
rm -f "$work"/*.txt "$work"/*.json "$work"/latency.png
log() { echo "run.sh: $*" >&2; }

# ---------------------------------------------------------------------------------------------
# Build
if [[ "$skip_build" == false ]]; then
    "$root/scripts/install-deps.sh" --runtime
    log "building release (sluice-echo, sluice-load, C baselines, nio-echo)"
    (cd "$root" && swift build -c release --product sluice-echo >&2 && swift build -c release --product sluice-load >&2)
    "$root/Examples/Baselines/build.sh" >&2
    (cd "$root/Examples/Benchmarks" && swift build -c release --scratch-path "$root/.build-bench" --product nio-echo >&2)
fi
bin="$(cd "$root" && swift build -c release --show-bin-path)"
nio_bin="$(cd "$root/Examples/Benchmarks" && swift build -c release --scratch-path "$root/.build-bench" --show-bin-path)"
load="$bin/sluice-load"

# ---------------------------------------------------------------------------------------------
# Servers
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

free_port() {
    local port
    for _ in $(seq 1 50); do
        port=$((20000 + RANDOM % 30000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
    done
    echo "run.sh: no free port found" >&2
    return 1
}

wait_for_port() {
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    log "nothing listens on port $1"
    return 1
}

# utime + stime of a process, in clock ticks.
cpu_ticks() {
    local stat
    stat="$(cat "/proc/$1/stat")"
    stat="${stat##*) }"
    awk '{ print $12 + $13 }' <<<"$stat"
}
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
hz="$(getconf CLK_TCK)"

echo_port="$(free_port)"
echo_args=(--port "$echo_port" --loops 1 --log-level warning)
# With the gate, ECHO has a per-connection rate limit; lift it for throughput runs.
if "$bin/sluice-echo" --help 2>&1 | grep -q -- '--echo-rate'; then
    echo_args+=(--echo-rate 1000000000 --echo-burst 1000000000)
fi
"$bin/sluice-echo" "${echo_args[@]}" &
echo_pid=$!
pids+=("$echo_pid")
c_port="$(free_port)"
"$root/Examples/Baselines/bin/c-echo" --port "$c_port" 2>/dev/null &
c_pid=$!
pids+=("$c_pid")
nio_port="$(free_port)"
"$nio_bin/nio-echo" --port "$nio_port" --threads 1 >/dev/null &
nio_pid=$!
pids+=("$nio_pid")
wait_for_port "$echo_port"
wait_for_port "$c_port"
wait_for_port "$nio_port"

# Does sluice-echo speak the line protocol or echo raw lines?
probe="$( (printf '0 PING\n'; sleep 0.3) | nc -q1 127.0.0.1 "$echo_port" 2>/dev/null | head -n1 || true)"
if [[ "$probe" == "0 PONG" ]]; then protocol=true; else protocol=false; fi
log "sluice-echo answers '0 PING' with '$probe' (line protocol: $protocol)"

# ---------------------------------------------------------------------------------------------
# Helpers: run sluice-load, keep its report, pull figures out of it.
run_load() { # name args... -> report in $work/<name>.txt, JSON in $work/<name>.json
    local name="$1"
    shift
    log "$name: sluice-load $*"
    local status=0
    "$load" "$@" --quiet --json "$work/$name.json" >"$work/$name.txt" 2>&1 || status=$?
    if ((status != 0)); then log "$name: sluice-load exited $status (a check failed or the run broke)"; fi
    return 0
}
figure() { # name key -> value from the report's summary lines (throughput, p50, p99, ...)
    awk -v key="$2" '{ for (i = 1; i <= NF; i++) { if (split($i, kv, "=") == 2 && kv[1] == key) { print kv[2]; exit } } }' "$work/$1.txt"
}
verb_p99() { # name -> "echo 120 · tap 130 · …" (p99 µs per verb, from the report's table)
    awk '$2 == "all" && $1 != "all" { printf "%s%s %s", sep, $1, $6; sep = " · " }' "$work/$1.txt"
}
verdict() { grep -q '^result: PASS' "$work/$1.txt" && echo PASS || echo FAIL; }
command_of() { echo "sluice-load $*"; }

# ---------------------------------------------------------------------------------------------
# 1. ECHO: same load on each server, alternating, server CPU per line from /proc.
echo_common=(--connections 16 --depth 16 --duration "${seconds}s")
declare -A echo_ticks echo_replies echo_seconds echo_check echo_cmd echo_rate echo_cpu
measure_echo() { # round label pid port mode-args...  (round 1 is a warm-up, not counted)
    local round="$1" label="$2" pid="$3" port="$4"
    shift 4
    local before after name="echo-$label-$round"
    before="$(cpu_ticks "$pid")"
    run_load "$name" --port "$port" "${echo_common[@]}" "$@"
    after="$(cpu_ticks "$pid")"
    echo_cmd[$label]="$(command_of --port "<$label>" "${echo_common[@]}" "$@")"
    if ((round == 1)); then return; fi
    local replies elapsed
    replies="$(figure "$name" replies)"
    elapsed="$(figure "$name" elapsed)"
    echo_ticks[$label]=$(( ${echo_ticks[$label]:-0} + after - before ))
    echo_replies[$label]=$(( ${echo_replies[$label]:-0} + ${replies:-0} ))
    echo_seconds[$label]="$(awk -v a="${echo_seconds[$label]:-0}" -v b="${elapsed%s}" 'BEGIN { print a + b }')"
    if [[ "$(verdict "$name")" != PASS || "${echo_check[$label]:-PASS}" != PASS ]]; then echo_check[$label]=FAIL; else echo_check[$label]=PASS; fi
}
# Bare 64-byte lines: about the size of sluice-echo's "<id> ECHO <48 bytes>".
raw_mode=(--raw-echo --line-bytes 64)
if [[ "$protocol" == true ]]; then
    sluice_mode=(--mix echo=1 --echo-bytes 48)
    # The same requests; a baseline's verbatim "<id> ECHO <text>" counts as OK.
    baseline_mode=(--verbatim-echo --echo-bytes 48)
    echo_labels=(sluice-echo c-echo nio-echo c-echo-raw)
else
    sluice_mode=("${raw_mode[@]}")
    baseline_mode=("${raw_mode[@]}")
    echo_labels=(sluice-echo c-echo nio-echo)
fi
# Each server in turn, $rounds times; round 1 is a warm-up, the others are summed.
for round in $(seq 1 "$rounds"); do
    measure_echo "$round" c-echo "$c_pid" "$c_port" "${baseline_mode[@]}"
    measure_echo "$round" sluice-echo "$echo_pid" "$echo_port" "${sluice_mode[@]}"
    measure_echo "$round" nio-echo "$nio_pid" "$nio_port" "${baseline_mode[@]}"
    if [[ "$protocol" == true ]]; then
        measure_echo "$round" c-echo-raw "$c_pid" "$c_port" "${raw_mode[@]}"
    fi
done
for label in "${echo_labels[@]}"; do
    echo_rate[$label]="$(awk -v n="${echo_replies[$label]:-0}" -v s="${echo_seconds[$label]:-0}" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print "n/a" }')"
    echo_cpu[$label]="$(awk -v t="${echo_ticks[$label]:-0}" -v hz="$hz" -v n="${echo_replies[$label]:-0}" 'BEGIN { if (n > 0) printf "%.0f", t * 1e9 / hz / n; else print "n/a" }')"
done

# ---------------------------------------------------------------------------------------------
# 2-5. Protocol scenarios.
mixed_cmd="" open_cmd="" floor_cmd="" storm_cmd="" zipf_cmd=""
if [[ "$protocol" == true ]]; then
    mixed_args=(--port "$echo_port" --connections 50 --depth 8 --duration "${seconds}s" --mix echo=70,tap=10,pay=10,search=10 --keys 10000)
    run_load mixed "${mixed_args[@]}"
    mixed_cmd="$(command_of "${mixed_args[@]}")"
    max_rate="$(figure mixed throughput)"
    half="$(awk -v r="${max_rate:-0}" 'BEGIN { printf "%d", r / 2 }')"
    if ((half > 0)); then
        open_args=(--port "$echo_port" --connections 50 --rate "$half" --duration "${seconds}s" --mix echo=70,tap=10,pay=10,search=10 --keys 10000)
        run_load open-loop "${open_args[@]}"
        open_cmd="$(command_of "${open_args[@]}")"
        floor_args=(--connections 50 --rate "$half" --duration "${seconds}s")
        run_load open-echo-sluice --port "$echo_port" "${floor_args[@]}" "${sluice_mode[@]}"
        run_load open-echo-c --port "$c_port" "${floor_args[@]}" "${baseline_mode[@]}"
        floor_cmd="$(command_of --port "<server>" "${floor_args[@]}" --mix echo=1 --echo-bytes 48) (c-echo: --verbatim-echo)"
    fi
    storm_args=(--port "$echo_port" --connections 200 --depth 4 --duration "${seconds}s" --mix pay=1 --dup-ratio 0.5 --keys 10000)
    run_load pay-storm "${storm_args[@]}"
    storm_cmd="$(command_of "${storm_args[@]}")"
    rss_before="$(rss_kib "$echo_pid")"
    zipf_args=(--port "$echo_port" --connections 50 --depth 8 --duration "${seconds}s" --mix tap=50,pay=25,search=25 --keys 1000000 --key-dist zipf:1.1)
    run_load zipf "${zipf_args[@]}"
    rss_after="$(rss_kib "$echo_pid")"
    zipf_cmd="$(command_of "${zipf_args[@]}")"
fi

# ---------------------------------------------------------------------------------------------
# BENCHMARKS.md
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a > 0) printf "%.2f", a / b; else print "n/a" }'; }
{
    echo "# Benchmarks"
    echo
    echo "Generated by \`Examples/LoadTest/run.sh --seconds $seconds --rounds $rounds\` on $(date -u '+%Y-%m-%d %H:%M UTC'),"
    echo "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(uname -sr)."
    echo "Client and servers share the machine (loopback). Each server runs one event-loop thread."
    echo "Raw reports and JSON: \`Examples/LoadTest/out/\`."
    echo
    echo "## 1. ECHO: throughput and server CPU per line"
    echo
    if [[ "$protocol" == true ]]; then
        echo "Every server gets the same \`<id> ECHO <48 bytes>\` requests from the same client: sluice-echo answers \`<id> OK <text>\` through the gate; the baselines return each line verbatim and the client (\`--verbatim-echo\`) counts \`<id> ECHO <text>\` as OK, so it does the same work per line against all three and drives them at the same pace."
        echo "The last row feeds c-echo bare 64-byte lines (\`--raw-echo\`) instead: the client then does less per line and drives the C server faster. It is there to show how much the load alone moves the figure."
    else
        echo "sluice-echo does not speak the line protocol yet (it answered \`0 PING\` with \`$probe\`): all three servers echo 64-byte raw lines verbatim."
    fi
    echo "Server CPU = utime + stime from \`/proc/<pid>/stat\` over the runs, divided by the replies. The servers take turns (C, Swift, NIO, then C with bare lines) for $rounds rounds of ${seconds}s; round 1 is a warm-up, rounds 2–$rounds are summed."
    echo
    echo "| server | replies/s | server CPU ns/line | vs C (CPU) | vs NIO (throughput) | checks | command |"
    echo "| --- | ---: | ---: | ---: | ---: | --- | --- |"
    for label in "${echo_labels[@]}"; do
        echo "| $label | ${echo_rate[$label]:-n/a} | ${echo_cpu[$label]:-n/a} | $(ratio "${echo_cpu[$label]:-0}" "${echo_cpu[c-echo]:-0}") | $(ratio "${echo_rate[$label]:-0}" "${echo_rate[nio-echo]:-0}") | ${echo_check[$label]:-n/a} | \`${echo_cmd[$label]:-}\` |"
    done
    echo
    echo "Targets: sluice-echo CPU per line ≤ 1.10× c-echo; throughput ≥ 1.0× nio-echo."
    if [[ "$protocol" == true ]]; then
        echo "sluice-echo's CPU per line against c-echo fed bare lines: $(ratio "${echo_cpu[sluice-echo]:-0}" "${echo_cpu[c-echo-raw]:-0}")×."
    fi
    echo
    if [[ "$protocol" != true ]]; then
        echo "## 2–5. Protocol scenarios"
        echo
        echo "Skipped: they need the line protocol (mixed workload, open loop, PAY storm, 1M-key zipf)."
    else
        echo "## 2. Mixed workload, 50 connections × depth 8"
        echo
        echo "| req/s | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs | p99 µs by verb | checks | command |"
        echo "| ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"
        echo "| $(figure mixed throughput) | $(figure mixed p50) | $(figure mixed p90) | $(figure mixed p99) | $(figure mixed p99.9) | $(figure mixed max) | $(verb_p99 mixed) | $(verdict mixed) | \`$mixed_cmd\` |"
        echo
        echo "PAY includes the simulated processor (\`--pay-latency-ms\`, 20 ms) and SEARCH its debounce and search (100 ms quiet + 30 ms) by design, so they dominate the overall tail; closed loop, so slow verbs also hold depth slots."
        echo
        echo "## 3. Open loop at half the maximum"
        echo
        if [[ -n "$open_cmd" ]]; then
            echo "| rate req/s | achieved req/s | p50 µs | p99 µs | p99.9 µs | max µs | p99 µs by verb | checks | command |"
            echo "| ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"
            echo "| $half | $(figure open-loop throughput) | $(figure open-loop p50) | $(figure open-loop p99) | $(figure open-loop p99.9) | $(figure open-loop max) | $(verb_p99 open-loop) | $(verdict open-loop) | \`$open_cmd\` |"
            echo
            echo "Latency from each request's intended send time (no coordinated omission). Target: p99 ≤ 1000 µs — for the verbs that answer at once (ECHO, TAP); PAY and SEARCH carry their simulated 20 ms / 130 ms by design."
            echo
            echo "ECHO alone at the same rate, sluice-echo against the plain C echo (the same requests): what this machine's scheduling adds to any server at this load."
            echo
            echo "| server | achieved req/s | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs | checks |"
            echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
            for name in open-echo-sluice open-echo-c; do
                echo "| ${name#open-echo-} | $(figure "$name" throughput) | $(figure "$name" p50) | $(figure "$name" p90) | $(figure "$name" p99) | $(figure "$name" p99.9) | $(figure "$name" max) | $(verdict "$name") |"
            done
            echo
            echo "Command: \`$floor_cmd\`"
        else
            echo "Not run: scenario 2 measured no throughput."
        fi
        echo
        echo "## 4. PAY storm, --dup-ratio 0.5 across 200 connections"
        echo
        echo "| req/s | p99 µs | checks | command |"
        echo "| ---: | ---: | --- | --- |"
        echo "| $(figure pay-storm throughput) | $(figure pay-storm p99) | $(verdict pay-storm) | \`$storm_cmd\` |"
        echo
        echo '```'
        sed -n '/^payments:/p;/^checks:/,/^result:/p' "$work/pay-storm.txt"
        echo '```'
        echo
        echo "## 5. 1,000,000 keys, zipf"
        echo
        echo "| req/s | p99 µs | server RSS before | after | checks | command |"
        echo "| ---: | ---: | ---: | ---: | --- | --- |"
        echo "| $(figure zipf throughput) | $(figure zipf p99) | $((rss_before / 1024)) MiB | $((rss_after / 1024)) MiB | $(verdict zipf) | \`$zipf_cmd\` |"
    fi
} >"$out.tmp"

# Latency plot (optional).
if command -v python3 >/dev/null 2>&1 && python3 -c 'import matplotlib' 2>/dev/null; then
    # Beside the script, not in the ignored out/, so BENCHMARKS.md's link works once committed.
    python3 "$here/plot.py" "$work" "$here/latency.png" && {
        echo
        echo "![latency percentiles](Examples/LoadTest/latency.png)"
    } >>"$out.tmp" || log "plot failed"
else
    log "matplotlib not installed: no latency plot"
fi
mv "$out.tmp" "$out"
log "wrote $out"
