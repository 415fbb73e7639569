#!/usr/bin/env bash
# Hostile-client probes: builds a release sluice-echo in its own scratch folder and runs
# Tests/Hostile/hostile.py against it (Linux only: the probes read /proc), then fuzzes the HTTP
# request parser (scripts/fuzz.sh fuzz-http: 60 s, 20 s with --quick). Arguments go to the
# probes, e.g. `scripts/hostile.sh --quick`, `scripts/hostile.sh --only slowloris,churn`,
# `scripts/hostile.sh --list` (with --only or --list, no fuzz run). Exits non-zero when a probe
# fails or the fuzzer finds a crash. See Tests/Hostile/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=.build-hostile
swift build -c release --product sluice-echo --scratch-path "$scratch"
binary="$(swift build -c release --product sluice-echo --scratch-path "$scratch" --show-bin-path)/sluice-echo"
status=0
python3 Tests/Hostile/hostile.py --binary "$binary" "$@" || status=$?
fuzz_seconds=60
for argument in "$@"; do
    case "$argument" in
        --quick) fuzz_seconds=20 ;;
        --only | --only=* | --list) exit "$status" ;;
    esac
done
scripts/fuzz.sh "$fuzz_seconds" fuzz-http || status=1
exit "$status"
