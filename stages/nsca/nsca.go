// Package nsca is send_nsca's front end (NSCA protocol version 3): its
// listening sockets, and the three stages that turn a connection into
// submissions: accept (admission, the init packet), read (epoll sets,
// PROXY headers) and decrypt (framing, every secret's cipher, the CRC
// check and decoding), joined by bounded channels, with one flow control
// (flow.go) gating accept and the reads. What leaves it is an
// intake.Submission per packet, for the validate stage, which all front
// ends share.
//
// One hand-off is not a channel: accept gives a connection it greeted to a
// reader by registering it with that reader's epoll set (readIntake). The
// next thing to happen on a new connection is an epoll event anyway, and a
// channel would wake a goroutine per connection only to make that call.
// Connections taken over from elsewhere (inetd's) still come through the
// read stage's channel, whose closing still starts the drain. Who may come
// in is admission's (admit.go): accept applies it, and the read stage for
// a client behind a PROXY header once the header has come.
//
// Flow control is not a channel either: one flow (flow.go) owns the read
// budgets, what the front end has taken off client sockets and decrypt
// has not consumed yet, globally and per connection, and the gate accept
// waits at while the stages after it cannot take more. Read takes,
// decrypt gives back and says what decrypting costs, and accept waits in
// flow.waitRoom, woken when room comes back, so that a backlog waits in
// the kernel's socket buffers and listen queue, not in our memory. A
// clientConn's fields are grouped by the stage that owns them (conn.go).
package nsca

import (
	"context"
	"fmt"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/conf"
	"nsca_fast/stages/diagnose"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/stage"
)

// Front is this front end's name in its submissions' sources.
const Front intake.Front = "nsca"

// Queues are the names of the front end's queues, for the counters.
var Queues = [...]string{"accept_to_read", "read_to_decrypt"}

// FrontEnd is send_nsca's front end of one pipeline: New builds it on the
// listening sockets, Start runs its stages.
type FrontEnd struct {
	cfg       *conf.Config
	cipher    cipherConfig
	admission *admission
	// listeners are the front end's own duplicates of the listening
	// sockets, which its accept stage owns once it runs.
	listeners []int
	grace     time.Duration
}

// New checks cfg's secrets and admission rules and duplicates listeners
// (none for a connection of inetd's). grace is how long an open
// connection may go on after a stop.
func New(cfg *conf.Config, listeners []int, grace time.Duration, env stage.Env) (*FrontEnd, error) {
	cipher, err := cipherOf(cfg)
	if err != nil {
		return nil, err
	}
	if choice, _ := cfg.Cipher(); choice.Warn {
		// Every process that serves says so; the start-up line, written
		// once, carries the same account.
		m := cfg.Method()
		glog.Warningf("decrypt: decryption_method=%s (%s) is served by %s", conf.NameOf(m), m.Name, choice.Report())
	}
	allowed, err := cfg.AllowedPrefixes()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	trusted, err := cfg.TrustedProxies()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	f := &FrontEnd{cfg: cfg, cipher: cipher, grace: grace,
		admission: &admission{maxConns: connectionLimit(cfg, openFilesLimit()), allowed: allowed, proxy: cfg.ProxyProtocol, trusted: trusted, stats: env.Stats, log: env.Log}}
	if f.listeners, err = dupListeners(listeners); err != nil {
		return nil, err
	}
	return f, nil
}

// Start runs accept, read and decrypt, taking connections off the
// listeners and from adopt (inetd's) until adopt is closed, and sending
// submissions to out. It calls leave once it will send no more, also
// when it fails to start.
func (f *FrontEnd) Start(ctx context.Context, adopt <-chan int, out chan<- intake.Submission, leave func(), env stage.Env) error {
	cfg := f.cfg
	depth := max(cfg.QueueSize, 1)
	conns := make(chan *clientConn, depth)
	threads := DecryptThreads(cfg)
	chunks := newChunkShards(threads, depth)
	env.Register(Queues[0], func() int { return len(conns) })
	env.Register(Queues[1], chunks.Len)
	// The decrypt goroutines run at once as far as this process has CPUs
	// (GOMAXPROCS is no measure of that: it has a P more for each
	// goroutine in C calls).
	flow := newFlow(min(threads, cfg.CPUShare()), cfg.Workers, chunks.Full)
	handOff := &readIntake{}
	readCfg := readConfig{Readers: cfg.ReaderThreads, Timeout: time.Duration(cfg.ConnectionTimeout) * time.Second, Grace: f.grace,
		admission: f.admission, flow: flow, intake: handOff}
	if f.cipher.callsC() {
		// libmcrypt costs 50 µs to 1 ms a packet: a connection's whole
		// burst is one read and one hand-off to decrypt, which calls C in
		// slices of its own size (cgoSlice).
		readCfg.ChunkSize = readBudgetPerConn
	}
	decryptCfg := decryptConfig{Cipher: f.cipher, Closed: leave, MaxChecks: cfg.MaxChecksPerConnection, flow: flow}
	if err := startDecrypt(ctx, chunks, out, decryptCfg, env); err != nil {
		leave()
		return err
	}
	if err := startRead(ctx, conns, chunks, readCfg, env); err != nil {
		chunks.Close()
		return err
	}
	acceptCfg := acceptConfig{Listeners: f.listeners, admission: f.admission, flow: flow, handOff: handOff.register}
	if err := startAccept(ctx, adopt, conns, acceptCfg, env); err != nil {
		close(conns)
		return err
	}
	return nil
}

// DiagSecrets are the secrets the diagnosis compares a client's packets
// with.
func (f *FrontEnd) DiagSecrets() []diagnose.Secret {
	var out []diagnose.Secret
	for _, c := range f.cipher.candidates() {
		out = append(out, diagnose.Secret{Name: c.Name, Method: c.Method, Password: c.Password, Networks: c.Networks})
	}
	return out
}

// DecryptThreads is the number of decrypt goroutines:
// nsca_threads_per_worker, or one per CPU of the process's share when it
// is 0. More would only queue for the same CPUs, and with libmcrypt each
// is a thread of its own.
func DecryptThreads(cfg *conf.Config) int {
	if cfg.ThreadsPerWorker > 0 {
		return cfg.ThreadsPerWorker
	}
	return cfg.CPUShare()
}

// CgoGoroutines is how many of the front end's goroutines for cfg spend
// their time in C calls: the decrypt goroutines when libmcrypt serves the
// method, else none.
func CgoGoroutines(cfg *conf.Config) int {
	if c, err := cipherOf(cfg); err != nil || !c.callsC() {
		return 0
	}
	return DecryptThreads(cfg)
}

// openFilesLimit is RLIMIT_NOFILE, the most descriptors this process may
// hold.
func openFilesLimit() uint64 {
	var rl unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	return rl.Cur
}

// connectionLimit is max_connections, or, when it is 0, a limit sized for the
// machine: what the open files limit allows, less some descriptors for the
// daemon's own files (sinks, epoll, pipes), and at least 1024.
func connectionLimit(cfg *conf.Config, nofile uint64) int {
	if cfg.MaxConnections > 0 {
		return cfg.MaxConnections
	}
	const ownFiles = 256
	return max(1024, int(min(nofile, 1<<30))-ownFiles)
}
