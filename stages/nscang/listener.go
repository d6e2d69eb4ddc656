package nscang

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/cgo/openssl"
	"nsca_fast/conf/identities"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/frontend"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/rawsys"
	"nsca_fast/stages/stage"
)

// Front is this front end's name in its submissions' sources.
const Front intake.Front = "nsca-ng"

// Errors of the nsca-ng listener.
var (
	errListener = errors.New("nscang: listener")
)

// dropBadCommand counts pushed commands that do not parse (a check
// result with a field missing, a bad timestamp). Everything a client
// pushed is counted as received; what validation refuses (names, rights)
// is counted there, under its reason, as a send_nsca client's is.
const dropBadCommand = "nsca_ng_bad_command"

// Identities are the identities nsca-ng clients authenticate as.
type Identities interface {
	// Keys are the pre-shared keys, "*" for every identity without one.
	Keys() []openssl.Key
	// Lookup is the identity named name, or the fallback "*", or nil.
	Lookup(name string) *identities.Identity
}

// Config are the nsca-ng listener's settings.
type Config struct {
	// Listen is the address:port, and Listener the socket
	// frontend.ListenReusePort made there, which Start then owns.
	Listen   string
	Listener *os.File
	// Threads is the fixed number of goroutines running the sessions.
	Threads     int
	MaxSessions int
	// HandshakeTimeout bounds the TLS handshake, Timeout idleness after it.
	HandshakeTimeout, Timeout time.Duration
	MaxCommandSize            int
	// HandshakesPerSource caps the connections of one address that are
	// in their TLS handshake (max_handshakes_per_source); 0: no cap.
	HandshakesPerSource int
	Ciphers             string
	Identities          Identities
	// Allowed, when not empty, lists the networks that may connect at all
	// (allowed_hosts); an identity's networks narrow it further.
	Allowed []netip.Prefix
	// Grace is how long open sessions may go on after Stop.
	Grace time.Duration
	Debug bool
}

// listener is the nsca-ng listener: one accept goroutine and cfg.Threads
// session goroutines, each with an epoll set. Sessions hand what clients
// push (check results and other commands) to the validate stage and
// answer OKAY when it reports them queued for emit, FAIL when refused.
type listener struct {
	cfg      Config
	ctx      *openssl.Context
	ln       *os.File
	out      chan<- intake.Submission
	stats    *counters.Stats
	log      *counters.RateLog
	workers  []*worker
	sessions atomic.Int64
	// handshakes holds each address's connections in their handshake.
	handshakes *frontend.SourceLimit
	nextID     atomic.Uint64
	stop       chan struct{}
	// acceptDone is set once no connection will be dealt to a worker.
	acceptDone atomic.Bool
}

// Start serves nsca-ng clients on cfg.Listener (from
// frontend.ListenReusePort, which it owns from then on, even when it
// fails), sending what they push to out. It stops accepting when stop is closed, gives open sessions
// cfg.Grace, and calls closed once nothing more will be sent.
func Start(ctx context.Context, stop chan struct{}, out chan<- intake.Submission, closed func(), cfg Config, env stage.Env) error {
	ln := cfg.Listener
	if err := openssl.Available(); err != nil {
		ln.Close()
		return fmt.Errorf("%w: %w", errListener, err)
	}
	if cfg.Identities == nil {
		ln.Close()
		return fmt.Errorf("%w: no identities: nsca_ng_listen needs identities_file", errListener)
	}
	tlsCtx, err := openssl.NewContext(cfg.Identities.Keys(), cfg.Ciphers)
	if err != nil {
		ln.Close()
		return fmt.Errorf("%w: %w", errListener, err)
	}
	s := &listener{cfg: cfg, ctx: tlsCtx, ln: ln, out: out, stats: env.Stats, log: env.Log,
		stop: stop, handshakes: frontend.NewSourceLimit(cfg.HandshakesPerSource)}
	for i := 0; i < max(cfg.Threads, 1); i++ {
		w, err := newWorker(s)
		if err != nil {
			for _, w := range s.workers {
				w.close()
			}
			s.ln.Close()
			tlsCtx.Close()
			return fmt.Errorf("%w: %w", errListener, err)
		}
		s.workers = append(s.workers, w)
	}
	glog.Infof("nsca-ng: listening on %s (%d identities, %d session goroutines)", cfg.Listen, len(cfg.Identities.Keys()), len(s.workers))
	var wg sync.WaitGroup
	stage.Go(ctx, &wg, "nsca-ng:accept", func(ctx context.Context) {
		s.accept(ctx)
		// At once: the kernel deals new connections to every socket of
		// the port (a reload's successor listens beside this one), and
		// would go on putting some in a backlog nobody accepts.
		s.ln.Close()
		s.acceptDone.Store(true)
		for _, w := range s.workers {
			w.wakeUp()
		}
	})
	for _, w := range s.workers {
		w.ctx = ctx
		stage.Go(ctx, &wg, "nsca-ng", func(ctx context.Context) { w.loop(ctx) })
	}
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
		}
		s.ln.SetDeadline(time.Unix(1, 0))
		for _, w := range s.workers {
			w.wakeUp()
		}
	}()
	go func() {
		wg.Wait()
		for _, w := range s.workers {
			w.close()
		}
		tlsCtx.Close()
		closed()
	}()
	return nil
}

