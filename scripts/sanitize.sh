#!/usr/bin/env bash
# Runs the whole test suite under a sanitizer, in a build folder of its own:
#
#   scripts/sanitize.sh thread     # ThreadSanitizer, in .build-tsan
#   scripts/sanitize.sh address    # AddressSanitizer (with LeakSanitizer), in .build-asan
#
# Further arguments go to `swift test` (e.g. `--filter RedisConnectionTests`). Exits non-zero
# on a failed test or on any sanitizer report: ThreadSanitizer ends the test process with a
# non-zero status when it has reported a race, AddressSanitizer stops at its first report, and
# LeakSanitizer fails the process at exit. The `sluice-echo` processes the tests start are the
# sanitized build too; the tests fail on a report in their output. The suppressions (a false
# race inside the Swift concurrency runtime, a leak of XCTest) are
# compiled into the test bundle (`Tests/CSupport`), so the bare
# `swift test --sanitize=thread|address --traits Hummingbird` behaves the same.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitizer="${1:-}"
case "$sanitizer" in
    thread) scratch=.build-tsan ;;
    address) scratch=.build-asan ;;
    *)
        echo "usage: scripts/sanitize.sh thread|address [swift test arguments]" >&2
        exit 2
        ;;
esac
shift
scripts/install-deps.sh
swift build --build-tests --traits Hummingbird --sanitize="$sanitizer" --scratch-path "$scratch"
exec scripts/watch-tests.py -- swift test --skip-build --traits Hummingbird --sanitize="$sanitizer" --scratch-path "$scratch" "$@"
