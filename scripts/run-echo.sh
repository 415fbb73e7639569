#!/usr/bin/env bash
# Quick start, command 1: installs what is missing, builds and starts sluice-echo (port 7070 by
# default). Arguments go to sluice-echo, e.g. `scripts/run-echo.sh --port 7171 --loops 1`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --runtime
exec swift run -c release sluice-echo "$@"
