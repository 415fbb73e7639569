#!/usr/bin/env bash
# Builds the libFuzzer targets of the nested package in Fuzz/ and runs each for a fixed time.
#
#   scripts/fuzz.sh                      # every target, 60 s each
#   scripts/fuzz.sh 300 fuzz-line        # one target, 5 minutes
#   FUZZ_FLAGS="-max_len=8192" scripts/fuzz.sh 60 fuzz-timed   # extra libFuzzer flags
#
# Each target runs on a scratch copy of its seeds (Fuzz/Corpus/<target>/), so what the fuzzer
# adds never lands in the repository. Crash reproducers go to .build-fuzz/crashes/<target>/ and
# each run's log to .build-fuzz/logs/<target>.log (both git-ignored). Prints the executions per
# target and exits non-zero if any target crashed (a broken invariant is a crash).
set -uo pipefail
cd "$(dirname "$0")/.."

all_targets=(fuzz-line fuzz-timed fuzz-ratelimit fuzz-idempotency fuzz-flight fuzz-tables fuzz-http)

seconds="${1:-60}"
if [[ $# -gt 0 ]]; then shift; fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
    echo "usage: scripts/fuzz.sh [seconds-per-target] [target...]" >&2
    echo "targets: ${all_targets[*]}" >&2
    exit 2
fi
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then targets=("${all_targets[@]}"); fi
for target in "${targets[@]}"; do
    if [[ ! " ${all_targets[*]} " == *" $target "* ]]; then
        echo "fuzz: unknown target '$target' (targets: ${all_targets[*]})" >&2
        exit 2
    fi
done

scratch="$PWD/.build-fuzz"
# `--sanitize fuzzer` alone links libFuzzer but, with this toolchain, leaves the Swift code
# without coverage counters (a run then reports 6 counters and explores nothing): the coverage
# is asked for explicitly, in the form this libFuzzer reads (inline counters and a PC table).
build_flags=(-c release --scratch-path "$scratch" --sanitize fuzzer --sanitize address
    -Xswiftc -sanitize-coverage=edge,trace-cmp,inline-8bit-counters,pc-table)
echo "fuzz: building (release, -sanitize=fuzzer,address, coverage) into $scratch"
# The root package is a path dependency of Fuzz/, and SwiftPM keeps the build plan it made for it
# (its list of source files) until Fuzz/'s own manifest changes: a source file added to or removed
# from the root package since the last fuzz build then fails it ("cannot find ... in scope",
# "missing inputs"). Dropping the plan makes SwiftPM plan again from the sources as they are; the
# compiled objects stay, so an unchanged tree rebuilds nothing.
rm -f "$scratch/release.yaml"
# Product by product: a plain `swift build` would also build the root package's executables,
# which the fuzzer sanitizer compiles as libraries (libFuzzer brings `main`).
for target in "${targets[@]}"; do
    if ! (cd Fuzz && swift build "${build_flags[@]}" --product "$target"); then
        echo "fuzz: build of $target failed" >&2
        exit 1
    fi
done
bin="$(cd Fuzz && swift build "${build_flags[@]}" --show-bin-path)"

work="$(mktemp -d "${TMPDIR:-/tmp}/sluice-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$scratch/logs"

# The Swift runtime's crash handler would get in the way of the sanitizer's report.
export SWIFT_BACKTRACE=enable=no

failed=0
summary=()
for target in "${targets[@]}"; do
    corpus="$work/$target"
    artifacts="$scratch/crashes/$target"
    log="$scratch/logs/$target.log"
    mkdir -p "$corpus" "$artifacts"
    if [[ -d "Fuzz/Corpus/$target" ]]; then cp -R "Fuzz/Corpus/$target/." "$corpus/"; fi
    echo "fuzz: $target for ${seconds}s (log: $log)"
    # shellcheck disable=SC2086 # FUZZ_FLAGS is a list of flags
    "$bin/$target" "$corpus" \
        -max_total_time="$seconds" -print_final_stats=1 -timeout=30 \
        -artifact_prefix="$artifacts/" ${FUZZ_FLAGS:-} >"$log" 2>&1
    status=$?
    executions="$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')"
    executions="${executions:-?}"
    counters="$(grep -m1 -o 'Loaded 1 modules *([0-9]* inline' "$log" | grep -o '[0-9][0-9]*' | tail -1)"
    coverage="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')"
    if [[ $status -eq 0 && "${counters:-0}" -lt 1000 ]]; then
        # A target built without coverage explores nothing: that is a failed run, not a pass.
        failed=1
        result="NOT INSTRUMENTED (${counters:-no} coverage counters)"
    elif [[ $status -eq 0 ]]; then
        result="ok (coverage ${coverage:-?} of ${counters} counters)"
    else
        failed=1
        artifact="$(grep -m1 -o 'Test unit written to .*' "$log" | sed 's/Test unit written to //')"
        # The broken invariant, else the sanitizer's or libFuzzer's report and the first Swift
        # frame of its stack (where a runtime check such as an overflow failed).
        reason="$(grep -m1 'Fatal error' "$log")"
        if [[ -z "$reason" ]]; then
            reason="$(grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)' "$log")"
            frame="$(awk '/ERROR: /{seen=1} seen && match($0, /[^ ]+[.]swift:[0-9]+(:[0-9]+)?/) {print substr($0, RSTART, RLENGTH); exit}' "$log")"
            if [[ -n "$frame" ]]; then reason="$reason at $frame"; fi
        fi
        reason="$(printf '%s' "$reason" | cut -c1-240)"
        result="CRASH (exit $status) ${artifact:-no reproducer written}: ${reason:-see $log}"
    fi
    echo "fuzz: $target: $executions executions, $result"
    summary+=("$(printf '%-18s %12s  %s' "$target" "$executions" "$result")")
done

echo
printf '%-18s %12s  %s\n' "target" "executions" "result"
printf '%s\n' "${summary[@]}"
if [[ $failed -ne 0 ]]; then
    echo
    echo "fuzz: a target crashed; reproduce with: SWIFT_BACKTRACE=enable=no $bin/<target> <reproducer>" >&2
    echo "fuzz: minimise with: $bin/<target> -minimize_crash=1 -runs=20000 <reproducer>" >&2
fi
exit $failed
