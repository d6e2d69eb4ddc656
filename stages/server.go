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
	"golang.org/x/sys/unix"

	"nsca_fast/cgo/openssl"
	"nsca_fast/conf"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/diagnose"
	"nsca_fast/stages/emit"
	"nsca_fast/stages/emit/gearman"
	"nsca_fast/stages/emit/sink"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/nrdp"
	"nsca_fast/stages/stage"
	"nsca_fast/stages/validate"
)

// Errors of the server's settings.
var (
	errConfig       = errors.New("stages: config")
	errNoIdentities = errors.New("stages: nsca_ng_listen needs identities_file")
)

// Server is one running pipeline: accept → read → decrypt → validate →
// emit. New builds it, Run serves until Shutdown or Abort, in the manner of
// nsq's nsqd.
type Server struct {
	cfg   *conf.Config
	stats *counters.Stats
	log   *counters.RateLog
	// listeners are the server's own duplicates of the listening
	// sockets, which its accept stage owns once it runs.
	listeners []int
	dests     []emit.Destination
	// clients is the process's table of sources, for /clients.
	clients   *diagnose.Registry
	acceptCfg acceptConfig
	// adopt feeds the accept stage connections accepted elsewhere
	// (inetd); closing it stops accepting.
	adopt    chan int
	stopOnce sync.Once
	replaced atomic.Bool
	cipher   cipherConfig
	// admission lets clients in, at accept and after a PROXY header.
	admission *admission

	ctx   context.Context
	abort context.CancelFunc

	progress func()

	// ng is the nsca-ng listener's settings, nil when it is off; closing
	// ngStop stops it, with the accept stage.
	ng     *ngConfig
	ngStop chan struct{}
	// nrdp is the NRDP front end's settings, nil when it is off; it
	// stops with the nsca-ng listener, at ngStop.
	nrdp *nrdp.Config

	queuesMu sync.Mutex
	queues   map[string]func() int // depth of each queue, while running
}

// Settings derived from the config that are not options of their own.
const (
	shutdownGrace = 2 * time.Second
)

// decryptThreads is the number of decrypt goroutines: nsca_threads_per_worker, or
// one per CPU of the process's share when it is 0. More would only queue
// for the same CPUs, and with libmcrypt each is a thread of its own.
func decryptThreads(cfg *conf.Config) int {
	if cfg.ThreadsPerWorker > 0 {
		return cfg.ThreadsPerWorker
	}
	return cfg.CPUShare()
}

