package stages

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/glog"

	"nsca_fast/conf"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/diagnose"
	"nsca_fast/stages/emit"
	"nsca_fast/stages/emit/gearman"
	"nsca_fast/stages/emit/sink"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/nrdp"
	"nsca_fast/stages/nsca"
	"nsca_fast/stages/nscang"
	"nsca_fast/stages/stage"
	"nsca_fast/stages/validate"
)

// Errors of the server's settings.
var (
	errConfig = errors.New("stages: config")
)

// Server is one running pipeline: accept → read → decrypt → validate →
// emit. New builds it, Run serves until Shutdown or Abort, in the manner of
// nsq's nsqd.
type Server struct {
	cfg   *conf.Config
	stats *counters.Stats
	log   *counters.RateLog
	dests []emit.Destination
	// clients is the process's table of sources, for /clients.
	clients *diagnose.Registry
	// front is send_nsca's front end.
	front *nsca.FrontEnd
	// adopt feeds the accept stage connections accepted elsewhere
	// (inetd); closing it stops accepting.
	adopt    chan int
	stopOnce sync.Once
	replaced atomic.Bool

	ctx   context.Context
	abort context.CancelFunc

	progress func()

	// ng is the nsca-ng listener's settings, nil when it is off; closing
	// ngStop stops it, with the accept stage.
	ng     *nscang.Config
	ngStop chan struct{}
	// nrdp is the NRDP front end's settings, nil when it is off; it
	// stops with the nsca-ng listener, at ngStop.
	nrdp *nrdp.Config

	queuesMu sync.Mutex
	queues   map[string]func() int // depth of each queue, while running
	// queueNames are the queues a snapshot shows at zero when they have
	// no depth yet; under queuesMu, made by the first snapshot.
	queueNames []string
}

// Settings derived from the config that are not options of their own.
const (
	shutdownGrace = 2 * time.Second
)

// CgoGoroutines is how many of a server's goroutines for cfg spend their
// time in C calls: send_nsca's decrypt goroutines when libmcrypt serves
// the method, and the nsca-ng listener's session goroutines (OpenSSL does
// their work). The process should have a P for each beyond its share of
// the CPUs: a goroutine in a C call keeps its P, and when no P is idle the
// runtime's monitor takes it back after 20 µs and then polls every 20 µs
// for a millisecond, which cost a libmcrypt server 4 % of its CPU.
func CgoGoroutines(cfg *conf.Config) int {
	n := nsca.CgoGoroutines(cfg)
	if cfg.NscaNGListen != "" {
		n += cfg.NscaNGThreads
	}
	return n
}

// Process is what every pipeline a process runs shares, across reloads:
// what its sinks share (its worker slot, SIGUSR1's reopen requests,
// Gearman's start_times) and the table of the sources its clients came
// from, which /clients serves.
type Process struct {
	emit.Process
	Clients *diagnose.Registry
	// Counters is where the process's pipeline keeps its counters, for
	// a supervisor to read; nil keeps them on the heap. Only the first
	// pipeline of a process keeps them there (a worker runs one).
	Counters *counters.Arena
}

// NewProcess returns what the pipelines of the process in worker slot
// share, or of the daemon's only process with slot -1.
func NewProcess(slot int) Process {
	return Process{
		Process: emit.Process{Slot: slot, Reopens: &sink.Reopener{}, Stamps: &gearman.Stamps{}},
		Clients: diagnose.NewRegistry(),
	}
}

// newStandalone is New for a server that shares nothing with another:
// inetd's, for its one connection, and the tests'. It has no SIGUSR1
// reopens.
func newStandalone(cfg *conf.Config, listeners []int) (*Server, error) {
	return New(cfg, listeners, Process{Process: emit.Process{Slot: -1}, Clients: diagnose.NewRegistry()})
}

