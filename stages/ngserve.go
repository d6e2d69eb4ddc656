package stages

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/cgo/openssl"
	"nsca_fast/conf/identities"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/sink"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/nscang"
	"nsca_fast/stages/rawsys"
	"nsca_fast/stages/stage"
)

// Errors of the nsca-ng listener.
var (
	errNG            = errors.New("stages: nsca-ng listener")
	errNoCommandFile = errors.New("stages: no command_file for commands other than check results")
)

// dropNGBadCommand counts pushed commands that do not parse (a check
// result with a field missing, a bad timestamp). Everything a client
// pushed is counted as received; what validation refuses (names, rights)
// is counted there, under its reason, as a send_nsca client's is.
const dropNGBadCommand = "nsca_ng_bad_command"

// ngIdentities are the identities nsca-ng clients authenticate as.
type ngIdentities interface {
	// Keys are the pre-shared keys, "*" for every identity without one.
	Keys() []openssl.Key
	// Lookup is the identity named name, or the fallback "*", or nil.
	Lookup(name string) *identities.Identity
}

// ngConfig are the nsca-ng listener's settings.
type ngConfig struct {
	// Listen is the address:port, and Listener the socket ngListen made
	// there, which startNG then owns.
	Listen   string
	Listener *os.File
	// Threads is the fixed number of goroutines running the sessions.
	Threads     int
	MaxSessions int
	// HandshakeTimeout bounds the TLS handshake, Timeout idleness after it.
	HandshakeTimeout, Timeout time.Duration
	MaxCommandSize            int
	Ciphers                   string
	Identities                ngIdentities
	// Allowed, when not empty, lists the networks that may connect at all
	// (allowed_hosts); an identity's networks narrow it further.
	Allowed []netip.Prefix
	// Commands takes the commands that are not check results; nil: they
	// are refused.
	Commands *sink.CommandFile
	// Grace is how long open sessions may go on after Stop.
	Grace time.Duration
	Debug bool

	// flow is the listener's flow control: the bytes of the commands its
	// sessions handed on and have no outcome for yet, and the gate of its
	// accept, closed while the queue it feeds (out) is full. Nil: startNG
	// makes its own.
	flow *flow
}

// ngServer is the nsca-ng listener: one accept goroutine, cfg.Threads
// session goroutines each with an epoll set, and one goroutine writing the
// commands that are not check results. Sessions hand check results to the
// validate stage and answer OKAY when it reports them queued for emit.
type ngServer struct {
	cfg      ngConfig
	ctx      *openssl.Context
	ln       *os.File
	out      chan<- intake.Submission
	stats    *counters.Stats
	log      *counters.RateLog
	workers  []*ngWorker
	sessions atomic.Int64
	nextID   atomic.Uint64
	commands chan ngCommand
	stop     chan struct{}
	flow     *flow
	// acceptDone is set once no connection will be dealt to a worker.
	acceptDone atomic.Bool
}

// ngCommand is a command for the command file and the session waiting
// for its outcome.
type ngCommand struct {
	line []byte
	s    *ngSession
}

