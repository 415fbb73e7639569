#!/usr/bin/env bash
# Compares two builds of gate-profile on one path, side by side in one run: the two binaries
# run alternately, `rounds` times each, pinned to one CPU when `taskset` is there, and the
# script prints each one's fastest and median time per request and the candidate's ratios.
#
# On a shared machine the noise only ever adds time, and it changes within minutes: the
# fastest of alternating runs is the steadiest figure, and only a ratio of two builds measured
# in the same stretch means anything.
#
# Usage: gate-profile-compare.sh BASELINE CANDIDATE [MODE] [COUNT] [ROUNDS]
#   BASELINE, CANDIDATE  gate-profile binaries (copy each build's .build/release/gate-profile)
#   MODE                 a gate-profile mode (default: chain)
#   COUNT                requests per run (default: 1000000)
#   ROUNDS               runs of each binary (default: 9)
set -euo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
baseline=$1
candidate=$2
mode=${3:-chain}
count=${4:-1000000}
rounds=${5:-9}
for binary in "$baseline" "$candidate"; do
    [ -x "$binary" ] || { echo "error: $binary is not an executable" >&2; exit 2; }
done
pin=()
if command -v taskset > /dev/null; then pin=(taskset -c "$(( $(nproc) - 1 ))"); fi

# Prints the nanoseconds per request one run reports.
run() {
    "${pin[@]}" "$1" "$mode" "$count" | grep -oE '[0-9]+(\.[0-9]+)? ns' | head -1 | cut -d' ' -f1
}

base_times=()
candidate_times=()
for _ in $(seq "$rounds"); do
    base_times+=("$(run "$baseline")")
    candidate_times+=("$(run "$candidate")")
done

# Prints "fastest median" of the numbers given.
summary() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.0f %.0f\n", v[1], (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
read -r base_fastest base_median <<< "$(summary "${base_times[@]}")"
read -r candidate_fastest candidate_median <<< "$(summary "${candidate_times[@]}")"
echo "gate-profile $mode $count, $rounds alternating runs each${pin:+, pinned to CPU ${pin[2]}} (ns per request)"
echo "baseline   fastest $base_fastest  median $base_median  ($baseline)"
echo "candidate  fastest $candidate_fastest  median $candidate_median  ($candidate)"
awk -v bf="$base_fastest" -v cf="$candidate_fastest" -v bm="$base_median" -v cm="$candidate_median" \
    'BEGIN { printf "candidate / baseline: fastest %.3f×, median %.3f×\n", cf / bf, cm / bm }'