// New checks the config and builds a server on already listening sockets
// (none for ServeOne), with counters of its own, in the process p, whose
// worker slot, reopen requests, Gearman start_times and sources table it
// shares with the process's other pipelines.
func New(cfg *conf.Config, listeners []int, p Process) (*Server, error) {
	s := &Server{cfg: cfg, stats: counters.NewStatsIn(p.Counters), log: counters.NewRateLog(10*time.Second, 5), clients: p.Clients}
	var err error
	if s.front, err = nsca.New(cfg, listeners, shutdownGrace, stage.Env{Stats: s.stats, Log: s.log}); err != nil {
		return nil, err
	}
	allowed, err := cfg.AllowedPrefixes()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	dests, err := emit.Destinations(cfg, p.Process, s.stats, s.log)
	if err != nil {
		return nil, err
	}
	if listeners != nil {
		// A daemon's pipeline, not one of inetd's processes per connection,
		// which would say it once per connection.
		emit.WarnStranded(cfg, p.Slot)
	}
	if cfg.NscaNGListen != "" && listeners != nil {
		if s.ng, err = nscang.ConfigFrom(cfg, allowed, shutdownGrace); err != nil {
			emit.CloseDestinations(dests)
			return nil, err
		}
	}
	if cfg.NRDP.Listen != "" && listeners != nil {
		if s.nrdp, err = nrdpConfigOf(cfg, allowed, s.stats, s.log, p.Clients); err != nil {
			emit.CloseDestinations(dests)
			return nil, err
		}
	}
	s.dests, s.adopt, s.ngStop = dests, make(chan int, 1), make(chan struct{})
	s.ctx, s.abort = context.WithCancel(context.Background())
	return s, nil
}

// nrdpConfigOf is the NRDP front end's settings for cfg, checked with the
// identities of identities_file, with its listener bound (so that a
// reload's new pipeline listens before the old one stops). It is not
// package nrdp's, because conf nests that package's options.
func nrdpConfigOf(cfg *conf.Config, allowed []netip.Prefix, stats *counters.Stats, log *counters.RateLog, clients *diagnose.Registry) (*nrdp.Config, error) {
	ids, err := cfg.Identities()
	if err != nil {
		return nil, err
	}
	n := &nrdp.Config{Options: cfg.NRDP, Identities: ids, Allowed: allowed, Stats: stats, Log: log, Clients: clients}
	if err := n.Check(); err != nil {
		return nil, cfg.PathError("nrdp_listen", err)
	}
	if n.Listener, err = nrdp.Listen(cfg.NRDP.Listen); err != nil {
		return nil, cfg.PathError("nrdp_listen", err)
	}
	return n, nil
}

// Run starts every stage and blocks until the pipeline has drained: after
// Shutdown, once every connection has ended and every result was written.
func (s *Server) Run() error { return s.runPipeline(-1) }

// ServeOne serves the one connection on fd, as under inetd, and returns once
// its results are written. The server needs no listening socket for it.
func (s *Server) ServeOne(fd int) error { return s.runPipeline(fd) }

// runPipeline runs the pipeline, with the connection inetdFD when it is not -1
// (and then without accepting), until it has drained.
func (s *Server) runPipeline(inetdFD int) error {
	ctx, cfg := s.ctx, s.cfg
	depth := max(cfg.QueueSize, 1)
	packets := intake.NewQueue(depth)
	items := make(chan sink.Item, depth)
	done := make(chan struct{})
	diag := diagnose.New(diagnose.Config{Secrets: s.front.DiagSecrets(), PayloadLengths: cfg.PayloadLengths, Registry: s.clients,
		Logf: func(key, format string, args ...any) {
			s.log.Eventf("were diagnosed (see /clients)", key, format, args...)
		}})
	defer diag.Close()
	env := stage.Env{Stats: s.stats, Log: s.log, Gauge: s.gauge, Progress: s.progress, Clients: s.clients, Diagnose: diag}
	env.Register(stageQueues[2], func() int { return len(packets.C) })
	env.Register(stageQueues[3], func() int { return len(items) })
	if inetdFD >= 0 {
		s.adopt <- inetdFD
		s.Shutdown()
	}
	// Downstream first: when a stage cannot start, closing the input of
	// the one started before it lets those already running drain and end.
	// Every front end sends to packets: the last one to leave closes it.
	health := emit.NewHealth()
	if err := emit.Start(ctx, items, done, emit.Config{Destinations: s.dests, Health: health}, env); err != nil {
		return err
	}
	vc := s.validateConfig()
	vc.Accepting, vc.AcceptingCommands = health.Accepting, health.AcceptingCommands
	if err := validate.Start(ctx, packets.C, items, vc, env); err != nil {
		s.abort()
		close(items)
		<-done
		return err
	}
	if err := s.startFrontEnds(ctx, packets, inetdFD < 0, env); err != nil {
		s.abort()
		s.Shutdown()
		<-done
		return err
	}
	<-done
	s.log.Flush()
	snap := s.stats.Snapshot()
	if s.replaced.Load() {
		glog.Infof("reload: the previous configuration's pipeline finished its connections: %s", snap.Line(snap, 0))
	} else {
		glog.Infof("pipeline drained: %s", snap.Line(snap, 0))
	}
	return nil
}

