#!/usr/bin/env bash
# HTTP comparison: POST /tap/<key> on sluice-echo's HTTP front (--loops 1), nginx's limit_req
# (Debian's nginx, one process, keyed by $uri, one request per window), the plain C evhttp
# server (evhttp-tap; again with --changelist, on an event base configured like sluice-echo's)
# and the Hummingbird 2 server (hummingbird-tap --threads 1), driven one after the other by the
# same wrk load for the same time.
#
#   Examples/Benchmarks/http-compare.sh [--seconds 10] [--rounds 3] [--warmup 2]
#       [--connections 50] [--window-ms 1000] [--out-dir Examples/LoadTest/out] [--skip-build]
#       [--sluice-echo <path>]   (default: the root package's release build)
#
# Load: wrk -t1 -c<connections> -d<seconds>s --latency -s Examples/LoadTest/wrk/tap.lua; every
# request is POST /tap/k<0..99999> with an empty body; 200 (ran) and 429 (throttled) answers
# are counted, any other status is an error. Before the load, each server is asked to tap one
# key twice: it must answer 200 then 429. Each server is started once (a fresh process on a
# free port), gets --warmup seconds of the same load (not counted), then the rounds take the
# servers in turn, --rounds times. req/s, p50 and p99 = the median of the rounds' figures;
# server CPU = utime + stime from /proc/<pid>/stat over the measured
# runs, per request and as a share of one core (over 100%: more than one thread worked); other
# CPU = the machine's busy time (/proc/stat) less the server's and wrk's: the kernel's loopback
# work and whatever else ran, so a disturbed run shows.
# Hummingbird runs its handlers on Swift Concurrency's global executor, threads of its own
# besides the event loop: a second row, hummingbird-tap --handlers-on-loops, keeps it all on
# its one loop thread.
#
# nginx runs with a configuration this script writes to --out-dir (master_process off: one
# process, so its CPU is the one measured; limit_req_status 429); it is installed by
# scripts/install-deps.sh --bench, and skipped with a note when missing.
# Builds first (release; --skip-build uses what is built): the C baselines
# (Examples/Baselines/build.sh), hummingbird-tap (this package, scratch path ../../.build-bench)
# and sluice-echo (the root package). A sluice-echo whose --help has no --http-port is skipped
# with a message. Prints a Markdown table (each row with its commands) and the ratios
# sluice/C and sluice/Hummingbird on stdout; wrk's reports stay in --out-dir (gitignored).
# Every server it starts is stopped on exit. Linux only (/proc).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds=10
rounds=3
warmup=2
connections=50
window_ms=1000
out_dir="$root/Examples/LoadTest/out"
skip_build=false
sluice_bin=""
while (($#)); do
    case "$1" in
        --seconds | --rounds | --warmup | --connections | --window-ms | --out-dir | --sluice-echo)
            [[ $# -ge 2 ]] || { echo "http-compare: $1 needs a value" >&2; exit 2; }
            case "$1" in
                --seconds) seconds="$2" ;;
                --rounds) rounds="$2" ;;
                --warmup) warmup="$2" ;;
                --connections) connections="$2" ;;
                --window-ms) window_ms="$2" ;;
                --out-dir) out_dir="$2" ;;
                --sluice-echo) sluice_bin="$2" ;;
            esac
            shift 2 ;;
        --skip-build) skip_build=true; shift ;;
        -h | --help) sed -n '2,34p' "$0"; exit 0 ;;
        *) echo "http-compare: unknown option $1" >&2; exit 2 ;;
    esac
done
for value in "$seconds" "$rounds" "$connections" "$window_ms"; do
    [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "http-compare: $value is not a positive whole number" >&2; exit 2; }
done
[[ "$warmup" =~ ^[0-9]+$ ]] || { echo "http-compare: --warmup takes whole seconds" >&2; exit 2; }
log() { echo "http-compare: $*" >&2; }

