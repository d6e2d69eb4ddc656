#!/usr/bin/env bash
# Builds the Debian package nsca-fast_<version>_<arch>.deb from this checkout
# with dpkg-deb, writes it into OUTDIR (default: the checkout root) and
# prints its path on the last line of standard output.
#
#   scripts/build-deb.sh [OUTDIR]
#
# Environment:
#   VERSION     package version (default: from `git describe --tags --always`,
#               made a valid Debian version; 0.1.0 outside a git checkout)
#   MAINTAINER  the Maintainer field (default: the author of the last commit)
#
# Needs: Go 1.26+ (on PATH or in /usr/local/go/bin), gcc and libmcrypt-dev
# (cgo), dpkg-deb, gzip. It does not need root or fakeroot: files are owned
# by root in the package (dpkg-deb --root-owner-group).
#
# What the package holds, and why, is described in README.md ("Installing
# over stock nsca"); the maintainer scripts are in conf/debian/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
outdir=${1:-$root}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
export PATH="$PATH:/usr/local/go/bin"
umask 022

die() { echo "build-deb: $*" >&2; exit 1; }
for tool in go dpkg-deb dpkg gzip; do
  command -v "$tool" >/dev/null || die "$tool is not installed"
done

# debian_version turns `git describe --tags --always` into a Debian version:
#   v1.2.3            -> 1.2.3
#   v1.2.3-4-gabc1234 -> 1.2.3+4.gabc1234   (4 commits after the tag)
#   v1.3.0-rc1        -> 1.3.0~rc1          (sorts before 1.3.0)
#   abc1234 (no tag)  -> 0.1.0+<commits>.gabc1234
# and 0.1.0 outside a git checkout.
debian_version() {
  local d n
  if d=$(git -C "$root" describe --tags 2>/dev/null) && [[ $d =~ ^v?[0-9] ]]; then
    if [[ $d =~ ^v?(.*)-([0-9]+)-g([0-9a-f]+)$ ]]; then
      d="${BASH_REMATCH[1]}+${BASH_REMATCH[2]}.g${BASH_REMATCH[3]}"
    else
      d=${d#v}
    fi
    # A hyphen would start a Debian revision; in a tag it marks a pre-release.
    d=${d//-/\~}
    # Anything else a Debian version may not hold becomes a dot.
    echo "$d" | sed 's/[^A-Za-z0-9.+~]/./g'
  elif d=$(git -C "$root" rev-parse --short HEAD 2>/dev/null) && [ -n "$d" ]; then
    # No tag (or none that is a version): as git describe --always, the
    # abbreviated commit, which is put after 0.1.0 with the commit count so
    # that later builds sort higher.
    n=$(git -C "$root" rev-list --count HEAD 2>/dev/null || echo 0)
    echo "0.1.0+$n.g$d"
  else
    echo 0.1.0
  fi
}

version=${VERSION:-$(debian_version)}
dpkg --validate-version "$version" >/dev/null 2>&1 ||
  die "version '$version' is not a valid Debian version (set VERSION=...)"
arch=$(dpkg --print-architecture)
[ "$(go env GOARCH)" = "$(go env GOHOSTARCH)" ] || die "cross-building is not supported (GOARCH=$(go env GOARCH))"
maintainer=${MAINTAINER:-$(git -C "$root" log -1 --format='%an <%ae>' 2>/dev/null || true)}
maintainer=${maintainer:-"nsca_fast maintainers <root@localhost>"}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}

for page in nsca.8 nsca.cfg.5; do
  [ -f "$root/conf/$page" ] || die "conf/$page (a man page) is missing"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg="$work/pkg"
install -d "$pkg/DEBIAN" "$pkg/usr/sbin" "$pkg/lib/systemd/system" "$pkg/usr/lib/tmpfiles.d" \
  "$pkg/etc/logrotate.d" "$pkg/etc/init.d" "$pkg/usr/share/man/man5" "$pkg/usr/share/man/man8" \
  "$pkg/usr/share/doc/nsca-fast/examples"

# The daemon. cgo links libmcrypt and OpenSSL's libssl (the nsca-ng
# listener); Depends is read off the binary below.
(cd "$root" && CGO_ENABLED=1 go build -trimpath -ldflags "-X main.Version=$version" \
  -o "$pkg/usr/sbin/nsca" ./src)
chmod 0755 "$pkg/usr/sbin/nsca"
"$pkg/usr/sbin/nsca" -V | grep -q "nsca_fast $version" || die "the built binary does not report version $version"

# systemd units under the stock package's names, so that `systemctl reload
# nsca` and the administrator's enable/disable choice carry over.
install -m 0644 "$root/conf/nsca_fast.service" "$pkg/lib/systemd/system/nsca.service"
install -m 0644 "$root/conf/nsca_fast.socket" "$pkg/lib/systemd/system/nsca.socket"
install -m 0644 "$root/conf/debian/nsca.tmpfiles" "$pkg/usr/lib/tmpfiles.d/nsca.conf"
# The init script for hosts without systemd, a conffile under the stock
# package's name (systemd's nsca.service of the same name hides it).
install -m 0755 "$root/conf/debian/nsca.init" "$pkg/etc/init.d/nsca"

# The configuration: a conffile (see conf/debian/preinst for how an existing
# one is kept), and the same annotated sample as documentation.
install -m 0644 "$root/conf/nsca.cfg" "$pkg/etc/nsca.cfg"
install -m 0644 "$root/conf/nsca.cfg" "$pkg/usr/share/doc/nsca-fast/examples/nsca.cfg"
# Rotation of the dump file, a conffile too.
install -m 0644 "$root/conf/debian/nsca-fast.logrotate" "$pkg/etc/logrotate.d/nsca-fast"
# The Grafana dashboard and Prometheus alert rules for metrics_address.
install -m 0644 "$root/conf/grafana/nsca_fast.json" "$pkg/usr/share/doc/nsca-fast/examples/grafana-nsca_fast.json"
install -m 0644 "$root/conf/prometheus/nsca_fast.rules.yml" "$pkg/usr/share/doc/nsca-fast/examples/nsca_fast.rules.yml"

# nsca(8), the daemon, and nsca.cfg(5), every option of its configuration.
gzip -9n <"$root/conf/nsca.8" >"$pkg/usr/share/man/man8/nsca.8.gz"
gzip -9n <"$root/conf/nsca.cfg.5" >"$pkg/usr/share/man/man5/nsca.cfg.5.gz"
chmod 0644 "$pkg/usr/share/man/man8/nsca.8.gz" "$pkg/usr/share/man/man5/nsca.cfg.5.gz"

doc="$pkg/usr/share/doc/nsca-fast"
if [ -f "$root/README.md" ]; then
  gzip -9n <"$root/README.md" >"$doc/README.md.gz"
fi
{
  cat "$root/conf/debian/copyright"
  echo
  echo "Files: usr/sbin/nsca"
  echo "Copyright: 2020-2026 the nsca_fast authors, and the authors of the Go modules below"
  echo "License: GPL-3+"
  echo "Comment: The binary is statically linked with the Go standard library"
  echo " (BSD-3-Clause) and these Go modules, each under the licence in its"
  echo " LICENSE file:"
  (cd "$root" && go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' ./src) |
    sort -u | sed 's/^/  /'
} >"$doc/copyright"
{
  echo "nsca-fast ($version) unstable; urgency=medium"
  echo
  echo "  * Built from $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo 'a source tree') by scripts/build-deb.sh."
  echo
  echo " -- $maintainer  $(date -R -u -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$doc/changelog.gz"
find "$doc" -type f -exec chmod 0644 {} +

# Control files.
for f in postinst prerm postrm; do
  install -m 0755 "$root/conf/debian/$f" "$pkg/DEBIAN/$f"
done
# preinst carries the sample /etc/nsca.cfg, byte for byte, and its md5sum:
# on a first installation it puts the sample in place of the file there
# (kept aside for postinst), so that dpkg finds its own version installed
# already and neither asks nor says it installed a new one.
sample="$root/conf/nsca.cfg"
[ "$(tail -c 1 "$sample" | od -An -c | tr -d ' ')" = '\n' ] || die "conf/nsca.cfg must end with a newline"
! grep -qx NSCA_FAST_SAMPLE "$sample" || die "conf/nsca.cfg holds the preinst's here-document delimiter"
sample_md5=$(md5sum <"$sample" | cut -d' ' -f1)
sed -e '/^@SAMPLE@$/{' -e "r $sample" -e 'd' -e '}' -e "s/@SAMPLE_MD5@/$sample_md5/" \
  "$root/conf/debian/preinst" >"$pkg/DEBIAN/preinst"
chmod 0755 "$pkg/DEBIAN/preinst"
sed -n '/^write_sample() {$/,/^}$/p' "$pkg/DEBIAN/preinst" >"$work/write_sample.sh"
sh -c '. "$1"; write_sample "$2"' sh "$work/write_sample.sh" "$work/sample.out"
[ "$(md5sum <"$work/sample.out" | cut -d' ' -f1)" = "$sample_md5" ] || die "preinst does not reproduce conf/nsca.cfg"
install -m 0644 "$root/conf/debian/conffiles" "$pkg/DEBIAN/conffiles"

# Depends: the package of each library the binary links (its NEEDED
# entries), libc6 with the glibc version its symbols need. A library not
# named here stops the build rather than ship a package that installs
# without it.
command -v objdump >/dev/null || die "objdump (binutils) is not installed"
depends=
for lib in $(objdump -p "$pkg/usr/sbin/nsca" | awk '$1 == "NEEDED" { print $2 }'); do
  case $lib in
    libc.so.6)
      glibc=$(objdump -T "$pkg/usr/sbin/nsca" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
      dep="libc6${glibc:+ (>= $glibc)}" ;;
    libmcrypt.so.4) dep=libmcrypt4 ;;
    libssl.so.3 | libcrypto.so.3) dep=libssl3 ;;
    *) die "the binary links $lib: add its package to Depends in scripts/build-deb.sh" ;;
  esac
  case ", $depends, " in *", $dep, "*) ;; *) depends=${depends:+$depends, }$dep ;; esac
done
installed_size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@MAINTAINER@|$maintainer|" \
  -e "s|@INSTALLED_SIZE@|$installed_size|" -e "s|@DEPENDS@|$depends|" \
  "$root/conf/debian/control.in" >"$pkg/DEBIAN/control"
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/md5sums"

deb="$outdir/nsca-fast_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "$deb"