// startNG serves nsca-ng clients on cfg.Listener (from ngListen, which it
// owns from then on, even when it fails), sending their check results on
// out. It stops accepting when stop is closed, gives open sessions
// cfg.Grace, and calls closed once nothing more will be sent.
func startNG(ctx context.Context, stop chan struct{}, out chan<- intake.Submission, closed func(), cfg ngConfig, env stage.Env) error {
	ln := cfg.Listener
	if err := openssl.Available(); err != nil {
		ln.Close()
		return fmt.Errorf("%w: %w", errNG, err)
	}
	if cfg.Identities == nil {
		ln.Close()
		return fmt.Errorf("%w: no identities: nsca_ng_listen needs identities_file", errNG)
	}
	tlsCtx, err := openssl.NewContext(cfg.Identities.Keys(), cfg.Ciphers)
	if err != nil {
		ln.Close()
		return fmt.Errorf("%w: %w", errNG, err)
	}
	if cfg.flow == nil {
		cfg.flow = newFlow(1, 1, func() bool { return len(out) == cap(out) })
	}
	s := &ngServer{cfg: cfg, ctx: tlsCtx, ln: ln, out: out, stats: env.Stats, log: env.Log,
		commands: make(chan ngCommand, 64), stop: stop, flow: cfg.flow}
	for i := 0; i < max(cfg.Threads, 1); i++ {
		w, err := newNGWorker(s)
		if err != nil {
			for _, w := range s.workers {
				w.close()
			}
			s.ln.Close()
			tlsCtx.Close()
			return fmt.Errorf("%w: %w", errNG, err)
		}
		s.workers = append(s.workers, w)
	}
	glog.Infof("nsca-ng: listening on %s (%d identities, %d session goroutines)", cfg.Listen, len(cfg.Identities.Keys()), len(s.workers))
	var wg, cmds sync.WaitGroup
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
	stage.Go(ctx, &cmds, "nsca-ng:commands", func(ctx context.Context) { s.writeCommands() })
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
		close(s.commands)
		cmds.Wait()
		for _, w := range s.workers {
			w.close()
		}
		tlsCtx.Close()
		closed()
	}()
	return nil
}

// ngListen listens on address, with SO_REUSEPORT so that a reload's
// successor and each worker process listen beside it, as a non-blocking
// descriptor in Go's poller, which accepts with accept4 as the accept
// stage does (a net.Listener's raw connection cannot be read). It is done
// when the server is built, so that a reload's new pipeline listens before
// the old one stops.
func ngListen(address string) (*os.File, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
		return serr
	}}
	l, err := lc.Listen(context.Background(), "tcp", address)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	rc, err := l.(*net.TCPListener).SyscallConn()
	if err != nil {
		return nil, err
	}
	dup := -1
	rc.Control(func(fd uintptr) { dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) })
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return nil, err
	}
	return os.NewFile(uintptr(dup), "nsca-ng listener"), nil
}

// accept takes connections off the listener and deals them to the
// workers in turn. While the flow is behind (the pipeline's queue is full)
// it accepts none, and new clients wait in the listen queue, as
// send_nsca's do.
func (s *ngServer) accept(ctx context.Context) {
	rc, err := s.ln.SyscallConn()
	if err != nil {
		glog.Errorf("nsca-ng: %v", err)
		return
	}
	next := 0
	for {
		if !s.flow.waitRoom(ctx, s.stop) {
			s.acceptBacklog(rc, next)
			return
		}
		fd, peer, outcome, err := acceptNext(rc)
		switch {
		case outcome == accepted:
			next = s.admit(fd, peer, next)
		case outcome == acceptAgain:
		case outcome == acceptStarved:
			s.log.Warningf("nsca-ng:accept", "nsca-ng: accept: %v; raise the open files limit or lower nsca_ng_max_sessions", err)
			time.Sleep(starvedPause)
		case outcome == acceptEnded && errors.Is(err, os.ErrDeadlineExceeded):
			s.acceptBacklog(rc, next)
			return
		default:
			glog.Errorf("nsca-ng: accept: %v", err)
			return
		}
	}
}

