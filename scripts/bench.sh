#!/usr/bin/env bash
# Benchmarks nsca_fast (built from this checkout; nsca_workers=0 and 2)
# side by side with floor_server (../shared/bench/floor_server.c: the
# kernel's floor, decodes nothing), the C++ nsca_fast (the binary named by
# NSCA_FAST_CPP, run with 2 workers x 2 threads) and the stock daemon
# (/usr/sbin/nsca --single, and --daemon in full mode) with the same clients
# and workloads, on loopback, and prints one table with ratios, the libmcrypt
# floor, per-stage CPU profiles of nsca_fast and its targets (against stock,
# and against floor_server and the C++ in the side by side), each met or
# missed. A missing floor_server.c or an unset NSCA_FAST_CPP
# skips that daemon with a note.
#
# BENCH_NSCA_BEFORE=/path/to/nsca adds that binary (another build of
# nsca_fast, e.g. main's) to the side by side of workloads b, a, c3, c14
# and c8, as "nsca_fast before" and "nsca_fast before w=2", each run right
# after the same run of this checkout's build, with the same config (from
# this checkout's conf/nsca.cfg): their lines stand together in the Results
# table and the Details.
#
#   NSCA_FAST_CPP=/tmp/nsca_fast_cpp/nsca bash scripts/bench.sh                # ~12 minutes on 2 cores
#   NSCA_FAST_CPP=/tmp/nsca_fast_cpp/nsca BENCH_QUICK=1 bash scripts/bench.sh  # < 3 minutes
#
# A run that looks disturbed (processes other than the daemon's tree and
# nsca-bench used more than BENCH_DISTURBED cores during it, default 0.25)
# is repeated once and the less costly of the two kept; BENCH_REDO=0 turns
# that off (the default in quick mode, which must stay within 3 minutes).
# The load average is printed with every run, but is no guide here: the
# daemon's and nsca-bench's own threads make 4 to 6 of it.
#
# Every daemon gets a fresh process per workload (so peak RSS is that
# workload's), a free loopback port, a config in a temporary directory and
# the FIFO command_file that nsca-bench creates and reads. Every process
# started here is stopped by its PID. BENCH_KEEP=1 keeps the directory with
# the configs, logs, JSON results and profiles.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

QUICK="${BENCH_QUICK:-0}"
STOCK="${STOCK_NSCA:-/usr/sbin/nsca}"
# REPS: each comparison run is repeated and the report keeps, per workload
# and daemon, the run with the least server CPU per check: on a shared
# machine other processes only ever add cost.
if [ "$QUICK" = 1 ]; then
  D=2s; DG=4s; DPROF=2; IDLE=10000; REPS="${BENCH_REPS:-1}"; FLOOR_REPS=1; PROFILES="prof-b prof-a"
else
  D=5s; DG=15s; DPROF=5; IDLE=10000; REPS="${BENCH_REPS:-2}"; FLOOR_REPS=3; PROFILES="prof-b prof-a prof-c3 prof-e"
fi
PASSWORD='bench-password'
CPP="${NSCA_FAST_CPP:-}"
FLOOR_SRC="../shared/bench/floor_server.c"
DISTURBED="${BENCH_DISTURBED:-0.25}"
BEFORE="${BENCH_NSCA_BEFORE:-}"
REDO="${BENCH_REDO:-$([ "$QUICK" = 1 ] && echo 0 || echo 1)}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/nsca-bench.XXXXXX")"
RESULTS="$WORK/results.jsonl"
FIFO="$WORK/nagios.cmd"
DPID=""     # the daemon running now
DPORT=""
PPORT=""    # its pprof port, when profiled
BPID=""     # a background nsca-bench (profiling runs)
FAST_BIN="" FAST_LABEL=""  # nsca_fast's binary and label when not this checkout's build
BENCH="$WORK/nsca-bench"
. scripts/bench-lib.sh

