#!/usr/bin/env bash
# Builds the example packages that live outside the root package, so that a change which breaks
# them fails CI: Examples/Benchmarks (package-benchmark suites, gate-profile, sluice-keymem).
# Debug build in .build-examples; the benchmarks themselves are run by hand (see its README).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --package-path Examples/Benchmarks --scratch-path .build-examples --build-tests