// CgoGoroutines is how many of a server's goroutines for cfg spend their
// time in C calls: the decrypt goroutines when libmcrypt serves the method,
// else none. The process should have a P for each beyond its share of the
// CPUs: a goroutine in a C call keeps its P, and when no P is idle the
// runtime's monitor takes it back after 20 µs and then polls every 20 µs for
// a millisecond, which cost a libmcrypt server 4 % of its CPU.
// The nsca-ng listener's session goroutines are such goroutines too:
// OpenSSL does their work.
func CgoGoroutines(cfg *conf.Config) int {
	n := 0
	if cfg.NscaNGListen != "" {
		n = cfg.NscaNGThreads
	}
	if c, err := cipherOf(cfg); err != nil || !c.callsC() {
		return n
	}
	return n + decryptThreads(cfg)
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

// cipherOf is the decrypt stage's settings for cfg, with the engine that
// cfg.Cipher chose (and keeps, so that this costs one self-test per loaded
// configuration however often it is called).
func cipherOf(cfg *conf.Config) (cipherConfig, error) {
	choice, err := cfg.Cipher()
	if err != nil {
		return cipherConfig{}, fmt.Errorf("%w: decryption_engine=%s: %w", errCipher, choice.Asked, err)
	}
	cc := cipherConfig{
		Method:         cfg.DecryptionMethod,
		Engine:         choice.Engine,
		Password:       []byte(cfg.Password),
		PerConnection:  cfg.DecryptionMode == 0,
		PayloadLengths: cfg.PayloadLengths,
	}
	secrets, err := cfg.Secrets()
	if err != nil {
		return cipherConfig{}, fmt.Errorf("%w: %w", errCipher, err)
	}
	if len(secrets) > 1 || len(cfg.MoreMethods) > 0 || cfg.PasswordFile != "" || cfg.IdentitiesFile != "" {
		// Named even when one is left, so that its matches are counted.
		for _, s := range secrets {
			cc.Candidates = append(cc.Candidates, candidate{Name: s.Name, Method: s.Method.Number, Engine: s.Choice.Engine,
				Password: s.Password, Networks: s.Networks, Rights: s.Rights})
		}
	}
	return cc, nil
}

// Process is what every pipeline a process runs shares, across reloads:
// what its sinks share (its worker slot, SIGUSR1's reopen requests,
// Gearman's start_times) and the table of the sources its clients came
// from, which /clients serves.
type Process struct {
	emit.Process
	Clients *diagnose.Registry
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
	s := &Server{cfg: cfg, stats: counters.NewStats(), log: counters.NewRateLog(10*time.Second, 5), cipher: cipher, clients: p.Clients}
	dests, err := emit.Destinations(cfg, p.Process, s.stats, s.log)
	if err != nil {
		return nil, err
	}
	if listeners != nil {
		// A daemon's pipeline, not one of inetd's processes per connection,
		// which would say it once per connection.
		emit.WarnStranded(cfg, p.Slot)
	}
	trusted, err := cfg.TrustedProxies()
	if err != nil {
		emit.CloseDestinations(dests)
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	s.admission = &admission{maxConns: connectionLimit(cfg, openFilesLimit()), allowed: allowed, proxy: cfg.ProxyProtocol, trusted: trusted, stats: s.stats, log: s.log}
	s.acceptCfg = acceptConfig{admission: s.admission}
	if s.listeners, err = dupListeners(listeners); err != nil {
		emit.CloseDestinations(dests)
		return nil, err
	}
	if cfg.NscaNGListen != "" && listeners != nil {
		if s.ng, err = ngConfigOf(cfg, allowed, p.Reopens); err != nil {
			emit.CloseDestinations(dests)
			return nil, err
		}
	}
	if cfg.NRDP.On() && listeners != nil {
		if s.nrdp, err = nrdpConfigOf(cfg, allowed, p.Reopens, s.stats, s.log); err != nil {
			emit.CloseDestinations(dests)
			return nil, err
		}
	}
	s.dests, s.adopt, s.ngStop = dests, make(chan int, 1), make(chan struct{})
	s.ctx, s.abort = context.WithCancel(context.Background())
	return s, nil
}

// ngConfigOf is the nsca-ng listener's settings for cfg, with the
// identities of identities_file (whose settings other than authorize
// blocks the configuration warns about, once each); its command file
// follows reopens.
func ngConfigOf(cfg *conf.Config, allowed []netip.Prefix, reopens *sink.Reopener) (*ngConfig, error) {
	if err := openssl.Available(); err != nil {
		return nil, cfg.PathError("nsca_ng_listen", err)
	}
	// The file Secrets read: identities_file is read once per load.
	f, err := cfg.Identities()
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, cfg.PathError("identities_file", errNoIdentities)
	}
	ng := &ngConfig{
		Listen:           cfg.NscaNGListen,
		Threads:          cfg.NscaNGThreads,
		MaxSessions:      cfg.NscaNGMaxSessions,
		HandshakeTimeout: time.Duration(cfg.NscaNGHandshakeTimeout) * time.Second,
		Timeout:          time.Duration(cfg.NscaNGTimeout) * time.Second,
		MaxCommandSize:   cfg.NscaNGMaxCommandSize,
		Ciphers:          cfg.NscaNGCiphers,
		Identities:       ngIdentitiesOf(f),
		Allowed:          allowed,
		Grace:            shutdownGrace,
		Debug:            cfg.Debug,
	}
	ng.Commands = commandWriter(cfg, reopens)
	if ng.Listener, err = ngListen(cfg.NscaNGListen); err != nil {
		return nil, fmt.Errorf("%w: %s: nsca_ng_listen=%s: %w", errNG, cfg.Where("nsca_ng_listen"), cfg.NscaNGListen, err)
	}
	return ng, nil
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
	conns := make(chan *clientConn, depth)
	chunks := make(chan chunk, depth)
	packets := intake.NewQueue(depth)
	items := make(chan sink.Item, depth)
	done := make(chan struct{})
	diag := diagnose.New(diagnose.Config{Secrets: s.diagSecrets(), PayloadLengths: cfg.PayloadLengths, Registry: s.clients,
		Logf: func(key, format string, args ...any) {
			s.log.Eventf("were diagnosed (see /clients)", key, format, args...)
		}})
	defer diag.Close()
	env := stage.Env{Stats: s.stats, Log: s.log, Gauge: s.gauge, Progress: s.progress, Clients: s.clients, Diagnose: diag}
	for i, ch := range []func() int{
		func() int { return len(conns) }, func() int { return len(chunks) },
		func() int { return len(packets.C) }, func() int { return len(items) },
	} {
		env.Register(stageQueues[i], ch)
	}
	if inetdFD >= 0 {
		s.adopt <- inetdFD
		s.Shutdown()
	}

	threads := decryptThreads(cfg)
	// Validation is cheap, but strict_mode_spoofing resolves host names:
	// then more goroutines keep one slow lookup from stalling every client.
	validators := 1
	if cfg.StrictModeSpoofing {
		validators = max(threads, 4)
	}
	validateCfg := validate.Config{Goroutines: validators, Depth: depth, StrictSpoofing: cfg.StrictModeSpoofing, Debug: cfg.Debug}
	if cfg.MaxPacketAgeEnabled {
		validateCfg.MaxPacketAge = time.Duration(cfg.MaxPacketAge) * time.Second
	}
	// The decrypt goroutines run at once as far as this process has CPUs
	// (GOMAXPROCS is no measure of that: it has a P more for each
	// goroutine in C calls).
	flow := newFlow(min(threads, cfg.CPUShare()), cfg.Workers, func() bool { return len(chunks) == cap(chunks) })
	s.acceptCfg.Listeners = s.listeners
	s.acceptCfg.flow = flow
	intake := &readIntake{}
	s.acceptCfg.handOff = intake.register
	readCfg := readConfig{Readers: cfg.ReaderThreads, Timeout: time.Duration(cfg.ConnectionTimeout) * time.Second, Grace: shutdownGrace, admission: s.admission, flow: flow, intake: intake}
	if s.cipher.callsC() {
		// libmcrypt costs 50 µs to 1 ms a packet: a connection's whole
		// burst is one read and one hand-off to decrypt, which calls C in
		// slices of its own size (cgoSlice).
		readCfg.ChunkSize = readBudgetPerConn
	}
	// Downstream first: when a stage cannot start, closing the input of
	// the one started before it lets those already running drain and end.
	// Every front end sends to packets: the last one to finish closes it.
	packets.Join()
	ngStart := func() error { return nil }
	ngOn := s.ng != nil && inetdFD < 0
	if ngOn {
		packets.Join()
		ng := *s.ng
		// The listener's own flow: its sessions need no decrypting, and
		// wait only for the queue they feed.
		ng.flow = newFlow(1, cfg.Workers, packets.Full)
		ngStart = func() error { return startNG(ctx, s.ngStop, packets.C, packets.Leave, ng, env) }
	}
	nrdpStart := func() error { return nil }
	if s.nrdp != nil && inetdFD < 0 {
		nrdpStart = func() error { return startNRDP(ctx, s.ngStop, packets, *s.nrdp) }
	}
	starts := []struct {
		start func() error
		input func()
	}{
		{func() error {
			return emit.Start(ctx, items, done, emit.Config{Destinations: s.dests}, env)
		}, func() { close(items) }},
		{func() error { return validate.Start(ctx, packets.C, items, validateCfg, env) }, func() { close(packets.C) }},
		{ngStart, func() {
			// Decrypt never started: the listener is the last sender.
			if !ngOn {
				close(packets.C)
				return
			}
			s.Shutdown()
			packets.Leave()
		}},
		// Decrypt never started: Shutdown has the listeners leave.
		{nrdpStart, func() { s.Shutdown(); packets.Leave() }},
		{func() error {
			return startDecrypt(ctx, chunks, packets.C, decryptConfig{Goroutines: threads, Depth: depth, Cipher: s.cipher, Closed: packets.Leave,
				MaxChecks: cfg.MaxChecksPerConnection, flow: flow}, env)
		}, func() { close(chunks) }},
		{func() error { return startRead(ctx, conns, chunks, readCfg, env) }, func() { close(conns) }},
		{func() error { return startAccept(ctx, s.adopt, conns, s.acceptCfg, env) }, nil},
	}
	for i, st := range starts {
		if err := st.start(); err != nil {
			s.abort()
			if i > 0 {
				starts[i-1].input()
				<-done
			}
			return err
		}
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

// Replaced tells the server that a reload replaces it, before its
// Shutdown: its last line then says so rather than read as a stop.
func (s *Server) Replaced() { s.replaced.Store(true) }

// diagSecrets are the secrets the diagnosis compares a client's packets with.
func (s *Server) diagSecrets() []diagnose.Secret {
	var out []diagnose.Secret
	for _, c := range s.cipher.candidates() {
		out = append(out, diagnose.Secret{Name: c.Name, Method: c.Method, Password: c.Password, Networks: c.Networks})
	}
	return out
}

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

// stageQueues name the queues between stages, in pipeline order.
var stageQueues = [...]string{"accept_to_read", "read_to_decrypt", "decrypt_to_validate", "validate_to_emit"}

// Snapshot is the server's counters with the depth of its queues (the
// shards inside a stage are not counted); before Run has made them, each
// is there at 0.
func (s *Server) Snapshot() counters.Snapshot {
	snap := s.stats.Snapshot()
	s.queuesMu.Lock()
	defer s.queuesMu.Unlock()
	snap.Queues = map[string]int64{}
	for _, name := range stageQueues {
		snap.Queues[name] = 0
	}
	for _, d := range s.dests {
		snap.Queues["destination_"+d.Name] = 0
	}
	for name, depth := range s.queues {
		snap.Queues[name] = int64(depth())
	}
	return snap
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
