#!/usr/bin/env bash
# Server CPU per check of the decryption engines, same run:
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
#
# `bench-engines.sh side` prints the side by side of the engines instead,
# one report with ratios and targets (`nsca-bench report --engines`):
#  - saturation: methods 3, 2, 14, 8 and 4, clients that encrypt ahead
#    (`nsca-bench --ahead`: every packet encrypted before the measured part,
#    which only writes them), ours with the default engine (auto) with
#    nsca_workers=0 and 2 and with decryption_engine=libmcrypt, the C++
#    nsca_fast (2 workers x 2 threads), stock --single, and libmcrypt alone;
#  - CPU per check with the libmcrypt engine against the C++ (3DES, AES,
#    Blowfish; w0 and w2; 1 check per connection with 8 clients and 10 with
#    4), by nsca-bench and by scripts/nsca-load.c (C, one thread per client,
#    encrypting each packet just before sending it, built here with gcc);
#  - the native engines against their cipher time plus 1.2 x an XOR check
#    under the same pattern: same generator, clients and checks per
#    connection, paced at the rate the native run reached (the cipher time
#    from BenchmarkDecrypt);
#  - the process tree's PSS with nsca_workers=2, at rest and under load.
# The daemons of one workload run in turn, ENGINE_REPS rounds of them, so
# each comparison is of interleaved runs. ENGINE_D defaults to 3s here;
# STOCK_NSCA names stock (default /usr/sbin/nsca); ENGINE_KEEP=DIR keeps
# the JSON results and floors there (`nsca-bench report --engines
# --results DIR/results.jsonl --floor DIR/floor.txt` prints the report
# again). About 20 minutes on 2 cores with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
MODE="${1:-engines}"
case "$MODE" in
engines) D="${ENGINE_D:-5s}" ;;
side) D="${ENGINE_D:-3s}" ;;
*) echo "usage: bench-engines.sh [side]" >&2; exit 2 ;;
esac
REPS="${ENGINE_REPS:-2}"
STOCK="${STOCK_NSCA:-/usr/sbin/nsca}"
CPP="${NSCA_CPP:-}"
PASSWORD='bench-password'
WORK="$(mktemp -d "${TMPDIR:-/tmp}/nsca-engines.XXXXXX")"
FIFO="$WORK/nagios.cmd"
DPID=""
DPORT=""
BENCH="$WORK/nsca-bench"
. scripts/bench-lib.sh
trap 'stop_daemon; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

go build -o "$WORK/nsca" ./src
go build -o "$WORK/nsca-bench" ./scripts/nsca-bench
mkfifo "$FIFO"

# start BIN METHOD EXTRA-OPTION-LINES [ARGS...]: one daemon, 2 decrypt
# threads (start_nsca); WORKERS (default 0) sets nsca_workers.
start() {
  local bin="$1" method="$2" extra="$3"
  shift 3
  start_nsca "$bin" "${WORKERS:-0}" "$method" "$extra" "$@"
}

# run LABEL METHOD: the least CPU per check of REPS runs against the daemon started.
run() {
  local label="$1" method="$2" best="" out v
  for _ in $(seq 1 "$REPS"); do
    out="$("$BENCH" --json --port "$DPORT" --password "$PASSWORD" --fifo "$FIFO" --server-pid "$DPID" \
      --method "$method" --checks-per-conn 10 --conns 4 --duration "$D" --drain 2s 2>>"$WORK/bench.err")" || continue
    v="$(echo "$out" | jq -r '.server_cpu_us_per_check')"
    if [ -z "$best" ] || awk -v a="$v" -v b="$best" 'BEGIN{exit !(a < b)}'; then best="$v"; BEST="$out"; fi
  done
  [ -n "$best" ] || { echo "| $method | $label | failed: $(tail -1 "$WORK/bench.err") |"; return 0; }
  echo "$BEST" | jq -r --arg l "$label" '"| \(.method) | \($l) | \(.server_cpu_us_per_check*10|floor/10) | \(.checks_per_sec|floor) | \(.delivered)/\(.sent) |"'
  CPU["$label"]="$best"
}