// acceptBacklog serves, once stopped, what is in the backlog already.
func (s *ngServer) acceptBacklog(rc syscall.RawConn, next int) {
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
func (s *ngServer) admit(fd int, peer netip.AddrPort, next int) int {
	if why := s.refuse(peer); why != "" {
		s.stats.Refused.Add(1)
		s.log.Warningf(peer.Addr().String(), "nsca-ng: refused connection from %s: %s", peer, why)
		unix.Close(fd)
		return next
	}
	s.sessions.Add(1)
	s.workers[next%len(s.workers)].post(ngEvent{fd: fd, peer: peer})
	return next + 1
}

func (s *ngServer) refuse(peer netip.AddrPort) string {
	if len(s.cfg.Allowed) > 0 && !allowed(s.cfg.Allowed, peer.Addr()) {
		return "not in allowed_hosts"
	}
	if s.sessions.Load() >= int64(s.cfg.MaxSessions) {
		return fmt.Sprintf("nsca_ng_max_sessions=%d reached", s.cfg.MaxSessions)
	}
	return ""
}

// writeCommands is the command file's writer for commands that are not
// check results; a session waits for each one's outcome.
func (s *ngServer) writeCommands() {
	for c := range s.commands {
		var err error
		if err = s.cfg.Commands.WriteCommand(c.line); err != nil {
			s.log.Warningf("nsca-ng:command_file", "nsca-ng: command from %s not written: %v", c.s.who(), err)
		}
		c.s.w.post(ngEvent{s: c.s, ack: true, err: err})
	}
}

// ngEvent is what other goroutines tell a worker: a new connection (fd,
// peer), or the outcome of a session's command (s, ack, err and the
// reason it was refused under), or that a command passed validation and
// is to be written (command).
type ngEvent struct {
	fd      int
	peer    netip.AddrPort
	s       *ngSession
	ack     bool
	err     error
	reason  string
	command string
	time    int64
}

// ngWorker runs its share of the sessions off one epoll set. An eventfd in
// the set wakes it for events posted from other goroutines.
type ngWorker struct {
	srv      *ngServer
	ctx      context.Context
	ep       *epollSet
	wake     int
	mu       sync.Mutex
	inbox    []ngEvent
	spare    []ngEvent
	sessions map[int]*ngSession
	buf      []byte
	stopping bool
	stopAt   time.Time
	inflight int  // sessions waiting for an outcome
	closed   bool // under mu: the eventfd is closed, events are dropped
}

func newNGWorker(s *ngServer) (*ngWorker, error) {
	ep, err := newEpollSet()
	if err != nil {
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		ep.close()
		return nil, err
	}
	if err := ep.add(wake); err != nil {
		unix.Close(wake)
		ep.close()
		return nil, err
	}
	return &ngWorker{srv: s, ep: ep, wake: wake, sessions: map[int]*ngSession{}, buf: make([]byte, 16<<10)}, nil
}

// close releases the worker; an outcome posted later (after a teardown)
// is dropped, and its connection is closed already.
func (w *ngWorker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.ep.close()
	unix.Close(w.wake)
	for _, e := range w.inbox {
		if !e.ack {
			unix.Close(e.fd)
		}
	}
	w.inbox = nil
}

// post hands the worker an event and wakes it; it never blocks.
func (w *ngWorker) post(e ngEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		if !e.ack {
			unix.Close(e.fd)
			w.srv.sessions.Add(-1)
		}
		return
	}
	w.inbox = append(w.inbox, e)
	if len(w.inbox) == 1 {
		w.signal()
	}
}

func (w *ngWorker) inboxEmpty() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.inbox) == 0
}

// wakeUp makes the worker look at its inbox and the stop signal.
func (w *ngWorker) wakeUp() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.signal()
	}
}

// signal writes the eventfd; w.mu is held, so it is open.
func (w *ngWorker) signal() {
	one := [8]byte{1}
	rawsys.Write(w.wake, one[:])
}

// sweepEvery is how often the worker looks for sessions past a timeout.
const sweepEvery = time.Second

func (w *ngWorker) loop(ctx context.Context) {
	events := make([]unix.EpollEvent, 128)
	lastSweep := time.Now()
	for {
		n, err := w.ep.wait(events, sweepEvery)
		if err != nil {
			glog.Errorf("nsca-ng: %v", err)
			return
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == w.wake {
				var b [8]byte
				rawsys.Read(w.wake, b[:])
				continue
			}
			if s := w.sessions[fd]; s != nil {
				s.drained = false
				s.drive()
			}
		}
		w.drainInbox()
		if ctx.Err() != nil {
			w.closeAll()
			return
		}
		now := time.Now()
		if !w.stopping && w.srvStopped() {
			w.stopping, w.stopAt = true, now.Add(w.srv.cfg.Grace)
		}
		if now.Sub(lastSweep) >= sweepEvery || w.stopping {
			lastSweep = now
			w.sweep(now)
		}
		if w.stopping && len(w.sessions) == 0 && w.inflight == 0 && w.srv.acceptDone.Load() && w.inboxEmpty() {
			return
		}
	}
}