# ---------------------------------------------------------------------------------------------
# Build
if [[ "$skip_build" == false ]]; then
    "$root/scripts/install-deps.sh" --bench
    "$root/Examples/Baselines/build.sh" >&2
    log "building release hummingbird-tap (and sluice-echo unless --sluice-echo names one)"
    (cd "$here" && swift build -c release --scratch-path "$root/.build-bench" --product hummingbird-tap >&2)
    if [[ -z "$sluice_bin" ]]; then (cd "$root" && swift build -c release --product sluice-echo >&2); fi
fi
command -v wrk >/dev/null 2>&1 || { log "wrk is not installed (scripts/install-deps.sh --bench installs it)"; exit 1; }
lua="$root/Examples/LoadTest/wrk/tap.lua"
c_bin="$root/Examples/Baselines/bin/evhttp-tap"
hb_bin="$(cd "$here" && swift build -c release --scratch-path "$root/.build-bench" --show-bin-path)/hummingbird-tap"
if [[ -z "$sluice_bin" ]]; then sluice_bin="$(cd "$root" && swift build -c release --show-bin-path)/sluice-echo"; fi
mkdir -p "$out_dir"
rm -f "$out_dir"/http-*.txt "$out_dir"/http-*.log

# ---------------------------------------------------------------------------------------------
# Servers
declare -A pid port shown note
pids=()
cleanup() {
    local started
    for started in "${pids[@]}"; do kill "$started" 2>/dev/null || true; done
    for started in "${pids[@]}"; do wait "$started" 2>/dev/null || true; done
    pids=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    # A port the kernel hands out for 127.0.0.1 (bind to 0), else a random one that refuses.
    if python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null; then
        return
    fi
    local candidate
    for _ in $(seq 1 50); do
        candidate=$((20000 + RANDOM % 30000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then echo "$candidate"; return; fi
    done
    log "no free port found"
    return 1
}

wait_for_port() { # port pid
    for _ in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        kill -0 "$2" 2>/dev/null || { log "the server (pid $2) exited before listening on $1"; return 1; }
        sleep 0.05
    done
    log "nothing listens on port $1"
    return 1
}

start() { # label port-to-load shown-command command...
    local label="$1" listen="$2" text="$3"
    shift 3
    log "$label: $*"
    "$@" >"$out_dir/http-$label-server.log" 2>&1 &
    local started=$!
    pids+=("$started")
    if wait_for_port "$listen" "$started"; then
        pid[$label]=$started
        port[$label]=$listen
        shown[$label]="$text"
    else
        note[$label]="not run, the server did not start: see \`$out_dir/http-$label-server.log\`"
    fi
}

labels=(sluice-echo nginx-limit-req evhttp-tap evhttp-tap-changelist hummingbird-tap hummingbird-tap-on-loop)

# nginx's limit_req, configured for the same job: one request per --window-ms per URI, 429 past
# it, 200 with a small JSON body otherwise. A `return` in the location would answer before the
# limiter runs (rewrite comes before preaccess), so the limited location hands the request to a
# named location that answers.
nginx_bin="$(command -v nginx || true)"
[[ -n "$nginx_bin" ]] || { [[ -x /usr/sbin/nginx ]] && nginx_bin=/usr/sbin/nginx; }
if [[ -n "$nginx_bin" ]]; then
    p="$(free_port)"
    nginx_dir="$out_dir/nginx"
    mkdir -p "$nginx_dir"
    if ((window_ms % 1000 == 0 && window_ms / 1000 == 1)); then rate="1r/s"; else rate="$((60000 / window_ms))r/m"; fi
    cat >"$nginx_dir/nginx.conf" <<NGINX
master_process off;
daemon off;
worker_processes 1;
pid $nginx_dir/nginx.pid;
error_log $nginx_dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $nginx_dir/body;
    proxy_temp_path $nginx_dir/proxy;
    fastcgi_temp_path $nginx_dir/fastcgi;
    uwsgi_temp_path $nginx_dir/uwsgi;
    scgi_temp_path $nginx_dir/scgi;
    limit_req_zone \$uri zone=tap:64m rate=$rate;
    limit_req_status 429;
    limit_req_log_level info;
    server {
        listen 127.0.0.1:$p;
        root $nginx_dir;
        location /tap/ {
            limit_req zone=tap;
            try_files /no-such-file @tap;
        }
        location @tap {
            default_type application/json;
            return 200 '{"tap":1}';
        }
    }
}
NGINX
    start nginx-limit-req "$p" "nginx -c <out-dir>/nginx/nginx.conf (limit_req keyed by \$uri, $rate, master_process off)" \
        "$nginx_bin" -c "$nginx_dir/nginx.conf" -p "$nginx_dir"
else
    note[nginx-limit-req]="skipped, nginx is not installed: scripts/install-deps.sh --bench installs it"
fi

if [[ ! -x "$sluice_bin" ]]; then
    note[sluice-echo]="skipped, \`$sluice_bin\` is not built"
elif [[ "$("$sluice_bin" --help 2>&1 || true)" != *--http-port* ]]; then
    note[sluice-echo]="skipped, this sluice-echo has no \`--http-port\`: no HTTP front yet"
else
    http_port="$(free_port)"
    start sluice-echo "$http_port" \
        "sluice-echo --loops 1 --port <free> --http-port <port> --tap-window-ms $window_ms --log-level warning" \
        "$sluice_bin" --loops 1 --port "$(free_port)" --http-port "$http_port" --tap-window-ms "$window_ms" --log-level warning
fi
if [[ -x "$c_bin" ]]; then
    p="$(free_port)"
    start evhttp-tap "$p" "evhttp-tap --port <port> --window-ms $window_ms" "$c_bin" --port "$p" --window-ms "$window_ms"
    p="$(free_port)"
    start evhttp-tap-changelist "$p" "evhttp-tap --port <port> --window-ms $window_ms --changelist" \
        "$c_bin" --port "$p" --window-ms "$window_ms" --changelist
else
    note[evhttp-tap]="skipped, \`$c_bin\` is not built: Examples/Baselines/build.sh builds it"
    note[evhttp-tap-changelist]="${note[evhttp-tap]}"
fi
if [[ -x "$hb_bin" ]]; then
    p="$(free_port)"
    start hummingbird-tap "$p" "hummingbird-tap --port <port> --window-ms $window_ms --threads 1" \
        "$hb_bin" --port "$p" --window-ms "$window_ms" --threads 1
    p="$(free_port)"
    start hummingbird-tap-on-loop "$p" "hummingbird-tap --port <port> --window-ms $window_ms --threads 1 --handlers-on-loops" \
        "$hb_bin" --port "$p" --window-ms "$window_ms" --threads 1 --handlers-on-loops
else
    note[hummingbird-tap]="skipped, \`$hb_bin\` is not built"
    note[hummingbird-tap-on-loop]="${note[hummingbird-tap]}"
fi
for label in "${labels[@]}"; do
    if [[ -n "${note[$label]:-}" ]]; then log "$label ${note[$label]}"; fi
done

# Each server must be a limiter: one key tapped twice in a window is answered 200, then 429.
declare -A twice
for label in "${labels[@]}"; do
    [[ -n "${pid[$label]:-}" ]] || continue
    first="$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:${port[$label]}/tap/twice-check" || true)"
    second="$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:${port[$label]}/tap/twice-check" || true)"
    twice[$label]="$first then $second"
    if [[ "$first" != 200 || "$second" != 429 ]]; then log "$label: a key tapped twice got $first then $second, not 200 then 429"; fi
