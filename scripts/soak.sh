#!/usr/bin/env bash
# Soak: a release sluice-echo under sluice-load's mixed workload (open loop) for a fixed time,
# sampling the server's RSS and descriptors. Passes when the RSS at the end is less than 5%
# above the RSS once warmed up, the descriptors return to their count before the load, and
# sluice-load's checks pass (every request answered, no unexpected error, exactly one charge
# per (key, idem) pair: no double charge). Linux only (reads /proc).
#
#   scripts/soak.sh                 # 10 minutes, 2 of them warm-up
#   scripts/soak.sh 3 1             # 3 minutes, 1 of warm-up
#   SOAK_RATE=40000 scripts/soak.sh # requests per second (default 20000)
#
# Payment records are kept 30 s (--pay-retention-s) so the payment table reaches its steady size
# within the warm-up, as every other table does; with the default 24 h retention it would grow
# for a day, by design, up to its budget.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes="${1:-10}"
warmup_minutes="${2:-2}"
rate="${SOAK_RATE:-20000}"
if ! [[ "$minutes" =~ ^[0-9]+$ && "$warmup_minutes" =~ ^[0-9]+$ ]] || (( warmup_minutes >= minutes )); then
    echo "usage: scripts/soak.sh [minutes] [warm-up minutes, fewer than minutes]" >&2
    exit 2
fi

scratch=.build-soak
swift build -c release --product sluice-echo --scratch-path "$scratch"
swift build -c release --product sluice-load --scratch-path "$scratch"
bin="$(swift build -c release --scratch-path "$scratch" --show-bin-path)"

work="$(mktemp -d "${TMPDIR:-/tmp}/sluice-soak.XXXXXX")"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$bin/sluice-echo" --port "$port" --http-port 0 --pay-retention-s 30 >"$work/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$server/status"; }
fds() { ls "/proc/$server/fd" | wc -l; }

for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    sleep 0.1
done
fds_before="$(fds)"
rss_start="$(rss_kib)"
echo "soak: sluice-echo pid $server on port $port; ${minutes} min at ${rate} req/s, ${warmup_minutes} min warm-up"
echo "soak: before the load: RSS $((rss_start / 1024)) MiB, $fds_before descriptors"

"$bin/sluice-load" --port "$port" --connections 32 --loops 2 --rate "$rate" --duration "${minutes}m" \
    --mix echo=40,tap=20,pay=20,search=20 --keys 10000 --dup-ratio 0.2 --quiet \
    --json "$work/load.json" >"$work/load.txt" 2>&1 &
load=$!

started=$SECONDS
rss_warm=""
rss_peak=0
samples="$work/samples.txt"
while kill -0 "$load" 2>/dev/null; do
    sleep 5
    elapsed=$((SECONDS - started))
    rss="$(rss_kib)"
    echo "$elapsed $rss $(fds)" >>"$samples"
    if [[ -z "$rss_warm" ]] && (( elapsed >= warmup_minutes * 60 )); then
        rss_warm="$rss"
        echo "soak: warmed up at ${elapsed}s: RSS $((rss / 1024)) MiB"
    fi
    if [[ -n "$rss_warm" ]] && (( rss > rss_peak )); then rss_peak="$rss"; fi
    if (( elapsed % 60 < 5 )); then echo "soak: ${elapsed}s RSS $((rss / 1024)) MiB, $(fds) descriptors"; fi
done
load_status=0
wait "$load" || load_status=$?
rss_end="$(awk 'END { print $2 }' "$samples")"

# The load's connections have closed: the descriptors come back (polled, as closes are async).
fds_after="$(fds)"
for _ in $(seq 1 50); do
    (( fds_after <= fds_before )) && break
    sleep 0.1
    fds_after="$(fds)"
done

failed=0
echo
tail -n 40 "$work/load.txt"
echo
growth="$(awk -v a="$rss_warm" -v b="$rss_end" 'BEGIN { printf "%.2f", (b - a) * 100 / a }')"
echo "soak: RSS start $((rss_start / 1024)) MiB, after warm-up $((rss_warm / 1024)) MiB, end $((rss_end / 1024)) MiB (growth ${growth}%), peak after warm-up $((rss_peak / 1024)) MiB"
echo "soak: descriptors before $fds_before, after $fds_after"
if awk -v g="$growth" 'BEGIN { exit !(g >= 5) }'; then echo "soak: FAIL: RSS grew ${growth}% after warm-up (limit 5%)"; failed=1; fi
if (( fds_after > fds_before )); then echo "soak: FAIL: $((fds_after - fds_before)) descriptors leaked"; failed=1; fi
if (( load_status != 0 )); then echo "soak: FAIL: sluice-load's checks failed (exit $load_status)"; failed=1; fi
if ! kill -0 "$server" 2>/dev/null; then echo "soak: FAIL: the server exited"; failed=1; fi
(( failed == 0 )) && echo "soak: PASS"
exit $failed
