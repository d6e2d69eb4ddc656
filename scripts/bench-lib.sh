# Functions shared by scripts/bench.sh, scripts/bench-engines.sh and the
# nsca-ng benchmarks (scripts/bench-ng-*.sh), which
# source this file once they have set WORK (a temporary directory), FIFO
# (the command file nsca-bench reads), PASSWORD, STOCK (stock nsca's
# binary) and BENCH (nsca-bench). The daemon running is DPID, listening on
# DPORT; every process is stopped by its PID.

# free_port: a port on 127.0.0.1 that nothing listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_port PORT: waits until something accepts on 127.0.0.1:PORT, for a
# daemon that is not the caller's child; exits after 10 s.
wait_port() {
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "nothing listens on $1" >&2
  exit 1
}

# stop_daemon: ends DPID, and stock --daemon's per-connection children.
stop_daemon() {
  [ -n "$DPID" ] || return 0
  local pid="$DPID" kids k
  DPID=""
  kids="$(pgrep -P "$pid" 2>/dev/null || true)"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  for k in $kids; do kill -KILL "$k" 2>/dev/null || true; done
}

# wait_listen PORT PID [LOG]: waits until PORT has a listener; fails if PID
# exits first (printing LOG when given) or after 5 s.
wait_listen() {
  for _ in $(seq 1 200); do
    if ss -ltnH "sport = :$1" 2>/dev/null | grep -q .; then return 0; fi
    kill -0 "$2" 2>/dev/null || { echo "daemon exited at start${3:+:}" >&2; [ -z "${3:-}" ] || cat "$3" >&2; return 1; }
    sleep 0.025
  done
  echo "daemon did not listen on $1" >&2
  return 1
}

# start_stock METHOD MODE MAX_PACKET_AGE [LOG]: stock nsca in the
# foreground, --MODE (single or daemon), with the options it knows only;
# its output goes to LOG (default $WORK/stock-PORT.log).
start_stock() {
  local method="$1" mode="$2" age="$3" cfg
  DPORT="$("$BENCH" freeport)"
  local log="${4:-$WORK/stock-$DPORT.log}"
  cfg="$WORK/stock-$DPORT.cfg"
  cat > "$cfg" <<CFG
pid_file=$WORK/stock-$DPORT.pid
server_port=$DPORT
server_address=127.0.0.1
debug=0
command_file=$FIFO
alternate_dump_file=$WORK/stock-dump
aggregate_writes=0
append_to_file=0
max_packet_age=$age
password=$PASSWORD
decryption_method=$method
CFG
  chmod 600 "$cfg"
  "$STOCK" -c "$cfg" -f "--$mode" > "$log" 2>&1 &
  DPID=$!
  wait_listen "$DPORT" "$DPID" ${4:+"$log"}
}

# raise_nofile: 10,000 idle connections need as many descriptors in the
# daemon and in nsca-bench; the soft limit goes as far as the hard one.
raise_nofile() {
  ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
}

# cpu_model: the first CPU's model name.
cpu_model() {
  grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'
}

# checkout_commit: HEAD's short hash, and whether the daemon's code has
# uncommitted changes.
checkout_commit() {
  echo "$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src stages cgo conf 2>/dev/null || echo ' + uncommitted changes')"
}

# start_nsca BIN WORKERS METHOD EXTRA [ARGS...]: nsca_fast (this
# checkout's, or the C++ one, which reads the same nsca.cfg) in the
# foreground on a free loopback port (DPORT), nsca_workers=WORKERS with 2
# threads each, no packet age check; EXTRA (printf %b) adds option lines,
# ARGS go on its command line. It waits for WAIT_PORT (default DPORT) to
# listen. Its log is $WORK/nsca-DPORT.log.
start_nsca() {
  local bin="$1" workers="$2" method="$3" extra="$4" cfg
  shift 4
  DPORT="$("$BENCH" freeport)"
  cfg="$WORK/nsca-$DPORT.cfg"
  {
    echo "pid_file=$WORK/nsca-$DPORT.pid"
    echo "server_port=$DPORT"
    echo "server_address=127.0.0.1"
    echo "command_file=$FIFO"
    echo "alternate_dump_file=$WORK/nsca-dump"
    echo "password=$PASSWORD"
    echo "decryption_method=$method"
    echo "decryption_mode=1"
    echo "nsca_workers=$workers"
    echo "nsca_threads_per_worker=2"
    echo "max_packet_age_enabled=0"
    printf '%b' "$extra"
  } > "$cfg"
  chmod 600 "$cfg"
  "$bin" -c "$cfg" -f "$@" > "$WORK/nsca-$DPORT.log" 2>&1 &
  DPID=$!
  wait_listen "${WAIT_PORT:-$DPORT}" "$DPID" "$WORK/nsca-$DPORT.log"
}

# start_fifo_writer PORT LOG CMD...: CMD in the background (DPID), its
# output to LOG, with a reader of the FIFO held open here until PORT
# listens: floor_server opens the FIFO at start (and would block without a
# reader), nsca-ng checks it at start (and without a reader queues the
# results for a later try). nsca-bench opens its own before any client
# connects.
start_fifo_writer() {
  local port="$1" log="$2" rc=0
  shift 2
  exec 3<>"$FIFO"
  "$@" > "$log" 2>&1 3<&- &
  DPID=$!
  wait_listen "$port" "$DPID" "$log" || rc=1
  exec 3<&-
  return $rc
}

# start_floor_server BIN: floor_server (../shared/bench/floor_server.c
# built) on a free port.
start_floor_server() {
  DPORT="$("$BENCH" freeport)"
  start_fifo_writer "$DPORT" "$WORK/floor-$DPORT.log" "$1" "$DPORT" "$FIFO"
}

# ng_unpack DIR: Debian's nsca-ng-client and nsca-ng-server packages,
# downloaded into NSCA_NG_DEBS (default /tmp/nsca_fast-nsca-ng-debs, as
# tests/ do) unless there, unpacked into DIR: DIR/usr/sbin/send_nsca (the
# client) and DIR/usr/sbin/nsca-ng (the server).
ng_unpack() {
  local debs="${NSCA_NG_DEBS:-/tmp/nsca_fast-nsca-ng-debs}" d
  if ! ls "$debs"/nsca-ng-client_*.deb "$debs"/nsca-ng-server_*.deb > /dev/null 2>&1; then
    mkdir -p "$debs"
    (cd "$debs" && apt-get download nsca-ng-client nsca-ng-server > /dev/null)
  fi
  for d in "$debs"/nsca-ng-client_*.deb "$debs"/nsca-ng-server_*.deb; do dpkg-deb -x "$d" "$1"; done
}