done

# ---------------------------------------------------------------------------------------------
# Runs
cpu_ticks() { # pid -> utime + stime in clock ticks
    local stat
    stat="$(cat "/proc/$1/stat")"
    stat="${stat##*) }"
    awk '{ print $12 + $13 }' <<<"$stat"
}
machine_ticks() { # -> busy clock ticks of the whole machine (all but idle and iowait)
    awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}
children_ticks() { # -> utime + stime of this script's finished children (wrk among them)
    local stat
    stat="$(cat /proc/$$/stat)"
    stat="${stat##*) }"
    awk '{ print $14 + $15 }' <<<"$stat"
}
hz="$(getconf CLK_TCK)"
field() { # file key -> value from tap.lua's closing "tap: key=value ..." line
    awk -v key="$2" '/^tap: / { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) { print kv[2]; exit } } }' "$1"
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

wrk_args=(-t1 "-c$connections" "-d${seconds}s" --latency -s "$lua")
wrk_shown="wrk -t1 -c$connections -d${seconds}s --latency -s Examples/LoadTest/wrk/tap.lua http://127.0.0.1:<port>/"
declare -A requests elapsed ticks others ok throttled errors p50s p99s rounds_rps
for label in "${labels[@]}"; do
    [[ -n "${pid[$label]:-}" ]] || continue
    if ((warmup > 0)); then
        log "$label: warm-up ${warmup}s"
        wrk -t1 "-c$connections" "-d${warmup}s" -s "$lua" "http://127.0.0.1:${port[$label]}/" >"$out_dir/http-$label-warmup.txt" 2>&1 || true
    fi
done
for round in $(seq 1 "$rounds"); do
    for label in "${labels[@]}"; do
        [[ -n "${pid[$label]:-}" ]] || continue
        report="$out_dir/http-$label-$round.txt"
        log "$label: round $round: wrk ${wrk_args[*]} http://127.0.0.1:${port[$label]}/"
        machine_before="$(machine_ticks)"
        children_before="$(children_ticks)"
        before="$(cpu_ticks "${pid[$label]}")"
        wrk "${wrk_args[@]}" "http://127.0.0.1:${port[$label]}/" >"$report" 2>&1 || log "$label: wrk failed (see $report)"
        after="$(cpu_ticks "${pid[$label]}")"
        children_after="$(children_ticks)"
        machine_after="$(machine_ticks)"
        n="$(field "$report" requests)"
        if [[ -z "$n" ]]; then
            log "$label: no result line in $report"
            continue
        fi
        requests[$label]=$((${requests[$label]:-0} + n))
        rounds_rps[$label]="${rounds_rps[$label]:-} $(field "$report" rps)"
        elapsed[$label]="$(awk -v a="${elapsed[$label]:-0}" -v b="$(field "$report" seconds)" 'BEGIN { print a + b }')"
        ticks[$label]=$((${ticks[$label]:-0} + after - before))
        # Everything but this server and wrk: kernel network work, and whatever else runs.
        others[$label]=$((${others[$label]:-0} + (machine_after - machine_before) - (after - before) - (children_after - children_before)))
        ok[$label]=$((${ok[$label]:-0} + $(field "$report" ok)))
        throttled[$label]=$((${throttled[$label]:-0} + $(field "$report" throttled)))
        errors[$label]=$((${errors[$label]:-0} + $(field "$report" other) + $(field "$report" socket_errors)))
        p50s[$label]="${p50s[$label]:-} $(field "$report" p50_us)"
        p99s[$label]="${p99s[$label]:-} $(field "$report" p99_us)"
    done
done
cleanup

# ---------------------------------------------------------------------------------------------
# Report (Markdown on stdout)
declare -A rps p50 p99 cpu share other
for label in "${labels[@]}"; do
    [[ -n "${requests[$label]:-}" ]] || continue
    rps[$label]="$(median <<<"${rounds_rps[$label]}")"
    p50[$label]="$(median <<<"${p50s[$label]}")"
    p99[$label]="$(median <<<"${p99s[$label]}")"
    cpu[$label]="$(awk -v t="${ticks[$label]}" -v hz="$hz" -v n="${requests[$label]}" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')"
    share[$label]="$(awk -v t="${ticks[$label]}" -v hz="$hz" -v s="${elapsed[$label]}" 'BEGIN { printf "%.0f%%", t * 100 / hz / s }')"
    # (Tick-granular counters: a quiet run may come out a little below zero.)
    other[$label]="$(awk -v t="${others[$label]}" -v hz="$hz" -v s="${elapsed[$label]}" 'BEGIN { v = t * 100 / hz / s; printf "%.0f%%", (v > 0 ? v : 0) }')"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "n/a" }'; }
