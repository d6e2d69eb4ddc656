#!/usr/bin/env bash
# Issue 36's table: one run that measures every workload an operator asks
# about against every daemon that serves it, interleaved, and prints one
# markdown table (a row per workload, a column per daemon: server CPU per
# delivered result, utime+stime of the daemon's process tree, and
# results/s; what was lost; ours against floor_server or the program it
# replaces), then the issue's targets, each met or missed.
#
#   NSCA_FAST_CPP=/tmp/nsca_fast_cpp/nsca NRDP_SERVER_DIR=/tmp/nrdp-real \
#     bash scripts/bench-table.sh                      # ~8-9 minutes on 2 cores
#   BENCH_TABLE_QUICK=1 ... bash scripts/bench-table.sh  # ~2.5 minutes
#
# Daemons: ours (./nsca built by scripts/build.sh from this checkout,
# nsca_workers=0, and "ours w2", nsca_workers=2), the C++ nsca_fast
# (NSCA_FAST_CPP names its binary; 2 workers x 2 threads), stock nsca
# 2.10.2 (STOCK_NSCA, default /usr/sbin/nsca, --single), floor_server
# (../shared/bench/floor_server.c, gcc -O2: the kernel's floor, decodes
# nothing; send_nsca rows), Debian's nsca-ng-server (nsca-ng rows; the
# packages are downloaded into NSCA_NG_DEBS as tests/ do) and the real NRDP
# (NRDP_SERVER_DIR: a NagiosEnterprises/nrdp tree, or its server/
# directory, run with `php -S`; NRDP rows). A daemon whose program is
# missing is skipped with a note.
#
# Workloads (clients on the same cores as the daemons):
#  - send_nsca-paced clients (scripts/nsca-load.c: a thread per client, each
#    packet built and encrypted just before it is written), 8 clients: XOR
#    20 checks per connection at BENCH_TABLE_RATE (default 2,000) checks/s,
#    XOR 1 per connection at 1,000/s, native 3DES 1 per connection at 300/s
#    (libmcrypt's 3DES in the client and in the C++ and stock costs ~1.5 ms
#    a packet each: 300/s leaves the cores room) beside XOR 1 per connection
#    at the same 300/s, and XOR 20 per connection unpaced (saturation);
#  - a fleet's burst: 10,000 connections arriving within one second, AES
#    (method 14), one check each (`nsca-bench --burst`, encrypting with
#    crypto/aes so that the generator leaves the cores to the daemons; it
#    still needs ~0.3 ms of CPU per connection, so on 2 shared cores the
#    arrivals spread over 2-3 s): delivered/sent and latency from the write
#    to the line in the FIFO;
#  - nsca-ng with Debian's send_nsca: 8 clients x 500 results per session,
#    and 100 clients x 1 result per session; ours against nsca-ng-server;
#  - NRDP, 4 clients posting 1 and 100 results per request: ours against
#    the PHP NRDP, whose results are check result files (its submitcheck
#    writes no command file line), read as Nagios' reaper would; php -S
#    logs every request to its output (a file here), part of its cost.
# nsca-bench plays the monitoring core for all: it reads the FIFO and
# matches every line to the result sent. Each run is a fresh daemon; the
# daemons of a workload take turns, BENCH_TABLE_REPS rounds (default 2, 1
# in quick mode), and a cell keeps the run with the least CPU per result
# (other load on the machine only ever adds; each target also gives the
# median and range of its rounds' own ratios). Runs last BENCH_TABLE_D
# seconds (default 5, 2 in quick mode); BENCH_TABLE_ONLY="x20 ng-a ..."
# runs only the rows with those ids (x20 x1 d3 x1s sat burst ng-a ng-b
# nrdp1 nrdp100). The raw line of every run is
# printed as it ends, then the tables. Every process started here is
# stopped by its PID; the temporary directory is under /tmp (BENCH_KEEP=1
# keeps it).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

