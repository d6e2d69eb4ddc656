#!/usr/bin/env bash
# Installs what nsca_fast needs on Debian 12, as root: `deps.sh build` only
# what building needs (libmcrypt, cmake, a C compiler for cgo), `deps.sh
# test` (the default) also the real programs the tests drive: send_nsca and
# stock nsca, Nagios 4, HAProxy, Icinga 2, gearmand, Crypto++ with g++
# for the NSClient++-compatible client, logrotate for the rotation of the
# dump file, promtool (package prometheus) to check the shipped alert
# rules, and libconfuse2 and libev4 for nsca-ng's server, which the tests
# run from its extracted Debian package beside its client (both are fetched
# with apt-get download, never installed: nsca-ng-client's send_nsca would
# replace nsca-client's). Packages already present are not installed again.
set -euo pipefail
build=(libmcrypt-dev libssl-dev cmake make gcc)
test=(nsca-client nsca nagios4-core haproxy icinga2 gearman-job-server gearman-tools libcrypto++-dev g++ logrotate prometheus libconfuse2 libev4)
case "${1:-test}" in
  build) want=("${build[@]}") ;;
  test) want=("${build[@]}" "${test[@]}") ;;
  *) echo "usage: deps.sh [build|test]" >&2; exit 2 ;;
esac
need=()
for pkg in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if ((${#need[@]})); then
  apt-get update -qq
  # policy-rc.d keeps the stock nsca, haproxy, icinga2 and gearmand packages
  # from starting their daemons: the tests start their own on loopback.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "deps: the Go toolchain (1.26+) is not on PATH" >&2; exit 1; }
