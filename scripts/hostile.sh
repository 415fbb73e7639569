#!/usr/bin/env bash
# Hostile-client probes: builds a release sluice-echo in its own scratch folder and runs
# Tests/Hostile/hostile.py against it (Linux only: the probes read /proc). Arguments go to the
# probes, e.g. `scripts/hostile.sh --quick`, `scripts/hostile.sh --only slowloris,churn`,
# `scripts/hostile.sh --list`. Exits non-zero when a probe fails. See Tests/Hostile/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=.build-hostile
swift build -c release --product sluice-echo --scratch-path "$scratch"
binary="$(swift build -c release --product sluice-echo --scratch-path "$scratch" --show-bin-path)/sluice-echo"
exec python3 Tests/Hostile/hostile.py --binary "$binary" "$@"