func (w *ngWorker) srvStopped() bool {
	select {
	case <-w.srv.stop:
		return true
	default:
		return false
	}
}

func (w *ngWorker) drainInbox() {
	w.mu.Lock()
	evs := w.inbox
	w.inbox = w.spare[:0]
	w.mu.Unlock()
	for _, e := range evs {
		switch {
		case e.ack && e.command != "":
			e.s.writeCommand(e.command, e.time)
		case e.ack:
			e.s.outcome(e.err, e.reason)
		default:
			w.start(e.fd, e.peer)
		}
	}
	w.spare = evs[:0]
}

// start begins a session on a new connection.
func (w *ngWorker) start(fd int, peer netip.AddrPort) {
	srv := w.srv
	tls, err := srv.ctx.NewSession(fd)
	if err == nil {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(fd)}
		if err = rawsys.EpollCtl(w.ep.fd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			tls.Free()
		}
	}
	if err != nil {
		srv.log.Warningf(peer.Addr().String(), "nsca-ng: closing connection from %s: %v", peer, err)
		unix.Close(fd)
		srv.sessions.Add(-1)
		return
	}
	now := time.Now()
	s := &ngSession{w: w, fd: fd, peer: peer, tls: tls, deadline: now.Add(srv.cfg.HandshakeTimeout), lastActive: now}
	w.sessions[fd] = s
	s.drive()
}

// sweep ends the sessions past their handshake or idle timeout, and at a
// stop those past the grace.
func (w *ngWorker) sweep(now time.Time) {
	for _, s := range w.sessions {
		switch {
		case s.state == ngHandshake && now.After(s.deadline):
			w.srv.stats.Incomplete.Add(1)
			w.srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: closing connection from %s: no TLS handshake within %v", s.peer, w.srv.cfg.HandshakeTimeout)
			s.end()
		case s.state == ngWait:
			// The pipeline has its result: its outcome comes.
		case s.state == ngDraining:
			if now.After(s.deadline) {
				s.end()
			}
		case w.stopping && now.After(w.stopAt):
			s.bail("Server shutting down")
		case s.state != ngClosing && now.Sub(s.lastActive) > w.srv.cfg.Timeout:
			w.srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: %s idle for %v: bailing out", s.who(), w.srv.cfg.Timeout)
			s.bail(strings.TrimPrefix(nscang.BailTimeout, "BAIL "))
		case s.state == ngClosing && now.Sub(s.lastActive) > w.srv.cfg.Timeout:
			s.end()
		}
	}
}

func (w *ngWorker) closeAll() {
	for _, s := range w.sessions {
		s.end()
	}
}

// ngState is where a session is in the protocol.
type ngState int

const (
	ngHandshake ngState = iota
	ngFirst             // expecting MOIN, PING or BAIL
	ngReady             // expecting PUSH, NOOP, QUIT or BAIL
	ngPush              // reading a pushed command
	ngWait              // a command is with the pipeline or the command file
	ngClosing           // writing the last reply, then close_notify
	ngDraining          // close_notify sent: reading to the client's end
)

// drainFor bounds how long a closed session waits for the client's end.
// Closing a socket with unread input resets the connection, and the reset
// can take the client's last reply (OKAY to QUIT, a BAIL) with it.
const drainFor = 2 * time.Second

// ngSession is one nsca-ng connection; only its worker touches it.
type ngSession struct {
	w          *ngWorker
	fd         int
	peer       netip.AddrPort
	tls        *openssl.Session
	state      ngState
	name, sid  string
	identity   *identities.Identity
	conn       *clientConn // the flow's account of the session
	src        intake.Source
	in, out    []byte
	want       int
	deadline   time.Time
	lastActive time.Time
	writing    bool // EPOLLOUT is polled for
	// drained: the last read found the socket empty, and no event came
	// since. Reading again would only cost a system call: with
	// edge-triggered polling, new input brings an event.
	drained bool
	ended   bool
	// handedOn is the size of the command waiting for its outcome, which
	// the flow counts.
	handedOn int
}

