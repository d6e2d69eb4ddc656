package nrdp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/conf/identities"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/intake"
)

// ErrConfig wraps settings New cannot serve with, and is the Kind of the
// *option.Error Validate returns.
var ErrConfig = errors.New("nrdp: config")

// Front is this front end's name in its submissions' sources.
const Front intake.Front = "nrdp"

// frontIndex is NRDP's index for intake.IDBase: its sources' IDs never
// meet send_nsca's (0) or nsca-ng's (1).
const frontIndex = 2

// Config is what New needs: the nrdp_* options and what the server around
// the front end gives it.
type Config struct {
	Options
	// Identities are identities_file's, whose token keys name them; nil:
	// only nrdp_tokens.
	Identities *identities.File
	// Allowed is allowed_hosts: connections from elsewhere are closed at
	// once; nil lets everyone in.
	Allowed []netip.Prefix
	// Queue is validation's input, which every result is handed to.
	Queue *intake.Queue
	// Listener, when set, is served instead of listening on Listen (tests,
	// and sockets handed over at a reload).
	Listener net.Listener
	// Stats counts its connections (accepted, open, refused by
	// allowed_hosts) and the submissions it hands in (received), and Log
	// rate-limits its warnings; nil: not counted, and glog unlimited.
	// (Not a stage.Env: package stage imports diagnose, which imports
	// conf, which nests this package's options.)
	Stats *counters.Stats
	Log   *counters.RateLog
	// Clients records, for /clients, the sources whose requests failed
	// (a bad token, bad XML or JSON, a wrong path) and why; nil: not
	// recorded. The daemon's is its diagnose.Registry.
	Clients Clients
}

// Clients is the table of sources /clients serves.
type Clients interface {
	// Failed records a request from addr that failed for why.
	Failed(addr netip.Addr, why string)
}

// Server is the NRDP front end: New builds it and binds its listener,
// Run serves until Close, Close ends it and leaves the queue, as nsqd's
// New, Main and Exit.
type Server struct {
	cfg        Config
	ln         *limitListener
	http       *http.Server
	commandsOn bool // some identity with a token may submit commands
	// anyTokens holds nrdp_tokens as one identity's, for ByToken's
	// comparison in constant time.
	anyTokens *identities.File

	nextID atomic.Uint64 // the sources' IDs, from intake.IDBase(frontIndex)

	mu       sync.Mutex
	closing  bool
	inFlight sync.WaitGroup // handlers that may still send to the queue
	leave    sync.Once
}

// New checks cfg, binds the listener (or takes cfg.Listener) and joins
// cfg.Queue; the caller must Close what it returns.
func New(cfg Config) (*Server, error) {
	cfg.Options = cfg.Options.withDefaults()
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cfg.Queue == nil {
		return nil, fmt.Errorf("%w: no queue to hand results to", ErrConfig)
	}
	var tlsCfg *tls.Config
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: nrdp_tls_cert=%s, nrdp_tls_key=%s: %w", ErrConfig, cfg.CertFile, cfg.KeyFile, err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = Listen(cfg.Listen); err != nil {
			return nil, err
		}
	}
	if cfg.Stats == nil {
		cfg.Stats = counters.NewStats()
	}
	s := &Server{cfg: cfg, ln: newLimitListener(ln, cfg.MaxConnections, cfg.Allowed, cfg.Stats),
		anyTokens: &identities.File{Identities: []*identities.Identity{{Tokens: cfg.Tokens}}}}
	if cfg.Identities != nil {
		for _, id := range cfg.Identities.Identities {
			s.commandsOn = s.commandsOn || (len(id.Tokens) > 0 && len(id.Commands) > 0)
		}
	}
	s.nextID.Store(intake.IDBase(frontIndex))
	s.http = &http.Server{
		Handler:           s,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: cfg.HeaderTimeout,
		// The body's time, after the headers'.
		ReadTimeout: cfg.HeaderTimeout + cfg.Timeout,
		// From the headers' end: the body, the wait for the outcomes
		// (handlerTimeout) and the answer.
		WriteTimeout:   2*cfg.Timeout + 5*time.Second,
		IdleTimeout:    cfg.IdleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       log.New(httpLog{s}, "", 0),
	}
	cfg.Queue.Join()
	return s, nil
}

// maxHeaderBytes bounds a request's headers and URL: a GET may carry its
// data in the query, as NRDP allows, up to this.
const maxHeaderBytes = 256 << 10