lower_p99() { # label -> yes/no/n/a: is sluice-echo's p99 lower than that server's?
    if [[ -n "${p99[sluice-echo]:-}" && -n "${p99[$1]:-}" ]]; then
        local ours="${p99[sluice-echo]}" theirs="${p99[$1]}"
        if ((ours < theirs)); then echo yes; else echo no; fi
    else
        echo n/a
    fi
}

echo "Each server is a fresh process with one event-loop thread, started once and warmed up for ${warmup}s (not counted); then the servers take turns, $rounds round(s) of \`$wrk_shown\`. Every request is \`POST /tap/k<0..99999>\` with an empty body; a key tapped again less than $window_ms ms after its last run gets 429. req/s over all rounds; p50 and p99 are the medians of the rounds' figures; server CPU = utime + stime from \`/proc/<pid>/stat\` over the measured runs, per request and as a share of one core; other CPU = the machine's busy time (\`/proc/stat\`) less the server's and wrk's, as a share of one core: the kernel's loopback work, and whatever else ran (a high figure marks a disturbed run). Errors = statuses other than 200 and 429, plus socket errors. hummingbird-tap runs its handlers as tasks on Swift Concurrency's global executor, threads besides its loop (hence a share over 100%); hummingbird-tap-on-loop (\`--handlers-on-loops\`) runs them on its one loop thread. sluice-echo's loops batch their epoll changes (libevent's changelist, \`EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST\`); evhttp-tap runs on libevent's default base, as a plain server does, and evhttp-tap-changelist (\`--changelist\`) is the same C server on a base like sluice-echo's."
echo
echo "| server | req/s | p50 µs | p99 µs | server CPU µs/req | server CPU | other CPU | 200 | 429 | errors | one key twice | command |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
for label in "${labels[@]}"; do
    if [[ -n "${rps[$label]:-}" ]]; then
        echo "| $label | ${rps[$label]} | ${p50[$label]} | ${p99[$label]} | ${cpu[$label]} | ${share[$label]} | ${other[$label]} | ${ok[$label]} | ${throttled[$label]} | ${errors[$label]} | ${twice[$label]:-} | \`${shown[$label]}\`; \`$wrk_shown\` |"
    else
        echo "| $label | — | — | — | — | — | — | — | — | — | — | ${note[$label]:-no result (see the log)} |"
    fi