// who names the session in messages as nsca-ng does: identity@address.
// The identity and the session id are the client's choice: escaped.
func (s *ngSession) who() string {
	if s.name == "" {
		return s.peer.String()
	}
	if s.sid != "" {
		return intake.Printable(s.name) + "@" + s.peer.String() + " (ID: " + intake.Printable(s.sid) + ")"
	}
	return intake.Printable(s.name) + "@" + s.peer.String()
}

// drive moves the session as far as the socket and the pipeline let it.
func (s *ngSession) drive() {
	for !s.ended {
		if len(s.out) > 0 {
			n, want, err := s.tls.Write(s.out)
			if err != nil {
				s.fail(err)
				return
			}
			s.out = s.out[n:]
			if want != openssl.Done {
				s.pollWrite(want == openssl.WantWrite)
				return
			}
			continue
		}
		s.pollWrite(false)
		switch s.state {
		case ngClosing:
			s.tls.Shutdown()
			unix.Shutdown(s.fd, unix.SHUT_WR)
			s.state, s.deadline = ngDraining, time.Now().Add(drainFor)
			continue
		case ngDraining:
			s.drain()
			return
		case ngHandshake:
			want, err := s.tls.Handshake()
			if err != nil {
				s.handshakeFailed(err)
				return
			}
			if want != openssl.Done {
				s.pollWrite(want == openssl.WantWrite)
				return
			}
			if !s.established() {
				return
			}
			continue
		case ngWait:
			return
		}
		if s.process() {
			continue
		}
		if s.drained {
			return
		}
		room := nscang.MaxLine - len(s.in)
		if s.state == ngPush {
			room = s.want - len(s.in)
		}
		buf := s.w.buf[:min(len(s.w.buf), max(room, 1))]
		n, want, err := s.tls.Read(buf)
		if err != nil {
			s.fail(err)
			return
		}
		if n > 0 {
			s.in = append(s.in, buf[:n]...)
			s.lastActive = time.Now()
			continue
		}
		s.drained = want == openssl.WantRead
		s.pollWrite(want == openssl.WantWrite)
		return
	}
}

// drain reads and discards what the client still sends after the session
// ended, and closes once it has closed its side.
func (s *ngSession) drain() {
	for {
		n, err := rawsys.Read(s.fd, s.w.buf)
		switch {
		case n > 0:
			continue
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		}
		s.end()
		return
	}
}

// pollWrite polls the socket for room too while a write waits for it.
func (s *ngSession) pollWrite(on bool) {
	if on == s.writing {
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(s.fd)}
	if on {
		ev.Events |= unix.EPOLLOUT
	}
	rawsys.EpollCtl(s.w.ep.fd, unix.EPOLL_CTL_MOD, s.fd, &ev)
	s.writing = on
}

// established checks the identity the handshake authenticated.
func (s *ngSession) established() bool {
	srv := s.w.srv
	info := s.tls.Info()
	s.name = info.Identity
	s.identity = srv.cfg.Identities.Lookup(info.Identity)
	if s.identity == nil || s.identity.Specificity(s.peer.Addr()) < 0 {
		srv.stats.Refused.Add(1)
		srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: refused %s: identity %q may not connect from %s", s.who(), info.Identity, s.peer.Addr())
		s.tls.Shutdown()
		s.end()
		return false
	}
	srv.stats.Connections.Add(1)
	id := intake.IDBase(1) + srv.nextID.Add(1)
	s.conn = &clientConn{connIdentity: connIdentity{ID: id, Peer: s.peer}, read: connRead{fd: -1}}
	s.src = intake.Source{ID: id, Front: intake.FrontNSCAN, Peer: s.peer, Identity: s.identity, Who: s.who(), Outcomes: s}
	s.state = ngFirst
	s.lastActive = time.Now()
	if srv.cfg.Debug {
		glog.Infof("nsca-ng: TLS handshake with %s successful (%s, %s)", s.who(), info.Version, info.Cipher)
	}
	return true
}