cleanup() {
  if [ -n "$BPID" ]; then kill -TERM "$BPID" 2>/dev/null || true; wait "$BPID" 2>/dev/null || true; fi
  stop_daemon
  if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

raise_nofile

echo "== Machine"
echo "date:       $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "cpus:       $(nproc) x $(cpu_model)"
echo "kernel:     $(uname -sr)"
echo "go:         $(go version)"
echo "nsca_fast:  commit $(checkout_commit)"
echo "stock:      $("$STOCK" -V 2>&1 | grep -m1 Version || true) ($STOCK)"
if [ -n "$CPP" ] && [ -x "$CPP" ]; then
  echo "C++:        $CPP (nsca_workers=2, nsca_threads_per_worker=2)"
else
  [ -n "$CPP" ] && echo "NOTE:       NSCA_FAST_CPP=$CPP is not an executable: the C++ nsca_fast is skipped"
  [ -z "$CPP" ] && echo "NOTE:       NSCA_FAST_CPP is unset: the C++ nsca_fast is skipped (see ../shared/bench/README.md)"
  CPP=""
fi
if [ -n "$BEFORE" ]; then
  [ -x "$BEFORE" ] || { echo "BENCH_NSCA_BEFORE=$BEFORE is not an executable" >&2; exit 2; }
  echo "before:     $BEFORE (\"nsca_fast before\", w=0 and w=2, in workloads b, a, c3, c14 and c8)"
fi
if [ -f "$FLOOR_SRC" ]; then
  echo "floor:      $FLOOR_SRC"
else
  echo "NOTE:       $FLOOR_SRC is absent: floor_server is skipped"
fi
echo "open files: $(ulimit -n); loadavg before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "mode:       $([ "$QUICK" = 1 ] && echo quick || echo full), runs of $D (overload $DG), $REPS repetition(s), disturbed runs repeated: $([ "$REDO" = 1 ] && echo "yes (other processes > $DISTURBED cores)" || echo no)"
if awk '{exit !($1 > 0.7)}' /proc/loadavg; then
  echo "WARNING:    the machine is not idle (loadavg $(cut -d' ' -f1 /proc/loadavg)); other processes take CPU from the"
  echo "            daemon and the generator: see the busy/other column and compare runs made back to back."
fi
echo

go build -o "$WORK/nsca" ./src
go build -o "$WORK/nsca-bench" ./scripts/nsca-bench
FLOORSRV=""
if [ -f "$FLOOR_SRC" ]; then
  if gcc -O2 -o "$WORK/floor_server" "$FLOOR_SRC"; then
    FLOORSRV="$WORK/floor_server"
  else
    echo "NOTE: floor_server did not build: skipped"
  fi
fi
mkfifo "$FIFO"   # before any daemon starts: stock would otherwise use alternate_dump_file

# start_fast METHOD WORKERS [pprof]: nsca_fast (FAST_BIN, default this
# checkout's build) with conf/nsca.cfg's settings, except what must differ
# on a test machine.
start_fast() {
  local method="$1" workers="$2" pprof="${3:-}" cfg
  DPORT="$("$BENCH" freeport)"
  cfg="$WORK/fast-$DPORT.cfg"
  {
    grep -vE '^(pid_file|server_port|server_address|nsca_user|nsca_group|command_file|alternate_dump_file|password|decryption_method|nsca_workers|connection_timeout|max_connections)=' conf/nsca.cfg
    echo "pid_file=$WORK/fast-$DPORT.pid"
    echo "server_port=$DPORT"
    echo "server_address=127.0.0.1"
    echo "command_file=$FIFO"
    echo "alternate_dump_file=$WORK/fast-dump"
    echo "password=$PASSWORD"
    echo "decryption_method=$method"
    echo "nsca_workers=$workers"
    # Idle connections must outlive the run (the default closes a client
    # that sends < 720 bytes in 10 s).
    echo "connection_timeout=3600"
    # What max_connections=0 picks with 65536 open files; this machine's hard
    # limit may be lower, and 0 would then refuse part of the 10,000 idle.
    echo "max_connections=16384"
  } > "$cfg"
  chmod 600 "$cfg"
  local args=(-c "$cfg" -f)
  PPORT=""
  if [ -n "$pprof" ]; then
    PPORT="$("$BENCH" freeport)"
    args+=(--pprof "127.0.0.1:$PPORT")
  fi
  "${FAST_BIN:-$WORK/nsca}" "${args[@]}" > "$WORK/fast-$DPORT.log" 2>&1 &
  DPID=$!
  wait_listen "$DPORT" "$DPID"
}

# start_floor: floor_server, which opens the FIFO for writing at start: a
# reader held here for that moment lets the open return (nsca-bench opens its
# own before any client connects).
start_floor() {
  DPORT="$("$BENCH" freeport)"
  exec 3<>"$FIFO"
  "$FLOORSRV" "$DPORT" "$FIFO" > "$WORK/floor-$DPORT.log" 2>&1 3<&- &
  DPID=$!
  local rc=0
  wait_listen "$DPORT" "$DPID" || rc=1
  exec 3<&-
  return $rc
}

# start_cpp METHOD: the C++ nsca_fast, 2 workers x 2 threads, in the
# foreground, with the settings of stock's config where options exist.
start_cpp() {
  local method="$1" cfg
  DPORT="$("$BENCH" freeport)"
  cfg="$WORK/cpp-$DPORT.cfg"
  cat > "$cfg" <<EOF
pid_file=$WORK/cpp-$DPORT.pid
server_port=$DPORT
server_address=127.0.0.1
nsca_user=$(id -un)
nsca_group=$(id -gn)
debug=0
command_file=$FIFO
max_packet_age=30
max_packet_age_enabled=0
password=$PASSWORD
decryption_method=$method
decryption_mode=1
nsca_workers=2
nsca_threads_per_worker=2
max_checks_per_connection=1000
dir_stats=$WORK
EOF
  chmod 600 "$cfg"
  "$CPP" -c "$cfg" -f > "$WORK/cpp-$DPORT.log" 2>&1 &
  DPID=$!
  wait_listen "$DPORT" "$DPID"
}

# bench WORKLOAD DAEMON ARGS...: one measured run against the running daemon.
# It sets DISTURBED_RUN=1 when other processes took more than $DISTURBED cores.
DISTURBED_RUN=0
bench() {
  local workload="$1" daemon="$2" out
  shift 2
  out="$("$BENCH" --json --port "$DPORT" --password "$PASSWORD" --fifo "$FIFO" --server-pid "$DPID" \
    --workload "$workload" --daemon "$daemon" "$@" 2>>"$WORK/bench.err")" || true
  if [ -z "$out" ]; then
    echo "  $workload / $daemon: nsca-bench failed: $(tail -1 "$WORK/bench.err")"
    return 0
  fi
  echo "$out" >> "$RESULTS"
  DISTURBED_RUN="$(echo "$out" | jq -r --argjson t "$DISTURBED" 'if .other_procs_cores > $t then 1 else 0 end')"
  echo "$out" | jq -r --arg w "$workload" --arg d "$daemon" \
    '"  \($w) / \($d): \(.checks_per_sec|floor) checks/s, other processes \(.other_procs_cores*100|floor/100) cores, loadavg \(.loadavg), \(.server_cpu_us_per_check*100|floor/100) µs CPU/check, p50 \(.latency_p50_ms*1000|floor/1000) ms, p99 \(.latency_p99_ms*1000|floor/1000) ms, RSS \(.rss_peak_kb/1024*10|floor/10) MB, \(.delivered)/\(.sent) delivered"'
}

# run_fast / run_stock / run_cpp / run_floor: a fresh daemon for one
# workload; a disturbed run is repeated once (the report keeps the run with
# the least server CPU per check).
redo() { # the command to repeat when the last run was disturbed
  if [ "$DISTURBED_RUN" = 1 ] && [ "$REDO" = 1 ]; then
    echo "  (disturbed: other processes took more than $DISTURBED cores: repeated)"
    DISTURBED_RUN=0
    "$@"
    DISTURBED_RUN=0
  fi
  return 0
}
run_fast_once() { # workload method workers args...; FAST_LABEL goes with FAST_BIN
  local w="$1" m="$2" n="$3" label="${FAST_LABEL:-nsca_fast}"
  shift 3
  start_fast "$m" "$n" || { stop_daemon; return 0; }
  [ "$n" != 0 ] && label="$label w=$n"
  bench "$w" "$label" --method "$m" "$@"
  stop_daemon
}
run_fast() { run_fast_once "$@"; redo run_fast_once "$@"; }
run_before() { [ -n "$BEFORE" ] || return 0; FAST_BIN="$BEFORE" FAST_LABEL="nsca_fast before" run_fast "$@"; }
run_stock_once() { # workload method mode args...
  local w="$1" m="$2" mode="$3"
  shift 3
  start_stock "$m" "$mode" 30 || { stop_daemon; return 0; }
  bench "$w" "stock --$mode" --method "$m" "$@"
  stop_daemon
}
run_stock() { run_stock_once "$@"; redo run_stock_once "$@"; }
run_cpp_once() { # workload method args...
  local w="$1" m="$2"
  shift 2
  start_cpp "$m" || { stop_daemon; return 0; }
  bench "$w" "C++ nsca_fast" --method "$m" "$@"
  stop_daemon
}
run_cpp() { [ -n "$CPP" ] || return 0; run_cpp_once "$@"; redo run_cpp_once "$@"; }
run_floor_once() { # workload args... (XOR)
  local w="$1"
  shift
  start_floor || { stop_daemon; return 0; }
  bench "$w" "floor_server" --method 1 "$@"
  stop_daemon
}
run_floor() { [ -n "$FLOORSRV" ] || return 0; run_floor_once "$@"; redo run_floor_once "$@"; }

echo "== Runs"
A=(--checks-per-conn 20 --conns 8 --duration "$D")
B=(--checks-per-conn 1 --conns 8 --duration "$D")
C=(--checks-per-conn 10 --conns 4 --duration "$D")
# all_side WORKLOAD METHOD ARGS...: the side by side of the daemons, each
# with a fresh process: floor_server (XOR only: it decodes nothing), the C++
# nsca_fast, ours with nsca_workers=0 and 2 (each followed by the binary
# before, if given), stock --single (and --daemon in full mode).
all_side() {
  local w="$1" m="$2"
  shift 2
  if [ "$m" = 1 ]; then run_floor "$w" "$@"; fi
  run_cpp "$w" "$m" "$@"
  run_fast "$w" "$m" 0 "$@"
  run_before "$w" "$m" 0 "$@"
  run_fast "$w" "$m" 2 "$@"
  run_before "$w" "$m" 2 "$@"
  run_stock "$w" "$m" single "$@"
  [ "$QUICK" = 1 ] || run_stock "$w" "$m" daemon "$@"
}
for rep in $(seq 1 "$REPS"); do
  echo " -- repetition $rep of $REPS"
  all_side "b: XOR, 1 check/conn, 8 conns" 1 "${B[@]}"
  all_side "a: XOR, 20 checks/conn, 8 conns" 1 "${A[@]}"
  all_side "c3: 3DES, 10 checks/conn, 4 conns" 3 "${C[@]}"
  all_side "c14: method 14 (AES), 10 checks/conn, 4 conns" 14 "${C[@]}"
  all_side "c8: Blowfish, 10 checks/conn, 4 conns" 8 "${C[@]}"
  if [ "$QUICK" != 1 ]; then
    # Stock reads a legacy packet only when the connection ends after exactly
    # 720 bytes, so the comparison sends one per connection.
    run_fast "d: XOR legacy 720 B, 1 check/conn, 8 conns" 1 0 --legacy "${B[@]}"
    run_stock "d: XOR legacy 720 B, 1 check/conn, 8 conns" 1 single --legacy "${B[@]}"
    run_fast "d20: XOR legacy 720 B, 20 checks/conn, 8 conns" 1 0 --legacy "${A[@]}"
  fi
  # Stock --daemon cannot take part: a process per connection (10,000 of
  # them) and a fixed 10 s socket timeout that closes idle clients.
  [ "$QUICK" = 1 ] || run_fast "e: (a) + $IDLE idle conns" 1 0 "${A[@]}" --idle "$IDLE" --timeout 30s
  run_fast "e: (a) + $IDLE idle conns" 1 2 "${A[@]}" --idle "$IDLE" --timeout 30s
  [ "$QUICK" = 1 ] || run_stock "e: (a) + $IDLE idle conns" 1 single "${A[@]}" --idle "$IDLE" --timeout 30s
  # Overload: as many clients as fast as they can; RSS must not follow the
  # number of connections.
  for n in 0 2; do
    run_fast "g: overload, XOR, 20 checks/conn, 512 conns" 1 "$n" --checks-per-conn 20 --conns 512 --duration "$DG"
  done
  [ "$QUICK" = 1 ] || run_fast "g1k: overload, XOR, 20 checks/conn, 1,000 conns" 1 0 --checks-per-conn 20 --conns 1000 --duration "$DG"
  run_fast "g1k: overload, XOR, 20 checks/conn, 1,000 conns" 1 2 --checks-per-conn 20 --conns 1000 --duration "$DG"
  [ "$QUICK" = 1 ] || run_fast "g10k: overload, 512 conns sending + 9,488 idle" 1 2 --checks-per-conn 20 --conns 512 --idle 9488 --timeout 30s --duration "$DG"
done

# Latency at half of each daemon's own maximum of workload a.
half_of() { # daemon label
  jq -r --arg d "$1" 'select(.workload|startswith("a:")) | select(.daemon==$d) | .checks_per_sec' "$RESULTS" | sort -g | tail -1 |
    awk '$1 > 0 {printf "%.0f", $1/2}'
}
for n in 0 2; do
  label="nsca_fast"
  [ "$n" != 0 ] && label="nsca_fast w=$n"
  half="$(half_of "$label")"
  if [ -n "$half" ]; then run_fast "f: (a) paced at half of its max" 1 "$n" "${A[@]}" --rate "$half"; fi
done
if [ -n "$CPP" ]; then
  half="$(half_of "C++ nsca_fast")"
  if [ -n "$half" ]; then run_cpp "f: (a) paced at half of its max" 1 "${A[@]}" --rate "$half"; fi
fi
# A control for the latency: both daemons at one rate stock --single can take.
if [ "$QUICK" != 1 ]; then
  run_fast "f5k: (a) paced at 5,000 checks/s" 1 0 "${A[@]}" --rate 5000
  run_stock "f5k: (a) paced at 5,000 checks/s" 1 single "${A[@]}" --rate 5000
fi

echo
echo "== libmcrypt floor"
FLOOR="$WORK/floor.txt"
go test -run '^$' -bench 'BenchmarkDecryptFrom/(tripledes|blowfish|rijndael-128)$' -count "$FLOOR_REPS" ./cgo/mcrypt | tee "$FLOOR" | grep '^Benchmark' || true
# The same call timed as thread CPU time, the unit of the server's CPU per
# check; three times each, the report keeps the least disturbed (lowest).
for rep in $(seq 1 "$FLOOR_REPS"); do
  for a in tripledes:300 blowfish:1200 rijndael-128:600; do
    "$BENCH" floor "${a%%:*}" "${a##*:}" | tee -a "$FLOOR"
  done
done

echo "== Profiles (CPU, ${DPROF}s, nsca_fast with --pprof)"
profile() { # name method lead args...: lead = seconds before profiling starts
  local name="$1" m="$2" lead="$3" prof="$WORK/$1.prof"
  shift 3
  start_fast "$m" 0 pprof
  "$BENCH" --port "$DPORT" --password "$PASSWORD" --fifo "$FIFO" --server-pid "$DPID" --method "$m" "$@" \
    --duration "$((DPROF + lead + 1))s" > "$WORK/$name.txt" 2>&1 &
  BPID=$!
  sleep "$lead"
  curl -sf -o "$prof" "http://127.0.0.1:$PPORT/debug/pprof/profile?seconds=$DPROF" || echo "profile $name failed"
  wait "$BPID" || true
  BPID=""
  stop_daemon
}
for p in $PROFILES; do
  case "$p" in
  prof-a) profile prof-a 1 1 --checks-per-conn 20 --conns 8 ;;
  prof-c3) profile prof-c3 3 1 --checks-per-conn 10 --conns 4 ;;
  prof-b) profile prof-b 1 1 --checks-per-conn 1 --conns 8 ;;
  prof-e) profile prof-e 1 4 --checks-per-conn 20 --conns 8 --idle "$IDLE" --timeout 30s ;;
  esac