done
echo
echo "Against nginx limit_req: throughput $(ratio "${rps[sluice-echo]:-0}" "${rps[nginx-limit-req]:-0}") (target ≥ 0.85), p99 $(ratio "${p99[sluice-echo]:-0}" "${p99[nginx-limit-req]:-0}") (target ≤ 1.2), server CPU per request $(ratio "${cpu[sluice-echo]:-0}" "${cpu[nginx-limit-req]:-0}")."
echo "Throughput sluice/C: $(ratio "${rps[sluice-echo]:-0}" "${rps[evhttp-tap]:-0}") (target ≥ 1.1) · sluice/Hummingbird: $(ratio "${rps[sluice-echo]:-0}" "${rps[hummingbird-tap]:-0}") (target ≥ 1.0, with a lower p99: $(lower_p99 hummingbird-tap)) · sluice/Hummingbird with its handlers on the loop: $(ratio "${rps[sluice-echo]:-0}" "${rps[hummingbird-tap-on-loop]:-0}") (lower p99: $(lower_p99 hummingbird-tap-on-loop))."
echo "Against the C server on a base like sluice-echo's (epoll changelist): throughput $(ratio "${rps[sluice-echo]:-0}" "${rps[evhttp-tap-changelist]:-0}"), p99 lower: $(lower_p99 evhttp-tap-changelist)."
echo "Server CPU per request, sluice/C: $(ratio "${cpu[sluice-echo]:-0}" "${cpu[evhttp-tap]:-0}") · sluice/C with the changelist: $(ratio "${cpu[sluice-echo]:-0}" "${cpu[evhttp-tap-changelist]:-0}") · sluice/Hummingbird: $(ratio "${cpu[sluice-echo]:-0}" "${cpu[hummingbird-tap]:-0}")."
if [[ -z "${rps[sluice-echo]:-}" ]]; then
    echo
    echo "No ratio without sluice-echo (${note[sluice-echo]:-no result, see the log})."
fi