func (s *ngSession) handshakeFailed(err error) {
	srv := s.w.srv
	if errors.Is(err, openssl.ErrEOF) {
		// Closed before the handshake was done: a scanner, a probe, a
		// client that gave up. No key was refused.
		srv.stats.Incomplete.Add(1)
		srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: %s closed the connection during the TLS handshake", s.peer)
		s.end()
		return
	}
	srv.stats.Refused.Add(1)
	// A key was found for a known identity, so it did not fit.
	name := ""
	if info := s.tls.Info(); info.Identity != "" && info.Known {
		name = fmt.Sprintf(" (identity %q, wrong password?)", info.Identity)
	} else if info.Identity != "" {
		name = fmt.Sprintf(" (identity %q, unknown)", info.Identity)
	}
	srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: TLS handshake with %s%s failed: %v", s.peer, name, err)
	s.end()
}

// fail ends a session whose TLS connection broke or was closed.
func (s *ngSession) fail(err error) {
	if errors.Is(err, openssl.ErrClosed) {
		// Its close_notify is answered with ours, as the client waits for it.
		s.tls.Shutdown()
	}
	if !errors.Is(err, openssl.ErrClosed) {
		s.w.srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: %s: %v", s.who(), err)
	} else if s.state != ngFirst && s.state != ngReady {
		s.w.srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: %s closed the TLS connection in the middle of a request", s.who())
	}
	s.end()
}

// end closes the connection and forgets the session.
func (s *ngSession) end() {
	if s.ended {
		return
	}
	s.ended = true
	w := s.w
	w.ep.remove(s.fd)
	s.tls.Free()
	unix.Close(s.fd)
	delete(w.sessions, s.fd)
	w.srv.sessions.Add(-1)
}

func (s *ngSession) reply(line string) {
	s.out = append(append(s.out, line...), '\r', '\n')
}

// bail sends BAIL with why and closes the session.
func (s *ngSession) bail(why string) {
	s.reply("BAIL " + why)
	s.state = ngClosing
	s.drive()
}

// process handles one request or pushed command from what was read, and
// reports whether it found a whole one.
func (s *ngSession) process() bool {
	if s.state == ngPush {
		if len(s.in) < s.want {
			return false
		}
		data := s.in[:s.want]
		s.in = append(s.in[:0], s.in[s.want:]...)
		s.push(data)
		return true
	}
	i := bytes.IndexByte(s.in, '\n')
	if i < 0 || i+1 > nscang.MaxLine {
		if len(s.in) >= nscang.MaxLine {
			s.w.srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: %s sent a request line longer than %d bytes", s.who(), nscang.MaxLine)
			s.bail(strings.TrimPrefix(nscang.BailLineTooLong, "BAIL "))
			return true
		}
		return false
	}
	line := strings.TrimSuffix(string(s.in[:i]), "\r")
	s.in = append(s.in[:0], s.in[i+1:]...)
	s.request(nscang.ParseRequest(line))
	return true
}

func (s *ngSession) request(r nscang.Request) {
	switch {
	case r.Verb == nscang.Quit:
		s.reply(nscang.ReplyOkay)
		s.state = ngClosing
	case r.Verb == nscang.Bail:
		s.w.srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: %s said: %s", s.who(), r.Line)
		s.state = ngClosing
	case s.state == ngFirst && r.Verb == nscang.Moin:
		if ok, fail := nscang.MoinOK(r); !ok {
			s.reply(fail)
			return
		}
		s.sid = r.Args[1]
		s.src.Who = s.who()
		s.reply(nscang.ReplyMoin)
		s.state = ngReady
	case s.state == ngFirst && r.Verb == nscang.Ping:
		s.reply(nscang.ReplyPong)
		s.state = ngClosing
	case s.state == ngFirst:
		s.reply(nscang.FailFirst)
	case r.Verb == nscang.Noop:
		s.reply(nscang.ReplyOkay)
	case r.Verb == nscang.Push:
		n, fail := nscang.PushSize(r, s.w.srv.cfg.MaxCommandSize)
		if fail != "" {
			s.reply(fail)
			return
		}
		s.reply(nscang.ReplyOkay)
		s.state, s.want = ngPush, n
	default:
		s.reply(nscang.FailSession)
	}
}

