#!/usr/bin/env bash
# How long the real nsca-ng client takes for one session (TLS handshake,
# MOIN, one PUSH, QUIT) against each nsca_fast binary given and against the
# real nsca-ng-server, with TLS 1.2 and TLS 1.3 (issue 34: a 44 ms stall per
# TLS 1.3 session). Runs are interleaved (each round runs every server and
# version once), so that the machine's other load falls on all of them.
#
#   bash scripts/bench-ng-latency.sh [BIN...]      # default ./nsca
#
# Then scripts/ng-psk-client.c times NG_RUNS sessions of the same requests
# in one process, which leaves send_nsca's start-up (8 ms) out of the
# figure. NG_RUNS (100) sessions per server and version. The TLS version is forced
# on the client through OPENSSL_CONF (MinProtocol = MaxProtocol), which
# send_nsca's libssl reads. The Debian packages nsca-ng-client and
# nsca-ng-server are downloaded into NSCA_NG_DEBS (as tests/ do).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
runs=${NG_RUNS:-100}
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=("$root/nsca")
tmp=$(mktemp -d /tmp/bench-ng-latency.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

debs=${NSCA_NG_DEBS:-/tmp/nsca_fast-nsca-ng-debs}
if ! ls "$debs"/nsca-ng-client_*.deb "$debs"/nsca-ng-server_*.deb >/dev/null 2>&1; then
	mkdir -p "$debs"
	(cd "$debs" && apt-get download nsca-ng-client nsca-ng-server >/dev/null)
fi
cc -O2 -o "$tmp/ng-psk-client" scripts/ng-psk-client.c -lssl -lcrypto
for d in "$debs"/nsca-ng-client_*.deb "$debs"/nsca-ng-server_*.deb; do dpkg-deb -x "$d" "$tmp/ng"; done
client=$tmp/ng/usr/sbin/send_nsca

for v in 1.2 1.3; do
	printf 'openssl_conf = c\n[c]\nssl_conf = s\n[s]\nsystem_default = d\n[d]\nMinProtocol = TLSv%s\nMaxProtocol = TLSv%s\n' "$v" "$v" >"$tmp/tls$v.cnf"
done

. scripts/bench-lib.sh

mkfifo -m 600 "$tmp/cmd"
cat "$tmp/cmd" >/dev/null &
pids+=($!)
ids() { # ids PORT: an nsca-ng.cfg the real server and ours (identities_file) read
	printf 'command_file = "%s"\nlisten = "127.0.0.1:%d"\nauthorize "alice" {\n\tpassword = "alice-secret"\n\thosts = "web[0-9]+"\n\tservices = "disk@web[0-9]+"\n}\n' "$tmp/cmd" "$1"
}

names=() ports=()
p=$(free_port)
ids "$p" >"$tmp/nsca-ng.cfg"
"$tmp/ng/usr/sbin/nsca-ng" -c "$tmp/nsca-ng.cfg" -F 2>"$tmp/nsca-ng.log" &
pids+=($!)
names+=("nsca-ng-server") ports+=("$p")
i=0
for bin in "${bins[@]}"; do
	i=$((i + 1))
	p=$(free_port)
	ids "$p" >"$tmp/ids$i.cfg"
	printf 'server_address=127.0.0.1\nserver_port=%d\ncommand_file=%s\npassword=legacy\ndecryption_method=1\nidentities_file=%s\nnsca_ng_listen=127.0.0.1:%d\n' \
		"$(free_port)" "$tmp/cmd" "$tmp/ids$i.cfg" "$p" >"$tmp/nsca$i.cfg"
	chmod 600 "$tmp/nsca$i.cfg" "$tmp/ids$i.cfg"
	"$bin" -c "$tmp/nsca$i.cfg" -f 2>"$tmp/nsca$i.log" &
	pids+=($!)
	names+=("$bin") ports+=("$p")
done
for p in "${ports[@]}"; do wait_port "$p"; done
for k in "${!names[@]}"; do
	printf 'identity = "alice"\npassword = "alice-secret"\nserver = "127.0.0.1"\nport = %d\ntimeout = 10\n' "${ports[$k]}" >"$tmp/client$k.cfg"
	chmod 600 "$tmp/client$k.cfg"
done

# One session per run: its wall time in µs goes to $tmp/SERVER-VERSION.
for _ in $(seq "$runs"); do
	for k in "${!names[@]}"; do
		for v in 1.2 1.3; do
			t0=${EPOCHREALTIME/./}
			printf 'web1\tdisk\t0\tok\n' | OPENSSL_CONF=$tmp/tls$v.cnf "$client" -c "$tmp/client$k.cfg" ||
				{ echo "send_nsca failed against ${names[$k]} with TLS $v" >&2; exit 1; }
			echo $((${EPOCHREALTIME/./} - t0)) >>"$tmp/$k-$v"
		done
	done
done

echo "real send_nsca, one session each (handshake, MOIN, one PUSH, QUIT); $runs runs; ms per session"
printf '%-40s %-5s %8s %8s %8s %8s\n' server TLS median mean p90 total_s
for k in "${!names[@]}"; do
	for v in 1.2 1.3; do
		sort -n "$tmp/$k-$v" | awk -v name="${names[$k]}" -v v="$v" '{a[NR]=$1; s+=$1}
			END{printf "%-40s %-5s %8.2f %8.2f %8.2f %8.2f\n", name, v, a[int((NR+1)/2)]/1000, s/NR/1000, a[int(NR*0.9)]/1000, s/1e6}'
	done
done

echo
echo "ng-psk-client time: the same session in one process, Nagle on as in send_nsca; $runs runs; ms per session"
printf '%-40s %-5s %8s %8s %8s\n' server TLS median mean p90
declare -A fig
for _ in 1 2 3; do # interleaved again, a third of the runs each time
	for k in "${!names[@]}"; do
		for v in 1.2 1.3; do
			flag=()
			[ "$v" = 1.2 ] && flag=(-2)
			fig[$k-$v]+="$("$tmp/ng-psk-client" "${flag[@]}" time 127.0.0.1 "${ports[$k]}" alice alice-secret $(((runs + 2) / 3)))
"
		done
	done
done
for k in "${!names[@]}"; do
	for v in 1.2 1.3; do
		# The median of the three medians, the mean of the means, the
		# highest 90th percentile.
		printf '%s' "${fig[$k-$v]}" | sort -n | awk -v name="${names[$k]}" -v v="$v" '{m[NR]=$1; s+=$2; if ($3>p) p=$3}
			END{printf "%-40s %-5s %8.2f %8.2f %8.2f\n", name, v, m[2]/1000, s/NR/1000, p/1000}'
	done
done