if [ "$MODE" = engines ]; then
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); cpus: $(nproc) x $(cpu_model); commit $(git rev-parse --short HEAD); runs of $D, best of $REPS"
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
  exit 0
fi

# ---- side: the side by side of the engines and daemons ----
RESULTS="$WORK/results.jsonl"
raise_nofile
FLOORS="$WORK/floor.txt"
LOAD="$WORK/nsca-load"
gcc -O2 -Wall -o "$LOAD" scripts/nsca-load.c -lmcrypt -lpthread

# start_side DAEMON METHOD: one of the labels below. Ours holds idle
# connections for an hour (the --ahead runs keep thousands open while they
# encrypt); the C++ closes them after 8 s whatever its config says.
OURS_EXTRA="connection_timeout=3600\nmax_connections=16384\n"
CPP_EXTRA="nsca_user=$(id -un)\nnsca_group=$(id -gn)\ndir_stats=$WORK\nmax_checks_per_connection=1000\n"
start_side() {
  case "$1" in
  "ours auto w0") WORKERS=0 start "$WORK/nsca" "$2" "$OURS_EXTRA" ;;
  "ours auto w2") WORKERS=2 start "$WORK/nsca" "$2" "$OURS_EXTRA" ;;
  "ours libmcrypt w0") WORKERS=0 start "$WORK/nsca" "$2" "${OURS_EXTRA}decryption_engine=libmcrypt\n" ;;
  "ours libmcrypt w2") WORKERS=2 start "$WORK/nsca" "$2" "${OURS_EXTRA}decryption_engine=libmcrypt\n" ;;
  "C++ 2x2") WORKERS=2 start "$CPP" "$2" "$CPP_EXTRA" ;;
  "stock --single") start_stock "$2" single 60 "$WORK/daemon.log" ;;
  esac
}

# side WORKLOAD METHOD DAEMONS ARGS...: each of DAEMONS (a |-separated
# list) with a fresh process, in turn, REPS rounds: interleaved runs.
side() {
  local w="$1" m="$2" daemons="$3" d out
  shift 3
  for rep in $(seq 1 "$REPS"); do
    IFS='|' read -ra ds <<< "$daemons"
    for d in "${ds[@]}"; do
      [ "$d" = "C++ 2x2" ] && [ -z "$CPP" ] && continue
      [ "$d" = "stock --single" ] && [ ! -x "$STOCK" ] && continue
      start_side "$d" "$m" || { stop_daemon; continue; }
      out="$("$BENCH" --json --port "$DPORT" --password "$PASSWORD" --fifo "$FIFO" --server-pid "$DPID" \
        --method "$m" --workload "$w" --daemon "$d" --drain 2s "$@" 2>>"$WORK/bench.err")" || true
      stop_daemon
      if [ -z "$out" ]; then echo "  $w / $d: nsca-bench failed: $(tail -1 "$WORK/bench.err")"; continue; fi
      echo "$out" >> "$RESULTS"
      echo "$out" | jq -r --arg w "$w" --arg d "$d" \
        '"  \($w) / \($d) [\(.generator)]: \(.checks_per_sec|floor) checks/s, \(.server_cpu_us_per_check*10|floor/10) µs CPU/check, PSS \(.pss_before_kb/1024*10|floor/10) / \(.pss_peak_kb/1024*10|floor/10) MB, other processes \(.other_procs_cores*100|floor/100) cores, loadavg \(.loadavg), \(.delivered)/\(.sent) delivered"'
    done
  done
}

echo "== Issue 24 side by side: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); cpus: $(nproc) x $(cpu_model); commit $(checkout_commit); runs of $D, $REPS interleaved rounds; loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "$CPP" ] || echo "NOTE: NSCA_CPP is unset: the C++ nsca_fast is skipped (see ../shared/bench/README.md)"