QUICK="${BENCH_TABLE_QUICK:-0}"
if [ "$QUICK" = 1 ]; then D="${BENCH_TABLE_D:-2}" REPS="${BENCH_TABLE_REPS:-1}"; else D="${BENCH_TABLE_D:-5}" REPS="${BENCH_TABLE_REPS:-2}"; fi
RATE="${BENCH_TABLE_RATE:-2000}"
STOCK="${STOCK_NSCA:-/usr/sbin/nsca}"
CPP="${NSCA_FAST_CPP:-}"
NRDP_DIR="${NRDP_SERVER_DIR:-}"
FLOOR_SRC="../shared/bench/floor_server.c"
PASSWORD='bench-password'
TOKEN='bench-token'

WORK="$(mktemp -d /tmp/bench-table.XXXXXX)"
FIFO="$WORK/nagios.cmd"
RESULTS="$WORK/results.jsonl"
BENCH="$WORK/nsca-bench"
DPID="" DPORT=""
. scripts/bench-lib.sh

# cleanup: stops the daemon running, if any, and removes WORK.
cleanup() {
  stop_daemon
  if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
raise_nofile

echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "cpus:    $(nproc) x $(cpu_model)"
echo "kernel:  $(uname -sr)"
echo "commit:  $(checkout_commit)"
echo "mode:    $([ "$QUICK" = 1 ] && echo quick || echo full): runs of ${D}s, $REPS interleaved round(s); loadavg before $(cut -d' ' -f1-3 /proc/loadavg)"

# ---- the programs ----
bash scripts/build.sh > "$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; exit 1; }
cp nsca "$WORK/nsca" # the binary measured, whatever rebuilds ./nsca meanwhile
go build -o "$BENCH" ./scripts/nsca-bench
LOAD="$WORK/nsca-load"
gcc -O2 -Wall -o "$LOAD" scripts/nsca-load.c -lmcrypt -lpthread
FLOORSRV=""
if [ -f "$FLOOR_SRC" ] && gcc -O2 -o "$WORK/floor_server" "$FLOOR_SRC"; then
  FLOORSRV="$WORK/floor_server"
else
  echo "NOTE:    $FLOOR_SRC is absent or did not build: floor_server is skipped"
fi
if [ -n "$CPP" ] && [ ! -x "$CPP" ]; then
  echo "NOTE:    NSCA_FAST_CPP=$CPP is not an executable: the C++ nsca_fast is skipped"
  CPP=""
fi
[ -n "$CPP" ] || echo "NOTE:    NSCA_FAST_CPP is unset: the C++ nsca_fast is skipped (../shared/bench/README.md says how to build it)"
[ -x "$STOCK" ] || echo "NOTE:    $STOCK is absent: stock nsca is skipped"
NG="$WORK/ng"
if ng_unpack "$NG" 2> "$WORK/ng.log"; then
  NGCLIENT="$NG/usr/sbin/send_nsca" NGSERVER="$NG/usr/sbin/nsca-ng"
else
  echo "NOTE:    the nsca-ng packages could not be had ($(tail -1 "$WORK/ng.log")): the nsca-ng rows are skipped"
  NGCLIENT="" NGSERVER=""
fi
# The real NRDP: a copy of its server directory, configured for this run.
NRDP_SRV="" NRDP_LINE="" SPOOL="$WORK/nrdp-spool"
if [ -z "$NRDP_DIR" ]; then
  echo "NOTE:    NRDP_SERVER_DIR is unset: the real NRDP is skipped (github:NagiosEnterprises/nrdp, run with php -S)"
elif ! command -v php > /dev/null; then
  echo "NOTE:    php is not installed: the real NRDP is skipped"
else
  [ -f "$NRDP_DIR/index.php" ] || NRDP_DIR="$NRDP_DIR/server"
  if [ -f "$NRDP_DIR/index.php" ] && [ -f "$NRDP_DIR/config.inc.php" ]; then
    NRDP_SRV="$WORK/nrdp-server"
    cp -r "$NRDP_DIR" "$NRDP_SRV"
    mkdir -p "$SPOOL"
    cat >> "$NRDP_SRV/config.inc.php" <<PHP

// bench-table.sh's settings
\$cfg["authorized_tokens"] = array("$TOKEN");
\$cfg["command_file"] = "$FIFO";
\$cfg["check_results_dir"] = "$SPOOL";
\$cfg["require_https"] = false;
\$cfg["require_basic_auth"] = false;
\$cfg["allow_old_results"] = false;
\$cfg["debug"] = false;
PHP
    NRDP_LINE="NRDP (PHP) = $NRDP_DIR, NRDP $(sed -n 's/.*"PRODUCT_VERSION", *"\([^"]*\)".*/\1/p' "$NRDP_DIR/includes/constants.inc.php" 2> /dev/null), under php -S (PHP $(php -r 'echo PHP_VERSION;'))"
  else
    echo "NOTE:    NRDP_SERVER_DIR=${NRDP_SERVER_DIR} holds no NRDP server (index.php, config.inc.php): the real NRDP is skipped"
  fi
fi
echo "daemons: ours = this checkout's ./nsca, nsca_workers=0 (ours w2: 2), decryption_engine auto"
[ -z "$CPP" ] || echo "         C++ = $CPP, 2 workers x 2 threads"
[ ! -x "$STOCK" ] || echo "         stock = $STOCK --single (version $("$STOCK" -V 2>&1 | sed -n 's/^Version: //p'))"
[ -z "$FLOORSRV" ] || echo "         floor_server = $FLOOR_SRC (gcc -O2)"
[ -z "$NGSERVER" ] || echo "         nsca-ng-server and its send_nsca = Debian's $(basename "$(ls "${NSCA_NG_DEBS:-/tmp/nsca_fast-nsca-ng-debs}"/nsca-ng-server_*.deb | head -1)" .deb)"
[ -z "$NRDP_LINE" ] || echo "         $NRDP_LINE"
echo
mkfifo "$FIFO" # before any daemon starts: stock would otherwise write to alternate_dump_file

# nsca-ng: one nsca-ng.cfg that the real server reads, and ours as its
# identities_file (it ignores command_file, listen and max_command_size
# there); one identity that may submit any result. A session of 500
# results is one PUSH of ~40 kB, over the default limit of 16 kB of both.
ng_config() { # ng_config PORT: writes $WORK/ng-PORT.cfg and the client's $WORK/ng-client.cfg
  printf 'command_file = "%s"\nlisten = "127.0.0.1:%d"\nmax_command_size = 1048576\nauthorize "bench" {\n\tpassword = "bench-secret"\n\thosts = ".*"\n\tservices = ".*"\n}\n' \
    "$FIFO" "$1" > "$WORK/ng-$1.cfg"
  printf 'identity = "bench"\npassword = "bench-secret"\nserver = "127.0.0.1"\nport = %d\ntimeout = 10\n' "$1" > "$WORK/ng-client.cfg"
  chmod 600 "$WORK/ng-$1.cfg" "$WORK/ng-client.cfg"
}

OURS_EXTRA="connection_timeout=3600\nmax_connections=16384\n"
CPP_EXTRA="nsca_user=$(id -un)\nnsca_group=$(id -gn)\ndir_stats=$WORK\nmax_checks_per_connection=1000\n"
# LOADARGS: nsca-bench's arguments that point its clients at the daemon
# started last (set by start_daemon).
LOADARGS=()

# start_daemon KIND DAEMON METHOD: a fresh DAEMON (a column of the table)
# for a workload of KIND (nsca, ng or nrdp).
start_daemon() {
  local kind="$1" d="$2" m="$3" port
  LOADARGS=()
  case "$kind:$d" in
  "nsca:ours") start_nsca "$WORK/nsca" 0 "$m" "$OURS_EXTRA" ;;
  "nsca:ours w2") start_nsca "$WORK/nsca" 2 "$m" "$OURS_EXTRA" ;;
  "nsca:C++") start_nsca "$CPP" 2 "$m" "$CPP_EXTRA" ;;
  "nsca:stock") start_stock "$m" single 60 "$WORK/stock.log" ;;
  "nsca:floor_server") start_floor_server "$FLOORSRV" ;;
  "ng:ours" | "ng:nsca-ng-server")
    port="$("$BENCH" freeport)"
    ng_config "$port"
    LOADARGS=(--ng-client "$NGCLIENT" --ng-config "$WORK/ng-client.cfg")
    if [ "$d" = ours ]; then
      WAIT_PORT="$port" start_nsca "$WORK/nsca" 0 1 "identities_file=$WORK/ng-$port.cfg\nnsca_ng_listen=127.0.0.1:$port\nnsca_ng_max_command_size=1048576\n"
    else
      start_fifo_writer "$port" "$WORK/ng-$port.log" "$NGSERVER" -c "$WORK/ng-$port.cfg" -F
    fi
    ;;
  "nrdp:ours")
    port="$("$BENCH" freeport)"
    LOADARGS=(--nrdp "http://127.0.0.1:$port/nrdp/" --nrdp-token "$TOKEN")
    WAIT_PORT="$port" start_nsca "$WORK/nsca" 0 1 "nrdp_listen=127.0.0.1:$port\nnrdp_tokens=$TOKEN\n"
    ;;
  "nrdp:NRDP (PHP)")
    port="$("$BENCH" freeport)"
    LOADARGS=(--nrdp "http://127.0.0.1:$port/" --nrdp-token "$TOKEN" --spool "$SPOOL")
    php -S "127.0.0.1:$port" -t "$NRDP_SRV" > "$WORK/php-$port.log" 2>&1 &
    DPID=$!
    wait_listen "$port" "$DPID" "$WORK/php-$port.log"
    ;;
  *) echo "start_daemon: no $d for $kind" >&2; return 1 ;;
  esac
}

