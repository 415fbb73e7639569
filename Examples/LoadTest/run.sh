#!/usr/bin/env bash
# The load-test script: builds release, starts sluice-echo and the baselines (C
# libevent echo, SwiftNIO echo), runs the scenarios with sluice-load, stops everything it
# started, and writes BENCHMARKS.md (plus latency.png when python3 with matplotlib is there).
#
#   Examples/LoadTest/run.sh [--seconds 10] [--rounds 3] [--out BENCHMARKS.md] [--skip-build]
#       [--only http|eviction]
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
#   6. HTTP: POST /tap/<key> with wrk (Examples/LoadTest/wrk/tap.lua) against sluice-echo's HTTP
#      front, nginx's limit_req, the C evhttp server (evhttp-tap) and the Hummingbird 2 server
#      (hummingbird-tap), one after the other (Examples/Benchmarks/http-compare.sh does the run).
#   7. Eviction: a key throttled and a key limited, then 1,000,000 never-seen keys (one LIMIT and
#      one TAP each) through 16 MiB tables that remember what they evict (eviction.py), then
#      the two again; with the GateBenchmarks figures of a decision at a million keys.
# Scenarios 2-5 need the line protocol; against a server that only echoes raw lines
# they are reported as skipped; scenario 6 skips sluice-echo when it has no --http-port.
# --only http (or eviction) runs scenario 6 (or 7) alone and replaces its section in --out (the
# others stay).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds=10
rounds=3
out="$root/BENCHMARKS.md"
skip_build=false
only=""
while (($#)); do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --skip-build) skip_build=true; shift ;;
        --only) only="$2"; shift 2 ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

case "$only" in
    "" | http | eviction) ;;
    *) echo "run.sh: --only takes http or eviction, not $only" >&2; exit 2 ;;
esac

work="$here/out"
mkdir -p "$work"
log() { echo "run.sh: $*" >&2; }

# ---------------------------------------------------------------------------------------------
# 6. HTTP: POST /tap/<key> (wrk), the section's Markdown on stdout.
http_section() { # extra http-compare.sh options...
    local table
    table="$("$root/Examples/Benchmarks/http-compare.sh" --seconds "$seconds" --rounds "$rounds" --out-dir "$work" "$@")" \
        || table="Not run: \`Examples/Benchmarks/http-compare.sh\` failed (its messages are in the log of this run)."
    echo "## 6. HTTP: POST /tap/<key>"
    echo
    echo "sluice-echo's HTTP front (\`--loops 1\`) against nginx's \`limit_req\` (Debian's nginx, one process, keyed by \`\$uri\`; \`scripts/install-deps.sh --bench\` installs it), the plain C server on libevent's \`evhttp\` (\`Examples/Benchmarks/Baselines/evhttp_tap.c\`; once more with \`--changelist\`, on an event base configured like sluice-echo's) and a Hummingbird 2 server (\`hummingbird-tap\` in \`Examples/Benchmarks\`); all of them answer the route with the same per-key throttle (one request per key per window, 429 beyond it). Run alone: \`Examples/LoadTest/run.sh --only http --seconds $seconds --rounds $rounds\` (or \`Examples/Benchmarks/http-compare.sh --seconds $seconds --rounds $rounds\`, which prints the table)."
    echo
    echo "$table"
}

