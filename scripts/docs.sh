#!/usr/bin/env bash
# Builds the DocC documentation of every public module with warnings treated as errors (what CI
# checks): a broken symbol link, an undocumented parameter or a bad article fails the run.
#
#   scripts/docs.sh                    # every public module
#   scripts/docs.sh Sluice SluiceCore  # some modules
#
# The archives land in .build/plugins/Swift-DocC/outputs/<Module>.doccarchive.
#
# SluiceHummingbird is built with the `Hummingbird` package trait (without it the module is empty),
# in its own scratch path so that .build keeps its configuration: its archive lands in
# .build-hummingbird/plugins/Swift-DocC/outputs/SluiceHummingbird.doccarchive.
set -euo pipefail
cd "$(dirname "$0")/.."

modules=(SluiceCore SluiceLibevent Sluice SluiceFronts SluiceLineProtocol SluiceHTTPCodec SluiceHTTP SluiceTesting SluicePluginTesting
    SluiceButtonTap SluicePayment SluiceSearch SluiceRateLimit SluicePage SluiceBuiltInCodecs SluiceRedis SluicePaymentRedisLedger SluiceHummingbird)
if [[ $# -gt 0 ]]; then modules=("$@"); fi

failed=()
for module in "${modules[@]}"; do
    echo "docs: $module"
    traits=()
    if [[ "$module" == SluiceHummingbird ]]; then traits=(--scratch-path .build-hummingbird --traits Hummingbird); fi
    if ! swift package "${traits[@]}" generate-documentation --target "$module" --warnings-as-errors; then
        failed+=("$module")
    fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "docs: warnings or errors in: ${failed[*]}" >&2
    exit 1
fi
echo "docs: every module built without a warning"