# available DAEMON: whether its program is here.
available() {
  case "$1" in
  "C++") [ -n "$CPP" ] ;;
  stock) [ -x "$STOCK" ] ;;
  floor_server) [ -n "$FLOORSRV" ] ;;
  nsca-ng-server) [ -n "$NGSERVER" ] ;;
  "NRDP (PHP)") [ -n "$NRDP_SRV" ] ;;
  *) true ;;
  esac
}

# measure WORKLOAD KIND METHOD DAEMON ARGS...: one run of nsca-bench (ARGS
# added) against a fresh DAEMON; the JSON result goes to RESULTS and its
# raw line to the output.
measure() {
  local w="$1" kind="$2" m="$3" d="$4" out
  shift 4
  if ! start_daemon "$kind" "$d" "$m"; then
    echo "  $w / $d: did not start"
    stop_daemon
    return 0
  fi
  out="$("$BENCH" --json --port "$DPORT" --password "$PASSWORD" --fifo "$FIFO" --server-pid "$DPID" \
    --method "$m" --workload "$w" --daemon "$d" --drain 2s "${LOADARGS[@]}" "$@" 2>> "$WORK/bench.err")" || true
  stop_daemon
  if [ -z "$out" ]; then
    echo "  $w / $d: nsca-bench failed: $(tail -1 "$WORK/bench.err")"
    return 0
  fi
  echo "$out" >> "$RESULTS"
  echo "$out" | jq -r --arg w "${w%%:*}" --arg d "$d" \
    '"  \($w) / \($d) [\(.generator)]: \(.checks_per_sec|floor) results/s, \((.server_cpu_us_per_check // 0)*10|floor/10) µs CPU/result"
      + (if .latency_p99_ms > 0 then ", p50 \(.latency_p50_ms*100|floor/100) ms, p99 \(.latency_p99_ms*100|floor/100) ms" else "" end)
      + ", \(.delivered)/\(.sent) delivered, \(.failed_writes) failed, other processes \(.other_procs_cores*100|floor/100) cores, loadavg \(.loadavg)"'
}

