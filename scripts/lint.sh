#!/usr/bin/env bash
# Source checks that the compiler does not make. Exits non-zero, naming the lines, when one fails.
#
# - A `Mutex` critical section is `withSanitizedLock`, never a bare `withLock`: on Linux the
#   standard library's `Mutex` locks with futexes inside an uninstrumented library, so
#   ThreadSanitizer cannot see its ordering and reports the accesses it protects as races.
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
# Files that use `Mutex` (an `NSLock`'s `withLock` is a pthread mutex, which the sanitizer sees).
mapfile -t files < <(grep -rl --include='*.swift' -E '\bMutex\b' Sources Plugins Tests Examples Fuzz \
    | grep -v -E '/\.build|Examples/Benchmarks/' || true)
for file in "${files[@]}"; do
    if grep -n -E '\.withLock[[:space:]]*[({]' "$file" | grep -v -E '^\s*[0-9]+:\s*///' >/tmp/lint-lock.$$; then
        sed "s|^|$file:|" /tmp/lint-lock.$$ | grep -v 'Mutex+Sanitizer.swift' && status=1 || true
    fi
done
rm -f /tmp/lint-lock.$$
if ((status != 0)); then
    echo "lint: use withSanitizedLock for a Mutex (ThreadSanitizer cannot see Mutex.withLock on Linux)" >&2
fi
exit "$status"
