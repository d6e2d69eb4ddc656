#!/usr/bin/env bash
# Installs what building and testing nsca_fast needs on Debian 12, as root.
# Packages already present are not installed again.
set -euo pipefail
need=()
for pkg in libmcrypt-dev nsca-client nsca cmake make gcc nagios4-core haproxy icinga2 gearman-job-server gearman-tools; do
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
