#!/usr/bin/env bash
# Builds nsca_fast and runs it in the foreground on the embedded default
# configuration: 127.0.0.1:5667, XOR, results under ./var of this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh build
bash scripts/build.sh
mkdir -p var
exec ./nsca -c builtin -f "$@"