// push takes a pushed command to validation, which checks its names and
// rights as for every front end; the session waits for the outcome before
// it answers and reads on. A command other than a check result that
// validation passed is then written by the command writer.
func (s *ngSession) push(data []byte) {
	srv := s.w.srv
	s.state = ngReady
	srv.stats.Received.Add(1)
	cmd, err := nscang.ParseCommand(data)
	if err != nil {
		srv.stats.Dropped(dropNGBadCommand).Add(1)
		srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: refusing data from %s: %v: %q", s.who(), err, data)
		s.reply("FAIL " + strings.TrimPrefix(err.Error(), "nscang: "))
		return
	}
	sub := intake.Submission{Source: &s.src, Kind: intake.KindCommand, Command: cmd.Text, Time: cmd.Time}
	if !cmd.HasTime {
		sub.Time = time.Now().Unix()
	}
	if cmd.Result != nil {
		sub.Kind, sub.Result = intake.KindResult, *cmd.Result
	}
	s.handOn(len(data), func() bool { return stage.Send(s.w.ctx, srv.out, sub) })
}

// Taken is validation's word that a pushed result is on the emit stage's
// queue, or that a command passed: the worker then has it written.
func (s *ngSession) Taken(sub *intake.Submission) {
	e := ngEvent{s: s, ack: true}
	if sub.Kind == intake.KindCommand {
		e.command, e.time = sub.Command, sub.Time
	}
	s.w.post(e)
}

// Refused is validation's refusal of what the session pushed.
func (s *ngSession) Refused(_ *intake.Submission, r intake.Refusal) {
	s.w.post(ngEvent{s: s, ack: true, err: r.Err, reason: r.Reason})
}

// writeCommand has a validated command written to the command file; the
// session goes on waiting for that outcome.
func (s *ngSession) writeCommand(text string, time int64) {
	srv := s.w.srv
	if srv.cfg.Commands == nil {
		srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: refusing data from %s: no command_file for commands other than check results: %s", s.who(), text)
		s.outcome(errNoCommandFile, "")
		return
	}
	line := fmt.Appendf(nil, "[%d] %s\n", time, text)
	// A writer that is behind makes this wait, as a full pipeline
	// makes every stage wait.
	if !stage.Send(s.w.ctx, srv.commands, ngCommand{line: line, s: s}) {
		s.outcome(intake.ErrShutdown, "")
	}
}

// handOn hands a pushed command of n bytes on with hand, which blocks
// while the queue is full and reports whether the command was taken, and
// has the session wait for its outcome. The flow counts the command until
// then: one at a time per session, which reads nothing meanwhile.
func (s *ngSession) handOn(n int, hand func() bool) {
	flow := s.w.srv.flow
	flow.take(s.conn, n)
	if !hand() {
		flow.giveBack(s.conn, n)
		return
	}
	s.state, s.handedOn = ngWait, n
	s.w.inflight++
}

// outcome answers the command the session waited for: OKAY, or FAIL
// with why (nsca-ng's own words for a refused right).
func (s *ngSession) outcome(err error, reason string) {
	s.w.srv.flow.giveBack(s.conn, s.handedOn)
	s.handedOn = 0
	s.w.inflight--
	if s.ended {
		return
	}
	s.state = ngReady
	s.lastActive = time.Now()
	switch {
	case err == nil:
		s.reply(nscang.ReplyOkay)
	case errors.Is(err, errNoCommandFile):
		s.reply("FAIL No command_file for commands other than check results")
	case reason == counters.DropUnauthorized:
		s.reply(nscang.FailUnauthorized)
	default:
		s.reply("FAIL " + failText(err))
	}
	s.drive()
}

// failText is an error as a FAIL line says it: without package prefixes,
// on one line.
func failText(err error) string {
	msg := err.Error()
	for _, p := range []string{"validate: ", "intake: ", "stages: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, msg)
}
