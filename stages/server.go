package stages

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"nsca_fast/stages/counters"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/conf"
	"nsca_fast/stages/emit/sink"
)

// ErrConfig wraps settings the pipeline cannot run with.
var ErrConfig = errors.New("stages: config")

// Server is one running pipeline: accept → read → decrypt → validate →
// emit. New builds it, Run serves until Shutdown or Abort, in the manner of
// nsq's nsqd.
type Server struct {
	cfg      *conf.Config
	Stats    *counters.Stats
	log      *counters.RateLog
	acceptor *Acceptor
	emitter  *Emitter
	cipher   CipherConfig
	allowed  []netip.Prefix // allowed_hosts, for clients behind a PROXY header

	ctx   context.Context
	abort context.CancelFunc

	queuesMu sync.Mutex
	queues   map[string]func() int // depth of each queue, while running
}

// Settings derived from the config that are not options of their own.
const (
	shutdownGrace = 2 * time.Second
)

// Threads is the number of decrypt goroutines: nsca_threads_per_worker, or
// one per CPU when it is 0.
func Threads(cfg *conf.Config) int {
	if cfg.ThreadsPerWorker > 0 {
		return cfg.ThreadsPerWorker
	}
	return runtime.NumCPU()
}

// openFilesLimit is RLIMIT_NOFILE, the most descriptors this process may
// hold.
func openFilesLimit() uint64 {
	var rl unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	return rl.Cur
}

// MaxConnections is max_connections, or, when it is 0, a limit sized for the
// machine: what the open files limit allows, less some descriptors for the
// daemon's own files (sinks, epoll, pipes), and at least 1024.
func MaxConnections(cfg *conf.Config, nofile uint64) int {
	if cfg.MaxConnections > 0 {
		return cfg.MaxConnections
	}
	const ownFiles = 256
	return max(1024, int(min(nofile, 1<<30))-ownFiles)
}

// CipherOf derives the decryption settings from the config.
func CipherOf(cfg *conf.Config) CipherConfig {
	m := cfg.Method()
	return CipherConfig{
		Method:        m.Number,
		Algorithm:     m.Name,
		Password:      []byte(cfg.Password),
		PerConnection: cfg.DecryptionMode == 0,
	}
}

// New checks the config and builds a server on already listening sockets
// (none for ServeOne), with counters of its own.
func New(cfg *conf.Config, listeners []int) (*Server, error) {
	cipher := CipherOf(cfg)
	if err := CheckCipher(cipher); err != nil {
		return nil, err
	}
	allowed, err := cfg.AllowedPrefixes()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s := &Server{cfg: cfg, Stats: counters.NewStats(), log: counters.NewRateLog(10*time.Second, 5), cipher: cipher}
	dests, err := sink.Destinations(cfg, s.Stats, s.log)
	if err != nil {
		return nil, err
	}
	trusted, err := cfg.TrustedProxies()
	if err != nil {
		sink.CloseDestinations(dests)
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s.allowed = allowed
	acceptCfg := AcceptConfig{MaxConnections: MaxConnections(cfg, openFilesLimit()), Allowed: allowed, Proxy: cfg.ProxyProtocol, TrustedProxies: trusted}
	s.acceptor, err = NewAcceptor(listeners, acceptCfg, s.Stats, s.log)
	if err != nil {
		sink.CloseDestinations(dests)
		return nil, err
	}
	s.emitter = NewEmitter(dests, s.Stats, s.log)
	s.ctx, s.abort = context.WithCancel(context.Background())
	return s, nil
}

// Run starts every stage and blocks until the pipeline has drained: after
// Shutdown, once every connection has ended and every result was written.
func (s *Server) Run() error { return s.run(-1) }

// ServeOne serves the one connection on fd, as under inetd, and returns once
// its results are written. The server needs no listening socket for it.
func (s *Server) ServeOne(fd int) error { return s.run(fd) }

func (s *Server) run(inetdFD int) error {
	ctx, cfg := s.ctx, s.cfg
	depth := max(cfg.QueueSize, 1)
	conns := make(chan *Conn, depth)
	chunks := make(chan chunk, depth)
	packets := make(chan Packet, depth)
	items := make(chan sink.Item, depth)
	s.queuesMu.Lock()
	s.queues = map[string]func() int{
		"accept_to_read": func() int { return len(conns) }, "read_to_decrypt": func() int { return len(chunks) },
		"decrypt_to_validate": func() int { return len(packets) }, "validate_to_emit": func() int { return len(items) },
	}
	maps.Copy(s.queues, s.emitter.QueueDepths())
	s.queuesMu.Unlock()

	if inetdFD >= 0 {
		// Queued before the accept stage starts, which closes conns as soon as
		// Shutdown has stopped its (absent) listeners.
		s.acceptor.Adopt(ctx, inetdFD, conns)
		s.acceptor.Stop()
	}
	s.acceptor.Start(ctx, conns)
	readCfg := ReadConfig{Timeout: time.Duration(cfg.ConnectionTimeout) * time.Second, Grace: shutdownGrace, Allowed: s.allowed}
	if err := StartRead(ctx, conns, chunks, cfg.ReaderThreads, readCfg, s.Stats, s.log); err != nil {
		s.abort()
		return err
	}
	threads := Threads(cfg)
	if err := StartDecrypt(ctx, chunks, packets, threads, depth, s.cipher, s.Stats, s.log); err != nil {
		s.abort()
		return err
	}
	validateCfg := ValidateConfig{MaxChecks: cfg.MaxChecksPerConnection, StrictSpoofing: cfg.StrictModeSpoofing, Debug: cfg.Debug}
	if cfg.MaxPacketAgeEnabled {
		validateCfg.MaxPacketAge = time.Duration(cfg.MaxPacketAge) * time.Second
	}
	// Validation is cheap, but strict_mode_spoofing resolves host names:
	// then more goroutines keep one slow lookup from stalling every client.
	validators := 1
	if cfg.StrictModeSpoofing {
		validators = max(threads, 4)
	}
	StartValidate(ctx, packets, items, validators, depth, validateCfg, s.Stats, s.log)
	done := s.emitter.Start(ctx, items)

	<-done
	s.log.Flush()
	snap := s.Stats.Snapshot()
	glog.Infof("pipeline drained: %s", snap.Line(snap, 0))
	return nil
}

// counters.Snapshot is the server's counters with the depth of its queues (the
// shards inside a stage are not counted).
func (s *Server) Snapshot() counters.Snapshot {
	snap := s.Stats.Snapshot()
	s.queuesMu.Lock()
	defer s.queuesMu.Unlock()
	snap.Queues = map[string]int64{}
	for name, depth := range s.queues {
		snap.Queues[name] = int64(depth())
	}
	return snap
}

// Shutdown stops accepting; Run returns once open connections have ended
// (or used up their grace) and everything read has been emitted.
func (s *Server) Shutdown() { s.acceptor.Stop() }

// Abort tears the pipeline down at once, for a second signal or a drain
// that takes too long. Results already past validation are still emitted.
func (s *Server) Abort() { s.abort() }
