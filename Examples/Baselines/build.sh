#!/usr/bin/env bash
# Builds the C baselines (c-echo server, c-load client, evhttp-tap HTTP server) into
# Examples/Baselines/bin/ (gitignored).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"$here/../../scripts/install-deps.sh" --runtime
mkdir -p "$here/bin"
flags=(-O2 -Wall -Wextra -std=c11 -D_DEFAULT_SOURCE)
# shellcheck disable=SC2046
cc "${flags[@]}" -o "$here/bin/c-echo" "$here/c-echo/c_echo.c" $(pkg-config --cflags --libs libevent)
# shellcheck disable=SC2046
cc "${flags[@]}" -o "$here/bin/c-load" "$here/c-load/c_load.c" $(pkg-config --cflags --libs libevent)
# shellcheck disable=SC2046
cc "${flags[@]}" -o "$here/bin/evhttp-tap" "$here/../Benchmarks/Baselines/evhttp_tap.c" $(pkg-config --cflags --libs libevent)
echo "built $here/bin/c-echo $here/bin/c-load $here/bin/evhttp-tap" >&2
