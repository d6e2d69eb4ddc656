#!/usr/bin/env bash
# Where a trickling packet's CPU goes (issue 36): each binary given (two
# builds of nsca_fast, e.g. main's before a change and after it) and
# floor_server serve the same paced send_nsca-like clients (nsca-load, one
# thread per client, each packet built and encrypted just before it is
# written) at a fleet's rate, and perf stat counts over the daemon's
# process tree, per delivered check: CPU, context switches and how many
# of them were preemptions, CPU migrations, page faults, futex(2),
# epoll_wait(2) and epoll_pwait(2), nanosleep(2) (the Go runtime's
# sysmon), every system call and MSR writes (in a virtual machine, the
# IPIs and timer deadlines that exit to the hypervisor). Runs are
# interleaved, TRICKLE_REPS rounds (default 3), and the median of each
# figure is printed.
#
#   bash scripts/bench-trickle.sh /tmp/nsca-before ./nsca        # ~4 minutes
#   TRICKLE_WORKERS=2 ... (nsca_workers of the nsca_fast runs; default 0)
#   bash scripts/bench-trickle.sh ./nsca ./nsca@w2   # BIN@wN: nsca_workers=N for that one
#   bash scripts/bench-trickle.sh ./nsca gofloor:poller gofloor:handoff
#     # gofloor:MODE: floor_server in Go (scripts/gofloor), at one P
#
# Needs perf, gcc, libmcrypt-dev and ../shared/bench/floor_server.c. Every
# process started is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
[ $# -ge 1 ] || { echo "usage: $0 NSCA_BINARY..." >&2; exit 2; }
BINS=("$@")
REPS="${TRICKLE_REPS:-3}"
WORKERS="${TRICKLE_WORKERS:-0}"
DUR="${TRICKLE_SECONDS:-4}"
PASSWORD=trickle-password
STOCK=/usr/sbin/nsca
WORK="$(mktemp -d /tmp/bench-trickle.XXXXXX)"
FIFO="$WORK/nagios.cmd"
BENCH="$WORK/nsca-bench"
DPID=""
. scripts/bench-lib.sh
trap 'stop_daemon; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

go build -o "$BENCH" ./scripts/nsca-bench
go build -o "$WORK/gofloor" ./scripts/gofloor
gcc -O2 -o "$WORK/nsca-load" scripts/nsca-load.c -lmcrypt -lpthread
gcc -O2 -o "$WORK/floor_server" ../shared/bench/floor_server.c
mkfifo "$FIFO"

# start BIN: nsca_fast (start_nsca, XOR; BIN@wN with nsca_workers=N),
# gofloor in MODE for "gofloor:MODE", or
# floor_server for "floor".
start() {
	local floor=()
	case "$1" in
	floor) floor=("$WORK/floor_server") ;;
	gofloor:*) floor=(env GOMAXPROCS=1 "$WORK/gofloor" "${1#gofloor:}") ;;
	esac
	if [ ${#floor[@]} -gt 0 ]; then
		DPORT="$(free_port)"
		start_fifo_writer "$DPORT" "$WORK/daemon.log" "${floor[@]}" "$DPORT" "$FIFO"
		return
	fi
	local workers="$WORKERS"
	[[ "$1" != *@w* ]] || workers="${1##*@w}"
	start_nsca "${1%@w*}" "$workers" 1 ""
}

EVENTS=task-clock,context-switches,cpu-migrations,page-faults,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_nanosleep,raw_syscalls:sys_enter
# In a virtual machine each MSR write is an exit to the hypervisor: the
# IPIs that wake another CPU (x2APIC) and the timer's deadline. Counted
# where the kernel has the tracepoint; 0 elsewhere.
if [ -d /sys/kernel/tracing/events/msr/write_msr ] || [ -d /sys/kernel/debug/tracing/events/msr/write_msr ]; then
	EVENTS="$EVENTS,msr:write_msr"
fi

# Involuntary context switches: the switches out of a task still runnable
# (preempted, by the FIFO's reader for one) are the ones whose prev_state
# is 0, TASK_RUNNING.
PREEMPTED=(-e sched:sched_switch --filter 'prev_state == 0')

# run LABEL BIN K RATE: one measured run; appends "LABEL K RATE cpu_us cs
# preempted migr faults futex epoll nanosleep syscalls msr-writes" per
# check to $WORK/runs.
run() {
	local label="$1" bin="$2" k="$3" rate="$4" out pids pstat n
	start "$bin"
	sleep 0.3 # workers started
	pids="$(echo "$DPID" $(pgrep -P "$DPID" || true) | tr ' ' ',')"
	perf stat -x, -e "$EVENTS" "${PREEMPTED[@]}" -p "$pids" -o "$WORK/pstat" &
	pstat=$!
	out="$("$BENCH" --json --port "$DPORT" --password "$PASSWORD" --fifo "$FIFO" --server-pid "$DPID" --method 1 \
		--checks-per-conn "$k" --conns 8 --duration "${DUR}s" --rate "$rate" --drain 2s \
		--exec-client "$WORK/nsca-load" 2>>"$WORK/bench.err")" || true
	kill -INT "$pstat"
	wait "$pstat" || true
	stop_daemon
	n="$(echo "$out" | jq -r '.delivered // 0')"
	[ "$n" -gt 0 ] || { echo "  $label k=$k: no check delivered: $(tail -1 "$WORK/bench.err")"; return; }
	awk -F, -v l="$label" -v k="$k" -v r="$rate" -v n="$n" -v cpu="$(echo "$out" | jq -r .server_cpu_us_per_check)" '
		/^[0-9]/ { v[$3] = $1 / n }
		END { printf "%s %s %s %.1f %.2f %.2f %.2f %.3f %.2f %.2f %.2f %.2f %.2f\n", l, k, r, cpu, v["context-switches"], v["sched:sched_switch"],
			v["cpu-migrations"], v["page-faults"],
			v["syscalls:sys_enter_futex"], v["syscalls:sys_enter_epoll_pwait"] + v["syscalls:sys_enter_epoll_wait"], v["syscalls:sys_enter_nanosleep"], v["raw_syscalls:sys_enter"],
			v["msr:write_msr"] }' \
		"$WORK/pstat" | tee -a "$WORK/runs"
}

echo "== bench-trickle: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); cpus: $(nproc) x $(cpu_model); kernel $(uname -r); commit $(checkout_commit); nsca_workers=$WORKERS; $REPS rounds of ${DUR} s"
echo "per run: label k rate cpu-us/check ctxsw preempted migr faults futex epoll-waits nanosleep syscalls msr-writes (each per check)"
for rep in $(seq "$REPS"); do
	for spec in 20:2000 1:1000; do
		k="${spec%%:*}" rate="${spec##*:}"
		run floor_server floor "$k" "$rate"
		i=0
		for b in "${BINS[@]}"; do
			i=$((i + 1))
			run "$i:$(basename "$b")" "$b" "$k" "$rate"
		done
	done
done
echo
echo "medians over $REPS rounds, per delivered check (XOR, 8 paced clients):"
echo
echo "| workload | server | CPU µs | context switches | of them preempted | CPU migrations | page faults | futex | epoll waits | nanosleep | all syscalls | MSR writes (IPIs, timers) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
sort -k2,2nr -k1,1 "$WORK/runs" | awk '
	function median(s,   a, n, i, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return a[int((n + 1) / 2)] }
	{ key = $2 "|" $1; if (!(key in seen)) { order[++m] = key; seen[key] = 1; rate[key] = $3 } for (f = 4; f <= 13; f++) vals[key, f] = vals[key, f] " " $f }
	END { for (i = 1; i <= m; i++) { split(order[i], p, "|"); printf "| XOR %s/conn, %s checks/s | %s |", p[1], rate[order[i]], p[2]; for (f = 4; f <= 13; f++) printf " %s |", median(vals[order[i], f]); print "" } }'
