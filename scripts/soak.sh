#!/usr/bin/env bash
# Soak test: nsca_fast under a bounded mixed load on loopback (good clients,
# slowloris, garbage, wrong passwords, a stalling FIFO reader and a stalling
# spool reader), then SIGTERM; prints received/emitted/dropped and fails if a
# good check is missing or duplicated or the counts do not add up.
#   SOAK_DURATION=60s SOAK_WORKERS=2 scripts/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
[ -x ./nsca ] || bash scripts/build.sh
ulimit -n 65536 2>/dev/null || true
go run ./scripts/soak -nsca ./nsca -duration "${SOAK_DURATION:-30s}" -workers "${SOAK_WORKERS:-0}" "$@"
