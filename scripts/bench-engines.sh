#!/usr/bin/env bash
# Server CPU per check of the decryption engines (issue 14), same run:
# nsca_fast with decryption_engine=libmcrypt and =native, the C++ nsca_fast
# when NSCA_CPP names its binary, and libmcrypt's own cost per packet
# (`nsca-bench floor`), for methods 14, 3 and 2 at 10 checks per connection,
# 4 concurrent clients, 4304-byte packets, over loopback.
#
#   NSCA_CPP=/tmp/nsca_fast_cpp/nsca bash scripts/bench-engines.sh
#
# ENGINE_D sets the length of each run (default 5s), ENGINE_REPS how often
# each is repeated (default 2; the run with the least CPU per check is kept,
# since other load only ever adds cost). Every process started here is
# stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
D="${ENGINE_D:-5s}"
REPS="${ENGINE_REPS:-2}"
CPP="${NSCA_CPP:-}"
PASSWORD='bench-password'
WORK="$(mktemp -d "${TMPDIR:-/tmp}/nsca-engines.XXXXXX")"
FIFO="$WORK/nagios.cmd"
DPID=""
stop_daemon() {
  [ -n "$DPID" ] || return 0
  local pid="$DPID"
  DPID=""
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
trap 'stop_daemon; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

go build -o "$WORK/nsca" ./src
go build -o "$WORK/nsca-bench" ./scripts/nsca-bench
BENCH="$WORK/nsca-bench"
mkfifo "$FIFO"

wait_listen() { # port pid
  for _ in $(seq 1 200); do
    ss -ltnH "sport = :$1" 2>/dev/null | grep -q . && return 0
    kill -0 "$2" 2>/dev/null || { echo "daemon exited at start:" >&2; cat "$WORK/daemon.log" >&2; return 1; }
    sleep 0.025
  done
  echo "daemon did not listen on $1" >&2
  return 1
}

# start BIN METHOD EXTRA-OPTION-LINES [ARGS...]: one daemon, 2 decrypt threads.
start() {
  local bin="$1" method="$2" extra="$3"
  shift 3
  PORT="$("$BENCH" freeport)"
  {
    echo "pid_file=$WORK/nsca-$PORT.pid"
    echo "server_port=$PORT"
    echo "server_address=127.0.0.1"
    echo "command_file=$FIFO"
    echo "password=$PASSWORD"
    echo "decryption_method=$method"
    echo "decryption_mode=1"
    echo "nsca_workers=0"
    echo "nsca_threads_per_worker=2"
    echo "max_packet_age_enabled=0"
    printf '%b' "$extra"
  } > "$WORK/nsca.cfg"
  chmod 600 "$WORK/nsca.cfg"
  "$bin" -c "$WORK/nsca.cfg" -f "$@" > "$WORK/daemon.log" 2>&1 &
  DPID=$!
  wait_listen "$PORT" "$DPID"
}

# run LABEL METHOD: the least CPU per check of REPS runs against the daemon started.
run() {
  local label="$1" method="$2" best="" out v
  for _ in $(seq 1 "$REPS"); do
    out="$("$BENCH" --json --port "$PORT" --password "$PASSWORD" --fifo "$FIFO" --server-pid "$DPID" \
      --method "$method" --checks-per-conn 10 --conns 4 --duration "$D" --drain 2s 2>>"$WORK/bench.err")" || continue
    v="$(echo "$out" | jq -r '.server_cpu_us_per_check')"
    if [ -z "$best" ] || awk -v a="$v" -v b="$best" 'BEGIN{exit !(a < b)}'; then best="$v"; BEST="$out"; fi
  done
  [ -n "$best" ] || { echo "| $method | $label | failed: $(tail -1 "$WORK/bench.err") |"; return 0; }
  echo "$BEST" | jq -r --arg l "$label" '"| \(.method) | \($l) | \(.server_cpu_us_per_check*10|floor/10) | \(.checks_per_sec|floor) | \(.delivered)/\(.sent) |"'
  CPU["$label"]="$best"
}

echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); cpus: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); commit $(git rev-parse --short HEAD); runs of $D, best of $REPS"
echo
echo "| method | server | CPU µs/check | checks/s | delivered/sent |"
echo "|---|---|---|---|---|"
declare -A CPU FLOOR
for m in 14:rijndael-128 3:tripledes 2:des; do
  method="${m%%:*}" alg="${m#*:}"
  CPU=()
  start "$WORK/nsca" "$method" "decryption_engine=libmcrypt\n"; run "nsca_fast libmcrypt" "$method"; stop_daemon
  start "$WORK/nsca" "$method" "decryption_engine=native\n"; run "nsca_fast native" "$method"; stop_daemon
  if [ -n "$CPP" ]; then
    # One worker process (its smallest setting) with the same 2 threads.
    # It drops to nagios:nogroup unless told otherwise, and needs dir_stats.
    start "$CPP" "$method" "nsca_user=$(id -un)\nnsca_group=$(id -gn)\ndir_stats=$WORK\nmax_checks_per_connection=1000\n" -n 1
    run "C++ nsca_fast" "$method"; stop_daemon
  fi
  FLOOR[$method]="$("$BENCH" floor "$alg" 2000 | awk '{print $3/1000}')"
  echo "| $method | libmcrypt alone, per 4304-byte packet | ${FLOOR[$method]} | | |"
  r() { awk -v a="${CPU[$1]:-0}" -v b="$2" 'BEGIN{ if (a > 0 && b > 0) printf "%.2f", a/b; else printf "-" }'; }
  echo "| $method | ratios: native/libmcrypt $(r "nsca_fast native" "${CPU["nsca_fast libmcrypt"]:-0}"), native/C++ $(r "nsca_fast native" "${CPU["C++ nsca_fast"]:-0}"), native/floor $(r "nsca_fast native" "${FLOOR[$method]}") | | | |"
done
