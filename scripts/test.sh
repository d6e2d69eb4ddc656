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
# Minimizing each new interesting input can outlast a short -fuzztime and
# fail the run with "context deadline exceeded"; a crasher is still reported.
fuzztime="${FUZZTIME:-10s}"
go test -run '^$' -fuzz '^FuzzParse$' -fuzztime "$fuzztime" -fuzzminimizetime 0 ./conf
go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime "$fuzztime" -fuzzminimizetime 0 ./stages/codec
go test -run '^$' -fuzz '^FuzzProxyHeader$' -fuzztime "$fuzztime" -fuzzminimizetime 0 ./stages
go test -run '^$' -fuzz '^FuzzMatchesLibmcrypt$' -fuzztime "$fuzztime" -fuzzminimizetime 0 ./stages/cipher
go test -run '^$' -fuzz '^FuzzSegment$' -fuzztime "$fuzztime" -fuzzminimizetime 0 ./stages/emit/queue
go test -run '^$' -fuzz '^FuzzRoundTrip$' -fuzztime "$fuzztime" -fuzzminimizetime 0 ./stages/emit/dialect
SOAK_DURATION="${SOAK_DURATION:-10s}" bash scripts/soak.sh
if [ "${CI:-}" = true ] || [ "${NSCA_DEB_TEST:-}" = 1 ]; then
  NSCA_DEB_TEST=1 go test -count=1 -timeout 10m -run 'TestDeb' -v ./tests
fi