// full says whether the queue the sessions feed has no room: accept
// waits meanwhile.
func (s *listener) full() bool { return len(s.out) == cap(s.out) }

// accept takes connections off the listener and deals them to the
// workers in turn. While the flow is behind (the pipeline's queue is full)
// it accepts none, and new clients wait in the listen queue, as
// send_nsca's do.
func (s *listener) accept(ctx context.Context) {
	rc, err := s.ln.SyscallConn()
	if err != nil {
		glog.Errorf("nsca-ng: %v", err)
		return
	}
	next := 0
	for {
		if !frontend.WaitRoom(ctx, s.stop, s.full) {
			s.acceptBacklog(rc, next)
			return
		}
		fd, peer, outcome, err := frontend.AcceptNext(rc)
		switch {
		case outcome == frontend.Accepted:
			next = s.admit(fd, peer, next)
		case outcome == frontend.AcceptAgain:
		case outcome == frontend.AcceptStarved:
			s.log.Warningf("nsca-ng:accept", "nsca-ng: accept: %v; raise the open files limit or lower nsca_ng_max_sessions", err)
			time.Sleep(frontend.StarvedPause)
		case outcome == frontend.AcceptEnded && errors.Is(err, os.ErrDeadlineExceeded):
			s.acceptBacklog(rc, next)
			return
		default:
			glog.Errorf("nsca-ng: accept: %v", err)
			return
		}
	}
}

// acceptBacklog serves, once stopped, what is in the backlog already.
func (s *listener) acceptBacklog(rc syscall.RawConn, next int) {
	rc.Control(func(lfd uintptr) {
		for {
			fd, peer, aerr := rawsys.Accept4(int(lfd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			switch aerr {
			case nil:
				next = s.admit(fd, peer, next)
			case syscall.EINTR, syscall.ECONNABORTED:
			default:
				return
			}
		}
	})
}

// admit refuses a new connection or deals it to worker next, and returns
// the worker after it.
func (s *listener) admit(fd int, peer netip.AddrPort, next int) int {
	if why := s.refuse(peer); why != "" {
		s.stats.Refused.Add(1)
		s.log.Warningf(peer.Addr().String(), "nsca-ng: refused connection from %s: %s", peer, why)
		unix.Close(fd)
		return next
	}
	s.sessions.Add(1)
	s.workers[next%len(s.workers)].post(event{fd: fd, peer: peer})
	return next + 1
}

func (s *listener) refuse(peer netip.AddrPort) string {
	if len(s.cfg.Allowed) > 0 && !frontend.Allowed(s.cfg.Allowed, peer.Addr()) {
		return "not in allowed_hosts"
	}
	if s.sessions.Load() >= int64(s.cfg.MaxSessions) {
		return fmt.Sprintf("nsca_ng_max_sessions=%d reached", s.cfg.MaxSessions)
	}
	// Past half of nsca_ng_max_sessions an address with its share of
	// handshakes gets no more: below that, clients behind one address (a
	// NAT, a proxy) may all start at once, and none is locked out.
	if !s.handshakes.Take(peer.Addr(), s.sessions.Load() >= int64(s.cfg.MaxSessions/2)) {
		return fmt.Sprintf("max_handshakes_per_source=%d reached with over half of nsca_ng_max_sessions=%d open: it has that many connections in their TLS handshake",
			s.handshakes.Max(), s.cfg.MaxSessions)
	}
	return ""
}

// left counts a session gone, and its handshake slot free when it left
// before its handshake was done.
func (s *listener) left(peer netip.AddrPort, handshaking bool) {
	if handshaking {
		s.handshakes.Release(peer.Addr())
	}
	// Once a burst of sessions is gone, what OpenSSL freed stays in
	// glibc's arenas and the Go heap keeps its pages until a forced GC:
	// both are handed back then (openssl.Trim says when it is worth it).
	if s.sessions.Add(-1) == 0 && openssl.Trim() {
		debug.FreeOSMemory()
	}
}
