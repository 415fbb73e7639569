#!/usr/bin/env bash
# Installs the system packages Sluice needs on Debian/Ubuntu, only when something is missing.
#
#   scripts/install-deps.sh            # build + test packages (the above, redis-server, gdb for the
#                                      # test watchdog's thread dump, and the Python packages h11
#                                      # and llhttp for the HTTP tests)
#   scripts/install-deps.sh --runtime  # what `swift run sluice-echo` and the README's nc examples need
#   scripts/install-deps.sh --bench    # --runtime, and wrk and nginx for the HTTP benchmark
#                                      # (Examples/Benchmarks/http-compare.sh, Examples/LoadTest/run.sh)
#
# It checks `dpkg -s` first and calls `apt-get update && apt-get install -y …` (through sudo when
# not root) only for the packages that are not installed. On a non-Debian system it checks
# pkg-config for libevent and hiredis and tells you what to install.
set -euo pipefail

runtime=(libevent-dev libhiredis-dev pkg-config netcat-openbsd curl)
test_extra=(redis-server python3 python3-pip gdb)
bench_extra=(wrk nginx)

packages=("${runtime[@]}")
case "${1:-}" in
    --runtime) ;;
    --bench) packages+=("${bench_extra[@]}") ;;
    *) packages+=("${test_extra[@]}") ;;
esac

if ! command -v dpkg >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    if pkg-config --exists libevent libevent_pthreads hiredis 2>/dev/null \
        && { [[ "${1:-}" != "--bench" ]] || { command -v wrk >/dev/null 2>&1 && command -v nginx >/dev/null 2>&1; }; }; then
        exit 0
    fi
    echo "install-deps: not a Debian/Ubuntu system; install libevent (with libevent_pthreads), hiredis and pkg-config yourself (and wrk and nginx for --bench, redis-server for the tests)" >&2
    echo "install-deps: e.g. 'brew install libevent hiredis pkg-config wrk redis' on macOS" >&2
    exit 1
fi

missing=()
for package in "${packages[@]}"; do
    if ! dpkg -s "$package" >/dev/null 2>&1 || ! dpkg -s "$package" 2>/dev/null | grep -q '^Status: install ok installed'; then
        missing+=("$package")
    fi
done

# The HTTP tests' reference parsers and strict client (Python: h11 and llhttp, from PyPI), for
# the test run only.
install_python_tools() {
    [[ "${1:-}" == "--runtime" || "${1:-}" == "--bench" ]] && return 0
    if python3 -c 'import h11, llhttp' >/dev/null 2>&1; then return 0; fi
    echo "install-deps: installing the Python packages h11 and llhttp (the HTTP tests' reference parsers)" >&2
    local packages=(h11==0.16.0 llhttp==9.3.0.0)
    python3 -m pip install --quiet "${packages[@]}" 2>/dev/null \
        || python3 -m pip install --quiet --break-system-packages "${packages[@]}" \
        || python3 -m pip install --quiet --user --break-system-packages "${packages[@]}"
}

if ((${#missing[@]} == 0)); then
    install_python_tools "${1:-}"
    exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [[ "$(id -u)" -ne 0 ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "install-deps: need root or sudo to run: apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
install_python_tools "${1:-}"