# ---------------------------------------------------------------------------------------------
# 7. Eviction: a fresh sluice-echo whose TAP and LIMIT tables remember what they evict, flooded
# with never-seen keys (eviction.py); then the GateBenchmarks of a decision at a million keys.
# The section's Markdown on stdout.
eviction_section() { # sluice-echo binary
    local port pid result status=0
    port="$(free_port)"
    local args=(--loops 1 --port "$port" --log-level warning
        --limit-rate 1 --limit-period-ms 60000 --limit-burst 0 --limit-table-mib 16 --limit-when-full remember
        --tap-window-ms 60000 --tap-table-mib 16 --tap-tally-mib 16 --tap-when-full remember)
    "$1" "${args[@]}" >"$work/eviction-server.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    wait_for_port "$port"
    result="$(python3 "$here/eviction.py" --port "$port" --pid "$pid" --keys 1000000 --budget-mib 48)" || status=$?
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "## 7. Eviction: 1,000,000 new keys through tables that remember what they evict"
    echo
    echo "A fresh \`sluice-echo ${args[*]/$port/<port>}\`: 16 MiB for each table (seven eighths of it for the summary of the keys it evicts, a cuckoo filter of 4 bytes a key; an eighth, about 170,000 keys, for exact states), 60 s for a key's restriction. One key is throttled and one limited; then one \`LIMIT\` and one \`TAP\` for each of 1,000,000 never-seen keys over 16 pipelined connections (\`Examples/LoadTest/eviction.py\`); then the two keys again. Every new key is new, so the exact limiter would let each one through: a refused one is the summary's error (goal: at most 0.1 %). The victims must still be refused after the flood."
    echo
    echo "$result"
    if ((status != 0)); then echo; echo "eviction.py exited $status."; fi
    echo
    echo "A decision at a million keys (GateBenchmarks, \`swift package benchmark --target GateBenchmarks --filter '1,000,000'\` in \`Examples/Benchmarks\`; medians, ns per decision): a key in the table, and a key mostly answered by a 16 MiB remembering table's summary."
    echo
    echo "| benchmark | p50 ns | p90 ns | allocations |"
    echo "| --- | ---: | ---: | ---: |"
    # One row per benchmark from package-benchmark's Markdown: its name, the wall-clock p50 and
    # p90 and the mallocs' p50.
    (cd "$root/Examples/Benchmarks" && swift package --scratch-path "$root/.build-bench" --disable-sandbox benchmark \
        --target GateBenchmarks --filter '.*1,000,000.*' --format markdown --no-progress 2>/dev/null \
        | awk -F'|' '
            /^### / { name = substr($0, 5); next }
            /Malloc \(total\)/ { gsub(/ /, "", $5); mallocs = $5 }
            /Time \(wall clock\)/ { gsub(/ /, "", $5); gsub(/ /, "", $6); print "| " name " | " $5 " | " $6 " | " mallocs " |" }') \
        || echo "Not run: the benchmark failed."
}

# Replaces section $1 of $out (up to the next numbered section or the latency plot) with the file
# $2, or adds it.
replace_section() { # number file
    if [[ ! -f "$out" ]]; then printf '# Benchmarks\n' >"$out"; fi
    awk -v section="$2" -v number="$1" '
        function put() { while ((getline line < section) > 0) print line; close(section); print ""; done = 1 }
        index($0, "## " number ".") == 1 { put(); skipping = 1; next }
        skipping && (/^## [0-9]/ || /^!\[/) { skipping = 0 }
        skipping { next }
        /^!\[/ && !done { put() }
        { print }
        END { if (!done) { print ""; put() } }
    ' "$out" >"$out.tmp"
    mv "$out.tmp" "$out"
    log "wrote section $1 of $out"
}

if [[ "$only" == http ]]; then
    build_args=()
    if [[ "$skip_build" == true ]]; then build_args=(--skip-build); fi
    section="$work/http-section.md"
    {
        http_section "${build_args[@]}"
        echo
        echo "Generated by \`Examples/LoadTest/run.sh --only http --seconds $seconds --rounds $rounds\` on $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores."
    } >"$section"
    replace_section 6 "$section"
    exit 0
fi
# (--only eviction keeps the reports of the last full run, and builds what it needs itself.)
if [[ -z "$only" ]]; then rm -f "$work"/*.txt "$work"/*.json "$work"/*.log "$work"/*.md "$work"/latency.png; fi

# ---------------------------------------------------------------------------------------------
# Build
if [[ "$skip_build" == false && -z "$only" ]]; then
    "$root/scripts/install-deps.sh" --bench
    log "building release (sluice-echo, sluice-load, C baselines, nio-echo, hummingbird-tap)"
    (cd "$root" && swift build -c release --product sluice-echo >&2 && swift build -c release --product sluice-load >&2)
    "$root/Examples/Baselines/build.sh" >&2
    (cd "$root/Examples/Benchmarks" && swift build -c release --scratch-path "$root/.build-bench" --product nio-echo >&2 \
        && swift build -c release --scratch-path "$root/.build-bench" --product hummingbird-tap >&2)
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

if [[ "$only" == eviction ]]; then
    if [[ "$skip_build" == false ]]; then
        (cd "$root" && swift build -c release --product sluice-echo >&2)
        (cd "$root/Examples/Benchmarks" && swift build -c release --scratch-path "$root/.build-bench" --target GateBenchmarks >&2)
    fi
    section="$work/eviction-section.md"
    {
        eviction_section "$(cd "$root" && swift build -c release --show-bin-path)/sluice-echo"
        echo
        echo "Generated by \`Examples/LoadTest/run.sh --only eviction\` on $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores."
    } >"$section"
    replace_section 7 "$section"
    exit 0
fi

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
# (Read whole: under pipefail, `--help | grep -q` fails when grep's early exit stops the writer.)
echo_help="$("$bin/sluice-echo" --help 2>&1 || true)"
# With the gate, ECHO has a per-connection rate limit; lift it for throughput runs.
if [[ "$echo_help" == *--echo-rate* ]]; then
    echo_args+=(--echo-rate 1000000000 --echo-burst 1000000000)
fi
# Its HTTP front (scenario 6 starts a sluice-echo of its own) stays off here.
if [[ "$echo_help" == *--http-port* ]]; then
    echo_args+=(--http-port 0)
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
# 6. HTTP: stop the servers above, then a fresh server of each kind, one at a time.
cleanup
pids=()
http_section --skip-build >"$work/http-section.md"
eviction_section "$bin/sluice-echo" >"$work/eviction-section.md"

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
    echo
    cat "$work/http-section.md"
    echo
    cat "$work/eviction-section.md"
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
