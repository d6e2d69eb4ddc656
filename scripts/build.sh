#!/usr/bin/env bash
# Builds ./nsca with CMake (which calls go build).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
cmake -S . -B . >/dev/null
make --no-print-directory