// Check checks the options with the identities, for New and before the
// pipeline starts: some token must be able to submit, and no token of
// nrdp_tokens may also name an identity (which rights would it carry?).
func (cfg *Config) Check() error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if len(cfg.Tokens) == 0 && (cfg.Identities == nil || !cfg.Identities.HasTokens()) {
		return fmt.Errorf("%w: nrdp_listen=%s: no token could submit: set nrdp_tokens, or token keys in identities_file",
			ErrConfig, cfg.Listen)
	}
	if cfg.Identities == nil {
		return nil
	}
	for _, t := range cfg.Tokens {
		if id := cfg.Identities.ByToken(t); id != nil {
			return fmt.Errorf("%w: nrdp_tokens: a token is also the token of authorize %q (%s)", ErrConfig, id.Name, id.Where)
		}
	}
	return nil
}

// Listen listens on address with SO_REUSEPORT, so that a reload's new
// pipeline and each worker process listen beside the one serving.
func Listen(address string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) }); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", address)
	if err != nil {
		return nil, fmt.Errorf("%w: nrdp_listen=%s: %w", ErrConfig, address, err)
	}
	return ln, nil
}

// Addr is the address the listener is bound to.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Run serves until Close, and returns nil then; another error means the
// listener failed.
func (s *Server) Run() error {
	var ln net.Listener = s.ln
	if s.http.TLSConfig != nil {
		ln = tls.NewListener(ln, s.http.TLSConfig)
	}
	glog.Infof("nrdp: serving on %s (%s)", s.ln.Addr(), map[bool]string{true: "https", false: "http"}[s.http.TLSConfig != nil])
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops accepting, lets the requests under way finish until ctx is
// done (then closes their connections), waits for every handler to stop
// sending and leaves the queue: after it, nothing of this front end
// sends to the pipeline.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	err := s.http.Shutdown(ctx)
	if err != nil {
		err = s.http.Close()
	}
	// Shutdown closes it only when Run served it.
	s.ln.Close()
	// A handler still waiting gives up at its own timeout, bounded.
	s.inFlight.Wait()
	s.leave.Do(s.cfg.Queue.Leave)
	return err
}

// enter counts a handler that may send to the queue; false once Close
// has begun.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.inFlight.Add(1)
	return true
}

// warnf logs at most a few lines per key and window.
func (s *Server) warnf(key, format string, args ...any) {
	if s.cfg.Log != nil {
		s.cfg.Log.Eventf("were refused by NRDP", key, format, args...)
		return
	}
	glog.Warningf(format, args...)
}

// httpLog routes net/http's own messages (TLS handshake errors, bad
// requests) to the rate-limited log.
type httpLog struct{ s *Server }

// Write logs one of net/http's lines.
func (h httpLog) Write(p []byte) (int, error) {
	h.s.warnf("nrdp-http", "nrdp: %s", string(p))
	return len(p), nil
}

// limitListener serves at most max connections at once, from allowed
// addresses only: Accept waits for a free slot, so a flood waits in the
// kernel's listen queue, not in goroutines.
type limitListener struct {
	net.Listener
	slots   chan struct{}
	allowed []netip.Prefix
	stats   *counters.Stats
	done    chan struct{}
	once    sync.Once
}

func newLimitListener(ln net.Listener, max int, allowed []netip.Prefix, stats *counters.Stats) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max), allowed: allowed, stats: stats, done: make(chan struct{})}
}

// Accept returns the next allowed connection once a slot is free.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		l.stats.Connections.Add(1)
		if !l.allows(c.RemoteAddr()) {
			l.stats.Refused.Add(1)
			c.Close()
			<-l.slots
			continue
		}
		l.stats.Open.Add(1)
		return &slotConn{Conn: c, free: func() { l.stats.Open.Add(-1); <-l.slots }}, nil
	}
}

func (l *limitListener) allows(a net.Addr) bool {
	if l.allowed == nil {
		return true
	}
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && identities.Specificity(l.allowed, ap.Addr()) >= 0
}

// Close closes the listener and wakes an Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// slotConn gives its slot back when closed, once.
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

// Close closes the connection and frees its slot.
func (c *slotConn) Close() error {
	c.once.Do(c.free)
	return c.Conn.Close()
}

// Start serves cfg's listener, handing submissions to q, which it joins;
// it ends once stop is closed (Shutdown) or ctx is cancelled (Abort),
// letting the requests under way finish for grace, and then leaves q.
func Start(ctx context.Context, stop <-chan struct{}, q *intake.Queue, cfg Config, grace time.Duration) error {
	cfg.Queue = q
	srv, err := New(cfg)
	if err != nil {
		cfg.Listener.Close()
		return err
	}
	go func() {
		if err := srv.Run(); err != nil {
			glog.Errorf("nrdp: %v", err)
		}
	}()
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
			grace = 0
		}
		cctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		srv.Close(cctx)
	}()
	return nil
}