// validateConfig is the validate stage's settings.
func (s *Server) validateConfig() validate.Config {
	cfg := s.cfg
	// Validation is cheap, but strict_mode_spoofing resolves host names:
	// then more goroutines keep one slow lookup from stalling every client.
	validators := 1
	if cfg.StrictModeSpoofing {
		validators = max(nsca.DecryptThreads(cfg), 4)
	}
	vc := validate.Config{Goroutines: validators, Depth: max(cfg.QueueSize, 1), StrictSpoofing: cfg.StrictModeSpoofing, Debug: cfg.Debug}
	if cfg.MaxPacketAgeEnabled {
		vc.MaxPacketAge = time.Duration(cfg.MaxPacketAge) * time.Second
	}
	return vc
}

// startFrontEnds starts every front end the configuration has, each
// sending to packets; listen is false for inetd's one connection, which
// only send_nsca's front end serves. When one fails to start, every front
// end has left packets or will once a Shutdown has drained it.
func (s *Server) startFrontEnds(ctx context.Context, packets *intake.Queue, listen bool, env stage.Env) error {
	packets.Join() // send_nsca's, started last
	if s.ng != nil && listen {
		packets.Join()
		if err := nscang.Start(ctx, s.ngStop, packets.C, packets.Leave, *s.ng, env); err != nil {
			packets.Leave()
			packets.Leave()
			return err
		}
	}
	if s.nrdp != nil && listen {
		// It joins packets itself, once it is sure to run.
		if err := nrdp.Start(ctx, s.ngStop, packets, *s.nrdp, shutdownGrace); err != nil {
			packets.Leave()
			return err
		}
	}
	return s.front.Start(ctx, s.adopt, packets.C, packets.Leave, env)
}

// Replaced tells the server that a reload replaces it, before its
// Shutdown: its last line then says so rather than read as a stop.
func (s *Server) Replaced() { s.replaced.Store(true) }

// OnProgress has fn called, without blocking the pipeline, after each
// batch of results a destination is done with. Call it before Run.
func (s *Server) OnProgress(fn func()) { s.progress = fn }

// gauge registers the depth of a queue for Snapshot.
func (s *Server) gauge(name string, depth func() int) {
	s.queuesMu.Lock()
	defer s.queuesMu.Unlock()
	if s.queues == nil {
		s.queues = map[string]func() int{}
	}
	s.queues[name] = depth
}

// stageQueues name the queues between stages, in pipeline order:
// send_nsca's front end's, then validation's input and emit's.
var stageQueues = [...]string{nsca.Queues[0], nsca.Queues[1], "decrypt_to_validate", "validate_to_emit"}

// Snapshot is the server's counters with the depth of its queues (the
// shards inside a stage are not counted); before Run has made them, each
// is there at 0.
func (s *Server) Snapshot() counters.Snapshot {
	var snap counters.Snapshot
	s.SnapshotInto(&snap)
	return snap
}

// SnapshotInto is Snapshot into snap, reusing its maps: what a worker
// reports after the batches it delivers (counters.Stats.SnapshotInto).
func (s *Server) SnapshotInto(snap *counters.Snapshot) {
	s.stats.SnapshotInto(snap)
	s.queuesMu.Lock()
	defer s.queuesMu.Unlock()
	if snap.Queues == nil {
		snap.Queues = map[string]int64{}
	}
	// A worker snapshots after its batches, a batch a check at a trickle:
	// the names are made once, not concatenated for each snapshot.
	if s.queueNames == nil {
		s.queueNames = append([]string(nil), stageQueues[:]...)
		for _, d := range s.dests {
			s.queueNames = append(s.queueNames, "destination_"+d.Name)
		}
	}
	clear(snap.Queues)
	for _, name := range s.queueNames {
		snap.Queues[name] = 0
	}
	for name, depth := range s.queues {
		snap.Queues[name] = int64(depth())
	}
}

// Shutdown stops accepting; Run returns once open connections have ended
// (or used up their grace) and everything read has been emitted.
func (s *Server) Shutdown() {
	s.stopOnce.Do(func() {
		close(s.adopt)
		close(s.ngStop)
	})
}

// Abort tears the pipeline down at once, for a second signal or a drain
// that takes too long. Results already past validation are still emitted.
func (s *Server) Abort() { s.abort() }