# Saturation with clients that encrypt ahead: --total checks per run, sized
# so that each daemon takes a few seconds (the C++ must have them all
# encrypted within its 8 s idle timeout; stock --single selects over at
# most 1,024 descriptors). method:algorithm:ours-auto:libmcrypt-daemons,
# times ENGINE_AHEAD_SCALE (default 1).
AHEAD_SCALE="${ENGINE_AHEAD_SCALE:-1}"
echo "-- saturation, 10 checks per connection, 8 sending clients, every packet encrypted ahead"
for spec in 3:tripledes:8000:2000 2:des:12000:4000 14:rijndael-128:15000:5000 8:blowfish:12000:6000 4:cast-128:12000:6000; do
  IFS=: read -r m alg fast slow <<< "$spec"
  fast=$(awk -v n="$fast" -v s="$AHEAD_SCALE" 'BEGIN{printf "%d", n*s}')
  slow=$(awk -v n="$slow" -v s="$AHEAD_SCALE" 'BEGIN{printf "%d", n*s}')
  side "s$m" "$m" "ours auto w0|ours auto w2" --ahead --total "$fast" --checks-per-conn 10 --conns 8
  side "s$m" "$m" "ours libmcrypt w0|C++ 2x2" --ahead --total "$slow" --checks-per-conn 10 --conns 8
  side "s$m" "$m" "stock --single" --ahead --total "$((slow / 2))" --checks-per-conn 10 --conns 8
done

echo "-- CPU per check: libmcrypt engine against the C++, native engine against XOR, by two generators"
for gen in go c; do
  gargs=()
  [ "$gen" = c ] && gargs=(--exec-client "$LOAD")
  for pat in 1:8 10:4; do
    k="${pat%%:*}" n="${pat##*:}"
    for m in 3 14 8; do
      side "p$m/$k/$gen" "$m" "ours libmcrypt w0|C++ 2x2|ours libmcrypt w2|ours auto w0" \
        --checks-per-conn "$k" --conns "$n" --duration "$D" "${gargs[@]}"
      # XOR at the rate the native engine ran at: the same arrivals, so the
      # same wake-ups per check (a saturated XOR run batches them away).
      r="$(jq -rs --arg w "p$m/$k/$gen" 'map(select(.workload==$w and .daemon=="ours auto w0")) | min_by(.server_cpu_us_per_check) | .checks_per_sec // empty' "$RESULTS")"
      [ -n "$r" ] && side "x$m/$k/$gen" 1 "ours auto w0" --checks-per-conn "$k" --conns "$n" --duration "$D" --rate "$r" "${gargs[@]}"
    done
    side "p1/$k/$gen" 1 "ours auto w0" --checks-per-conn "$k" --conns "$n" --duration "$D" "${gargs[@]}"
  done
done

echo "-- memory: nsca_workers=2 with the default engine under load (XOR 20/conn, 8 clients; 3DES 10/conn, 4 clients)"
side "m1" 1 "ours auto w2" --checks-per-conn 20 --conns 8 --duration "$D"
side "m3" 3 "ours auto w2" --checks-per-conn 10 --conns 4 --duration "$D"

echo "-- libmcrypt alone and the engines alone"
for a in tripledes:300 des:600 rijndael-128:600 blowfish:1200 cast-128:1000; do
  "$BENCH" floor "${a%%:*}" "${a##*:}" | tee -a "$FLOORS"
done
go test -run '^$' -bench 'BenchmarkDecrypt/(2-des|3-tripledes|4-cast-128|8-blowfish|14-rijndael-128)/4304/(libmcrypt|native)$' \
  -benchtime=100x ./stages/cipher 2>&1 | grep '^Benchmark' | tee -a "$FLOORS"
if [ -n "${ENGINE_KEEP:-}" ]; then
  mkdir -p "$ENGINE_KEEP" && cp "$RESULTS" "$FLOORS" "$ENGINE_KEEP"/ && echo "results kept in $ENGINE_KEEP"
fi
echo
"$BENCH" report --engines --results "$RESULTS" --floor "$FLOORS"
echo "loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)"
