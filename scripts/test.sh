#!/usr/bin/env bash
# Quick start, command 2: installs what is missing and runs the whole test suite, with the
# `Hummingbird` package trait on so that SluiceHummingbird's middleware tests run too. Arguments
# go to `swift test`, e.g. `--filter SluiceCoreTests`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests --traits Hummingbird
# The watchdog fails the run, naming the tests still running and dumping every thread, when
# the suite prints nothing for five minutes (the build before it is not watched: one long
# compile step prints nothing either).
exec scripts/watch-tests.py -- swift test --skip-build --traits Hummingbird "$@"
