#!/usr/bin/env bash
# Builds the DocC documentation of every public module with warnings treated as errors (what CI
# checks): a broken symbol link, an undocumented parameter or a bad article fails the run.
#
#   scripts/docs.sh                    # every public module
#   scripts/docs.sh Sluice SluiceCore  # some modules
#
# The archives land in .build/plugins/Swift-DocC/outputs/<Module>.doccarchive.
#
# One run of the DocC plugin builds every module, with the `Hummingbird` package trait on (without
# it SluiceHummingbird is empty) and in .build: the configuration `./scripts/test.sh` builds, so
# after the tests only the symbol graphs are left to extract.
set -euo pipefail
cd "$(dirname "$0")/.."

modules=(SluiceCore SluiceLibevent Sluice SluiceFronts SluiceLineProtocol SluiceHTTPCodec SluiceHTTP SluiceTesting SluicePluginTesting
    SluiceButtonTap SluicePayment SluiceSearch SluiceRateLimit SluicePage SluiceBuiltInCodecs SluiceRedis SluicePaymentRedisLedger SluiceHummingbird)
if [[ $# -gt 0 ]]; then modules=("$@"); fi

targets=()
for module in "${modules[@]}"; do targets+=(--target "$module"); done
if ! swift package --traits Hummingbird generate-documentation "${targets[@]}" --warnings-as-errors; then
    echo "docs: warnings or errors in the documentation of: ${modules[*]}" >&2
    exit 1
fi
echo "docs: every module built without a warning"
