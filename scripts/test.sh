#!/usr/bin/env bash
# Runs the whole test suite: formatting, vet, unit tests, black-box tests
# against the built binary with the real send_nsca, short fuzz runs, and (in
# CI, or with NSCA_DEB_TEST=1) the .deb install test, last, because it
# replaces the stock nsca package on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test
export PATH="$PATH:/usr/local/go/bin"
bash scripts/build.sh
unformatted=$(gofmt -l src cgo stages conf tests scripts 2>/dev/null || true)
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted" >&2; exit 1; fi
go vet ./...
export NSCA_BIN="$PWD/nsca"
env -u NSCA_DEB_TEST go test -count=1 -timeout 25m ./...
# The lifecycle and reliability tests ran their daemons with GOGC=1 above, so
# that finalizer and GC-timing bugs show at once; once more with Go's default.
env -u NSCA_DEB_TEST NSCA_TEST_GOGC=default go test -count=1 -timeout 15m -run 'TestLifecycle|TestRel|TestSupervisor|TestFullDisk' ./tests
# fuzz TARGET PACKAGE: a short fuzz run. Go's fuzzer can end a short
# -fuzztime with "context deadline exceeded" while it is still busy with new
# inputs (seen here on FuzzProxyHeader with 210 new inputs in 10 s); that is
# no finding. A real one says "Failing input written to" and fails the run.
fuzztime="${FUZZTIME:-10s}"
fuzz() {
  local out rc=0
  out="$(go test -run '^$' -fuzz "^$1\$" -fuzztime "$fuzztime" -fuzzminimizetime 0 "$2" 2>&1)" || rc=$?
  printf '%s\n' "$out" | tail -3
  if [ "$rc" -ne 0 ]; then
    if grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written to' <<<"$out"; then
      echo "fuzz $1: the run ended on the fuzzer's own deadline with no failing input; not a finding"
      return 0
    fi
    printf '%s\n' "$out" >&2
    return "$rc"
  fi
}
fuzz FuzzParse ./conf
fuzz FuzzDecode ./stages/codec
fuzz FuzzProxyHeader ./stages/nsca
fuzz FuzzMatchesLibmcrypt ./stages/cipher
fuzz FuzzSegment ./stages/emit/queue
fuzz FuzzRoundTrip ./stages/emit/dialect
SOAK_DURATION="${SOAK_DURATION:-10s}" bash scripts/soak.sh
if [ "${CI:-}" = true ] || [ "${NSCA_DEB_TEST:-}" = 1 ]; then
  NSCA_DEB_TEST=1 go test -count=1 -timeout 10m -run 'TestDeb' -v ./tests
fi
