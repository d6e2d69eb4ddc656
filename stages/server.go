package stages

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"nsca_fast/stages/counters"
	"runtime"
	"sync"
	"time"

	"github.com/golang/glog"

	"nsca_fast/conf"
	"nsca_fast/stages/sink"
)

// ErrConfig wraps settings the pipeline cannot run with.
var ErrConfig = errors.New("stages: config")

// Server is one running pipeline: accept → read → decrypt → validate →
// emit. New builds it, Run serves until Shutdown or Abort, in the manner of
// nsq's nsqd.
type Server struct {
	// LogStats logs the statistics line every stats_interval seconds; a
	// worker process leaves that to its supervisor, which sums all workers.
	LogStats bool

	cfg      *conf.Config
	Stats    *counters.Stats
	log      *rateLog
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
	shutdownGrace        = 2 * time.Second
	fullWaitWithoutSpool = 10 * time.Second
	// localOverflowDepth is the least the local destination queues, when
	// remote sinks run beside it, before results overflow to the spool.
	localOverflowDepth = 10000
)

// Threads is the number of decrypt goroutines: nsca_threads_per_worker, or
// one per CPU when it is 0.
func Threads(cfg *conf.Config) int {
	if cfg.ThreadsPerWorker > 0 {
		return cfg.ThreadsPerWorker
	}
	return runtime.NumCPU()
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

// Chain builds the local sinks in the order results try them: the command
// file first and the spool if it fails (nsca_fast's behaviour; with only one
// of them set, that one), then the alternate dump file as the last resort.
func Chain(cfg *conf.Config) ([]sink.Sink, error) {
	chain, err := localFallbacks(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.CommandFile != "" {
		c := sink.NewCommandFile(cfg.CommandFile, cfg.AppendToFile, cfg.AggregateWrites)
		// conf refuses this too, but not under nsca_chroot, where the path
		// means something only now.
		if err := c.Probe(); errors.Is(err, sink.ErrIsDir) {
			closeSinks(chain)
			return nil, fmt.Errorf("%w: %w", ErrConfig, cfg.PathError("command_file", err))
		}
		// Worker processes share the command file: each write of lines
		// holds a lock, so a line longer than PIPE_BUF is never interleaved.
		c.Lock = cfg.Workers > 0
		if cfg.CheckResultPath == "" {
			// A full pipe means the core is alive but slow. Without a spool
			// the only other place is the dump file, which the core never
			// reads: wait longer for the pipe (the pipeline holds back
			// meanwhile).
			c.FullWait = fullWaitWithoutSpool
		}
		chain = append([]sink.Sink{c}, chain...)
	}
	if cfg.CommandFile == "" && cfg.CheckResultPath == "" {
		closeSinks(chain)
		return nil, fmt.Errorf("%w: no sink: set command_file or check_result_path", ErrConfig)
	}
	return chain, nil
}

// localFallbacks builds what takes the results the command file cannot:
// the spool, then the dump file, each if configured.
func localFallbacks(cfg *conf.Config) ([]sink.Sink, error) {
	var out []sink.Sink
	if cfg.CheckResultPath != "" {
		s, err := newSpool(cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if cfg.AlternateDumpFile != "" {
		out = append(out, sink.NewDump(cfg.AlternateDumpFile))
	}
	return out, nil
}

func newSpool(cfg *conf.Config) (sink.Sink, error) {
	s := sink.NewSpool(cfg.CheckResultPath, cfg.SpoolFileMode)
	if err := s.Writable(); err != nil {
		// In the words of --check-config, which checked it as the user
		// running it; here it is checked as nsca_user, inside nsca_chroot.
		return nil, fmt.Errorf("%w: %w", ErrConfig, cfg.PathError("check_result_path", err))
	}
	return s.Capped(cfg.CheckResultPathMaxFiles, max(cfg.QueueSize, 1)), nil
}

// fallbackChain builds a remote sink's fallback (a *_fallback option's
// value): a spool, a dump file, or nothing.
func fallbackChain(cfg *conf.Config, option string) ([]sink.Sink, error) {
	switch cfg.Fallback(option) {
	case conf.FallbackSpool:
		s, err := newSpool(cfg)
		if err != nil {
			return nil, err
		}
		return []sink.Sink{s}, nil
	case conf.FallbackDump:
		return []sink.Sink{sink.NewDump(cfg.AlternateDumpFile)}, nil
	}
	return nil, nil
}

// Destinations builds every destination the config asks for: the local
// core (command file, spool, dump file), Icinga 2's API and Gearman. On an
// error, the sinks built so far are closed.
func Destinations(cfg *conf.Config, stats *counters.Stats, log *rateLog) (dests []Destination, err error) {
	defer func() {
		if err != nil {
			closeDestinations(dests)
			dests = nil
		}
	}()
	remote := []struct {
		on       bool
		name     string
		fallback string
		capacity int
		open     func() (sink.Sink, error)
	}{
		{cfg.Icinga2URL != "", "icinga2", cfg.Icinga2Fallback, cfg.Icinga2QueueSize, func() (sink.Sink, error) { return newIcinga(cfg, stats, log) }},
		{cfg.GearmanServers != "", "gearman", cfg.GearmanFallback, cfg.GearmanQueueSize, func() (sink.Sink, error) { return newGearman(cfg) }},
	}
	count := 0
	if cfg.LocalSinks() {
		count++
	}
	for _, r := range remote {
		if r.on {
			count++
		}
	}
	// A single destination never overflows (its full queue makes the
	// clients wait), so it needs no overflow sinks.
	overflows := count > 1
	if cfg.LocalSinks() {
		local := Destination{Name: "local", Capacity: max(cfg.QueueSize, 1), Blocking: true}
		if local.Chain, err = Chain(cfg); err != nil {
			return dests, err
		}
		dests = append(dests, local)
		if overflows && len(local.Chain) > 1 {
			// The overflow skips the command file (with remote sinks, the
			// local destination exists only for it): the queue is full
			// because the core reads it too slowly.
			overflow, err := localFallbacks(cfg)
			if err != nil {
				return dests, err
			}
			dests[0].Overflow, dests[0].Blocking = overflow, false
			// The core reads in bursts: only a backlog this deep, not a
			// burst of clients, should send results past the command file.
			dests[0].Capacity = max(cfg.QueueSize, localOverflowDepth)
		}
	}
	for _, r := range remote {
		if !r.on {
			continue
		}
		s, err := r.open()
		if err != nil {
			return dests, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		d := Destination{Name: r.name, Chain: []sink.Sink{s}, Capacity: r.capacity, Remote: true}
		dests = append(dests, d)
		fallback, err := fallbackChain(cfg, r.fallback)
		if err != nil {
			return dests, err
		}
		dests[len(dests)-1].Chain = append(dests[len(dests)-1].Chain, fallback...)
		if overflows {
			if dests[len(dests)-1].Overflow, err = fallbackChain(cfg, r.fallback); err != nil {
				return dests, err
			}
		}
	}
	if len(dests) == 0 {
		return nil, fmt.Errorf("%w: no sink: set command_file, check_result_path, icinga2_api_url or gearman_server", ErrConfig)
	}
	return dests, nil
}

// closeDestinations closes the sinks of destinations that will not run.
func closeDestinations(dests []Destination) {
	for _, d := range dests {
		closeSinks(d.Chain)
		closeSinks(d.Overflow)
	}
}

func closeSinks(sinks []sink.Sink) {
	for _, s := range sinks {
		s.Close()
	}
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

// New checks the config and builds a server on already listening sockets.
// stats may carry the counters of the server this one replaces (a reload),
// so that they keep counting; nil starts from zero.
func New(cfg *conf.Config, listeners []int, nofile uint64, stats *counters.Stats) (*Server, error) {
	cipher := CipherOf(cfg)
	if err := CheckCipher(cipher); err != nil {
		return nil, err
	}
	allowed, err := cfg.AllowedPrefixes()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if stats == nil {
		stats = counters.NewStats()
	}
	s := &Server{LogStats: true, cfg: cfg, Stats: stats, log: newRateLog(10*time.Second, 5), cipher: cipher}
	dests, err := Destinations(cfg, s.Stats, s.log)
	if err != nil {
		return nil, err
	}
	trusted, err := cfg.TrustedProxies()
	if err != nil {
		closeDestinations(dests)
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s.allowed = allowed
	acceptCfg := AcceptConfig{MaxConnections: MaxConnections(cfg, nofile), Allowed: allowed, Proxy: cfg.ProxyProtocol, TrustedProxies: trusted}
	s.acceptor, err = NewAcceptor(listeners, acceptCfg, s.Stats, s.log)
	if err != nil {
		closeDestinations(dests)
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

	stop := make(chan struct{})
	if s.LogStats {
		go counters.ReportEvery(s.Stats.Snapshot, StatsInterval(cfg), stop)
	}
	<-done
	close(stop)
	s.log.Flush()
	snap := s.Stats.Snapshot()
	glog.Infof("pipeline drained: %s", snap.Line(snap, 0))
	return nil
}

// StatsInterval is stats_interval as a duration; 0 means no statistics lines.
func StatsInterval(cfg *conf.Config) time.Duration {
	return time.Duration(cfg.StatsInterval) * time.Second
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