done
echo
"$BENCH" report --results "$RESULTS" --floor "$FLOOR"

for p in prof-b:"XOR, 1 check/conn (workload b)" prof-a:"XOR, 20 checks/conn (workload a)" \
  prof-c3:"3DES, 10 checks/conn (workload c3)" prof-e:"XOR, 20 checks/conn + $IDLE idle connections (workload e)"; do
  name="${p%%:*}"
  title="${p#*:}"
  f="$WORK/$name.prof"
  [ -s "$f" ] || continue
  echo
  echo "== Per-stage CPU profile: $title"
  { grep -E '^(rate|server):' "$WORK/$name.txt" || true; } | sed 's/^/   run: /'
  # Share of samples by the stage label; samples without one are the Go
  # runtime's own goroutines (GC workers, sysmon) and the pprof server.
  go tool pprof -tags "$WORK/nsca" "$f" 2>/dev/null | sed -n '/ stage:/,/^ *$/p'
  total="$(go tool pprof -top -nodecount=1 "$WORK/nsca" "$f" 2>/dev/null | sed -n 's/.*Total samples = \([0-9.]*m\?s\).*/\1/p')"
  echo "   (all samples: $total; percentages below are of all samples)"
  for stage in accept read decrypt validate emit; do
    echo "   -- stage=$stage: cumulative, by daemon function and system call"
    go tool pprof -top -cum -nodecount=7 -tagfocus="stage=$stage" \
      -show='^(golang\.org/x/sys/unix\.[A-Z]|nsca_fast/|runtime\.(cgocall|futex|mallocgc|gcBgMarkWorker|selectgo|chansend|chanrecv)$)' \
      "$WORK/nsca" "$f" 2>/dev/null | sed -n '/flat%/,$p' | tail -n +2 | { grep -v 'stages.run.func1\|startSharded' || true; } | sed 's/^/      /'
  done
  echo "   -- whole process, top functions (flat)"
  go tool pprof -top -nodecount=12 "$WORK/nsca" "$f" 2>/dev/null | sed -n '/flat%/,$p' | sed 's/^/      /'
done
echo
echo "loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)"
