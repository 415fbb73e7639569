#!/usr/bin/env bash
# Builds the example packages that live outside the root package, so that a change which breaks
# them fails CI: in Examples/Benchmarks, every executable that uses Sluice (the package-benchmark
# suites, gate-profile, sluice-keymem, hummingbird-middleware-profile). Debug build in
# .build-examples; the benchmarks themselves are run by hand (see its README).
#
# The two baselines beside them, nio-echo and hummingbird-tap, use SwiftNIO and Hummingbird and
# nothing of Sluice, so no change here can break them. `--all` builds them too.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
products=(PolicyBenchmarks LoopBenchmarks GateBenchmarks gate-profile sluice-keymem hummingbird-middleware-profile)
if [[ "${1:-}" == --all ]]; then products+=(nio-echo hummingbird-tap); fi
for product in "${products[@]}"; do
    echo "build-examples: $product"
    swift build --package-path Examples/Benchmarks --scratch-path .build-examples --product "$product"
done
