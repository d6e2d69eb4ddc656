package nscang

import (
	"context"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/stages/frontend"
	"nsca_fast/stages/rawsys"
)

// event is what other goroutines tell a worker: a new connection (fd,
// peer), or the outcome of a session's command (s, ack, err and the
// reason it was refused under).
type event struct {
	fd     int
	peer   netip.AddrPort
	s      *session
	ack    bool
	err    error
	reason string
}

// worker runs its share of the sessions off one epoll set. An eventfd in
// the set wakes it for events posted from other goroutines while it waits
// there; while it runs, it finds them in its inbox without one.
type worker struct {
	srv      *listener
	ctx      context.Context
	ep       *frontend.EpollSet
	wake     int
	mu       sync.Mutex
	inbox    []event
	spare    []event
	sessions map[int]*session
	buf      []byte
	stopping bool
	stopAt   time.Time
	inflight int  // sessions waiting for an outcome
	closed   bool // under mu: the eventfd is closed, events are dropped
	// parked (under mu): the worker waits in its poller, or is about to,
	// and a post must wake it; woken: one did already.
	parked, woken bool
}

func newWorker(s *listener) (*worker, error) {
	ep, err := frontend.NewEpollSet()
	if err != nil {
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		ep.Close()
		return nil, err
	}
	if err := ep.Add(wake); err != nil {
		unix.Close(wake)
		ep.Close()
		return nil, err
	}
	return &worker{srv: s, ep: ep, wake: wake, sessions: map[int]*session{}, buf: make([]byte, 16<<10)}, nil
}

// close releases the worker; an outcome posted later (after a teardown)
// is dropped, and its connection is closed already.
func (w *worker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.ep.Close()
	unix.Close(w.wake)
	for _, e := range w.inbox {
		if !e.ack {
			unix.Close(e.fd)
		}
	}
	w.inbox = nil
}

// post hands the worker an event and wakes it; it never blocks.
func (w *worker) post(e event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		if !e.ack {
			unix.Close(e.fd)
			w.srv.left(e.peer, true)
		}
		return
	}
	w.inbox = append(w.inbox, e)
	if w.parked && !w.woken {
		w.woken = true
		w.signal()
	}
}

// park tells posters that the worker is about to wait in its poller, so
// that they wake it; it reports false, and does not park, when events
// wait in the inbox already.
func (w *worker) park() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.inbox) > 0 {
		return false
	}
	w.parked = true
	return true
}

// unpark tells posters that the worker runs, and will drain the inbox
// before it parks again.
func (w *worker) unpark() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.parked, w.woken = false, false
}

func (w *worker) inboxEmpty() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.inbox) == 0
}

// wakeUp makes the worker look at its inbox and the stop signal.
func (w *worker) wakeUp() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.signal()
	}
}

// signal writes the eventfd; w.mu is held, so it is open.
func (w *worker) signal() {
	one := [8]byte{1}
	rawsys.Write(w.wake, one[:])
}

// sweepEvery is how often the worker looks for sessions past a timeout.
const sweepEvery = time.Second

func (w *worker) loop(ctx context.Context) {
	events := make([]unix.EpollEvent, 128)
	lastSweep := time.Now()
	for {
		timeout := sweepEvery
		if !w.park() {
			timeout = 0
		}
		n, err := w.ep.Wait(events, timeout)
		w.unpark()
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
		if w.inflight > 0 {
			// With one P (GOMAXPROCS at low load), the validate and emit
			// stages run on this thread once it yields: their outcomes
			// are then in the inbox when it resumes, without an eventfd
			// write and read and a wake-up through the poller for each.
			runtime.Gosched()
			w.drainInbox()
		}
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

func (w *worker) srvStopped() bool {
	select {
	case <-w.srv.stop:
		return true
	default:
		return false
	}
}

func (w *worker) drainInbox() {
	w.mu.Lock()
	evs := w.inbox
	w.inbox = w.spare[:0]
	w.mu.Unlock()
	for _, e := range evs {
		switch {
		case e.ack:
			e.s.outcome(e.err, e.reason)
		default:
			w.start(e.fd, e.peer)
		}
	}
	w.spare = evs[:0]
}

// start begins a session on a new connection.
func (w *worker) start(fd int, peer netip.AddrPort) {
	srv := w.srv
	tls, err := srv.ctx.NewSession(fd)
	if err == nil {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(fd)}
		if err = rawsys.EpollCtl(w.ep.FD(), unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			tls.Free()
		}
	}
	if err != nil {
		srv.log.Warningf(peer.Addr().String(), "nsca-ng: closing connection from %s: %v", peer, err)
		unix.Close(fd)
		srv.left(peer, true)
		return
	}
	now := time.Now()
	s := &session{w: w, fd: fd, peer: peer, tls: tls, deadline: now.Add(srv.cfg.HandshakeTimeout), lastActive: now}
	w.sessions[fd] = s
	s.drive()
}

// sweep ends the sessions past their handshake or idle timeout, and at a
// stop those past the grace.
func (w *worker) sweep(now time.Time) {
	for _, s := range w.sessions {
		switch {
		case s.state == stateHandshake && now.After(s.deadline):
			w.srv.stats.Incomplete.Add(1)
			w.srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: closing connection from %s: no TLS handshake within %v", s.peer, w.srv.cfg.HandshakeTimeout)
			s.end()
		case s.state == stateWait:
			// The pipeline has its result: its outcome comes.
		case s.state == stateDraining:
			if now.After(s.deadline) {
				s.end()
			}
		case w.stopping && now.After(w.stopAt):
			w.stopSession(s, now)
		case s.state != stateClosing && now.Sub(s.lastActive) > w.srv.cfg.Timeout:
			w.srv.log.Warningf(s.peer.Addr().String(), "nsca-ng: %s idle for %v: bailing out", s.who(), w.srv.cfg.Timeout)
			s.bail(strings.TrimPrefix(BailTimeout, "BAIL "))
		case s.state == stateClosing && now.Sub(s.lastActive) > w.srv.cfg.Timeout:
			s.end()
		}
	}
}

// stopSession ends s once a stop's grace is over: a session still in its
// handshake has no one to tell and is closed, one whose BAIL or last
// reply is not through within drainFor is closed too, and any other is
// told BAIL. Otherwise a client that says nothing would hold a stop up
// until its handshake or idle timeout.
func (w *worker) stopSession(s *session, now time.Time) {
	switch {
	case s.state == stateHandshake:
		s.end()
	case s.state == stateClosing:
		if now.After(w.stopAt.Add(drainFor)) {
			s.end()
		}
	default:
		s.bail("Server shutting down")
	}
}

func (w *worker) closeAll() {
	for _, s := range w.sessions {
		s.end()
	}
}
