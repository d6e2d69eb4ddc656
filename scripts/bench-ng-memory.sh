#!/usr/bin/env bash
# What a burst of idle nsca-ng sessions costs the server in memory, and what
# it gives back once they close (issue 34): for each server, the PSS and RSS
# of its process tree before the burst, with N sessions open (handshake and
# MOIN, then idle), 2 s after they closed and 60 s after.
#
#   bash scripts/bench-ng-memory.sh [BIN...]
#
# Each BIN is an nsca_fast binary (default ./nsca), run with nsca_ng_listen
# and an identities_file on loopback; each is copied first, so that two
# daemons do not share (and halve in PSS) the pages of one executable. The
# real nsca-ng-server runs beside them when its Debian package can be had.
# NG_SESSIONS (2000) sessions; NG_TLS12=1 keeps the client to TLS 1.2.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
n=${NG_SESSIONS:-2000}
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=("$root/nsca")
tmp=$(mktemp -d /tmp/bench-ng-memory.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
ulimit -n 20000

cc -O2 -o "$tmp/ng-psk-client" scripts/ng-psk-client.c -lssl -lcrypto
tls=() version="TLS 1.3 as negotiated"
if [ "${NG_TLS12:-0}" = 1 ]; then tls=(-2) version="TLS 1.2"; fi

# mem PID: MB of PSS and of RSS, summed over PID and its children.
mem() {
	local p pss=0 rss=0
	for p in $1 $(pgrep -P "$1" || true); do
		read -r a b < <(awk '/^Pss:/{p=$2} /^Rss:/{r=$2} END{print p+0, r+0}' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0 0)
		pss=$((pss + a)) rss=$((rss + b))
	done
	printf '%6.1f / %6.1f' "$(bc -l <<<"$pss/1024")" "$(bc -l <<<"$rss/1024")"
}

. scripts/bench-lib.sh

# The command files are FIFOs that cat drains.
mkfifo -m 600 "$tmp/cmd"
cat "$tmp/cmd" >/dev/null &
pids+=($!)
exec 9>"$tmp/cmd"

names=() ports=() procs=()
ids() { # ids PORT: an nsca-ng.cfg the real server and ours (identities_file) read
	printf 'command_file = "%s"\nlisten = "127.0.0.1:%d"\ntimeout = 600.0\nauthorize "alice" {\n\tpassword = "alice-secret"\n\thosts = "web[0-9]+"\n}\n' "$tmp/cmd" "$1"
}
i=0
for bin in "${bins[@]}"; do
	i=$((i + 1))
	cp "$bin" "$tmp/nsca$i"
	p=$(free_port)
	ids "$p" >"$tmp/ids$i.cfg"
	printf 'server_address=127.0.0.1\nserver_port=%d\ncommand_file=%s\npassword=legacy\ndecryption_method=1\nidentities_file=%s\nnsca_ng_listen=127.0.0.1:%d\nnsca_ng_max_sessions=%d\nnsca_ng_timeout=600\n' \
		"$(free_port)" "$tmp/cmd" "$tmp/ids$i.cfg" "$p" $((n + 100)) >"$tmp/nsca$i.cfg"
	chmod 600 "$tmp/nsca$i.cfg" "$tmp/ids$i.cfg"
	"$tmp/nsca$i" -c "$tmp/nsca$i.cfg" -f 2>"$tmp/nsca$i.log" &
	pids+=($!)
	names+=("$bin") ports+=("$p") procs+=($!)
done
debs=${NSCA_NG_DEBS:-/tmp/nsca_fast-nsca-ng-debs}
if [ ! -f "$debs/nsca-ng-server_"*.deb ] 2>/dev/null; then
	mkdir -p "$debs" && (cd "$debs" && apt-get download nsca-ng-server >/dev/null 2>&1) || true
fi
if ls "$debs"/nsca-ng-server_*.deb >/dev/null 2>&1; then
	dpkg-deb -x "$(ls "$debs"/nsca-ng-server_*.deb | head -1)" "$tmp/ng"
	p=$(free_port)
	ids "$p" >"$tmp/nsca-ng.cfg"
	"$tmp/ng/usr/sbin/nsca-ng" -c "$tmp/nsca-ng.cfg" -F 2>"$tmp/nsca-ng.log" &
	pids+=($!)
	names+=("nsca-ng-server") ports+=("$p") procs+=($!)
fi
for p in "${ports[@]}"; do wait_port "$p"; done

declare -A before during after2 after60 closed
for k in "${!names[@]}"; do
	# A few sessions first: the pages of libssl's code and the first
	# allocations are the daemon's at rest, not the burst's.
	echo | "$tmp/ng-psk-client" "${tls[@]}" idle 127.0.0.1 "${ports[$k]}" alice alice-secret 10 >/dev/null
	sleep 1
	before[$k]=$(mem "${procs[$k]}")
done
for k in "${!names[@]}"; do
	mkfifo "$tmp/ctl$k"
	"$tmp/ng-psk-client" "${tls[@]}" idle 127.0.0.1 "${ports[$k]}" alice alice-secret "$n" <"$tmp/ctl$k" >"$tmp/idle$k.out" &
	idle=$!
	exec 8>"$tmp/ctl$k"
	for _ in $(seq 600); do grep -q '^open' "$tmp/idle$k.out" && break; sleep 0.1; done
	sleep 1
	during[$k]=$(mem "${procs[$k]}")
	echo >&8
	exec 8>&-
	wait "$idle"
	closed[$k]=$(date +%s)
	sleep 2
	after2[$k]=$(mem "${procs[$k]}")
done
for k in "${!names[@]}"; do
	left=$((closed[$k] + 60 - $(date +%s)))
	[ "$left" -le 0 ] || sleep "$left"
	after60[$k]=$(mem "${procs[$k]}")
done

echo "$n idle nsca-ng sessions ($version); PSS / RSS of the process tree in MB"
printf '%-40s %-17s %-17s %-17s %-17s\n' server before "$n open" "2 s after" "60 s after"
for k in "${!names[@]}"; do
	printf '%-40s %-17s %-17s %-17s %-17s\n' "${names[$k]}" "${before[$k]}" "${during[$k]}" "${after2[$k]}" "${after60[$k]}"
done