# row WORKLOAD KIND METHOD DAEMONS ARGS...: REPS rounds in which each of
# DAEMONS (|-separated) that is here runs once, a fresh process each time;
# each round starts one daemon further down the list, so that no daemon is
# always the first (or the last) of a row.
row() {
  local w="$1" kind="$2" m="$3" d list rep i
  IFS='|' read -ra list <<< "$4"
  shift 4
  if [ -n "${BENCH_TABLE_ONLY:-}" ] && [[ " $BENCH_TABLE_ONLY " != *" ${w%%:*} "* ]]; then return 0; fi
  for rep in $(seq 0 $((REPS - 1))); do
    for i in "${!list[@]}"; do
      d="${list[$(((i + rep) % ${#list[@]}))]}"
      if available "$d"; then measure "$w" "$kind" "$m" "$d" "$@"; fi
    done
  done
}

ALL="floor_server|ours|ours w2|C++|stock"
PACED=(--exec-client "$LOAD" --conns 8 --duration "${D}s")
R="$(echo "$RATE" | sed -E ':a;s/([0-9])([0-9]{3})($|,)/\1,\2\3/;ta')" # 2000 -> 2,000
echo "== Runs"
row "x20: XOR, 20 checks/conn, 8 send_nsca-like clients paced at $R checks/s" nsca 1 "$ALL" "${PACED[@]}" --checks-per-conn 20 --rate "$RATE"
row "x1: XOR, 1 check/conn, 8 send_nsca-like clients paced at 1,000 checks/s" nsca 1 "$ALL" "${PACED[@]}" --checks-per-conn 1 --rate 1000
row "d3: 3DES (ours: native engine), 1 check/conn, 8 send_nsca-like clients paced at 300 checks/s" nsca 3 "ours|ours w2|C++|stock" "${PACED[@]}" --checks-per-conn 1 --rate 300
row "x1s: XOR, 1 check/conn, 8 send_nsca-like clients paced at 300 checks/s" nsca 1 "floor_server|ours|ours w2" "${PACED[@]}" --checks-per-conn 1 --rate 300
row "sat: XOR, 20 checks/conn, 8 send_nsca-like clients, unpaced (saturation)" nsca 1 "$ALL" "${PACED[@]}" --checks-per-conn 20
row "burst: AES, 10,000 connections sent to arrive within 1 s, 1 check each (p50 / p99 latency)" nsca 14 "$ALL" \
  --burst --go-aes --rate 10000 --total 10000 --conns 10000 --checks-per-conn 1 --drain 5s
if [ -n "$NGCLIENT" ]; then
  row "ng-a: nsca-ng, 8 clients x 500 results per session" ng 1 "ours|nsca-ng-server" --conns 8 --checks-per-conn 500 --duration "${D}s"
  row "ng-b: nsca-ng, 100 clients x 1 result per session" ng 1 "ours|nsca-ng-server" --conns 100 --checks-per-conn 1 --duration "${D}s"
fi
row "nrdp1: NRDP, 4 clients, 1 result per request" nrdp 1 "ours|NRDP (PHP)" --conns 4 --checks-per-conn 1 --duration "${D}s"
row "nrdp100: NRDP, 4 clients, 100 results per request" nrdp 1 "ours|NRDP (PHP)" --conns 4 --checks-per-conn 100 --duration "${D}s"

# The native 3DES engine's own cost per 4304-byte packet, for its target.
CIPHER="$WORK/cipher.txt"
go test -run '^$' -bench 'BenchmarkDecrypt/3-tripledes/4304/native$' -benchtime=300x ./stages/cipher > "$CIPHER" 2>&1 || true
grep '^Benchmark' "$CIPHER" | sed 's/^/  /' || echo "  the cipher benchmark failed: $(tail -1 "$CIPHER")"
echo "loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
"$BENCH" table --results "$RESULTS" --floor "$CIPHER"
