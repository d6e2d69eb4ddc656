package nsca

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/frontend"
	"nsca_fast/stages/rawsys"
	"nsca_fast/stages/stage"
)

// errAccept wraps failures to take over a listening socket.
var errAccept = errors.New("nsca: accept")

// acceptConfig are the accept stage's settings.
type acceptConfig struct {
	// Listeners are the listening sockets, owned by the stage.
	Listeners []int
	// admission are the rules new connections are let in by, shared with
	// the read stage, which lets in clients behind a PROXY header. Nil:
	// every client is let in.
	admission *admission

	// flow, when set, is the read stage's flow control: no connection is
	// accepted while it is behind, and new clients wait in the kernel's
	// listen queue, as with stock.
	flow *flow
	// handOff, when set, gives a new connection to the read stage directly
	// (readIntake.register) rather than through out; false means the read
	// stage took it not.
	handOff func(*clientConn) bool
}

// acceptor is the accept stage: it takes connections off the listening
// sockets, sends each its init packet and hands it to the read stage.
type acceptor struct {
	cfg      acceptConfig
	stats    *counters.Stats
	log      *counters.RateLog
	nextID   atomic.Uint64
	stopOnce sync.Once
	stopping atomic.Bool
	done     chan struct{} // closed by stop
	// files are the listening sockets registered with Go's network
	// poller: accept waits there at no cost of its own, and stop wakes it
	// with a deadline.
	files []*os.File
}

// dupListeners duplicates the caller's listening sockets for an accept
// stage, which owns and closes the duplicates: the caller's sockets stay
// open for a successor (a reload), and the clients waiting in their
// backlog are not reset.
func dupListeners(listeners []int) ([]int, error) {
	var dups []int
	for _, fd := range listeners {
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err == nil {
			if err = unix.SetNonblock(dup, true); err != nil {
				unix.Close(dup)
			}
		}
		if err != nil {
			for _, d := range dups {
				unix.Close(d)
			}
			return nil, fmt.Errorf("%w: listening socket %d: %w", errAccept, fd, err)
		}
		dups = append(dups, dup)
	}
	return dups, nil
}

// startAccept runs one accept goroutine per socket of cfg.Listeners (which
// it owns: see dupListeners), and one that adopts the connections sent on
// in (inetd's). Closing in stops accepting: that is how a drain starts. out
// is closed once every goroutine has returned.
func startAccept(ctx context.Context, in <-chan int, out chan<- *clientConn, cfg acceptConfig, env stage.Env) error {
	if cfg.admission == nil {
		cfg.admission = &admission{stats: env.Stats, log: env.Log}
	}
	a := &acceptor{cfg: cfg, stats: env.Stats, log: env.Log, done: make(chan struct{})}
	for _, fd := range cfg.Listeners {
		a.files = append(a.files, os.NewFile(uintptr(fd), "listener"))
	}
	var wg sync.WaitGroup
	for _, f := range a.files {
		stage.Go(ctx, &wg, "accept", func(ctx context.Context) { a.loop(ctx, f, out) })
	}
	stage.Go(ctx, &wg, "accept", func(ctx context.Context) {
		for fd := range in {
			a.adopt(ctx, fd, out)
		}
		a.stop()
	})
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			a.stop()
		case <-finished:
		}
	}()
	go func() {
		wg.Wait()
		close(finished)
		for _, f := range a.files {
			f.Close()
		}
		close(out)
	}()
	return nil
}

// stop makes the accept goroutines return; the sockets' backlog stays for
// whoever else listens on them.
func (a *acceptor) stop() {
	a.stopOnce.Do(func() {
		a.stopping.Store(true)
		close(a.done)
		for _, f := range a.files {
			f.SetReadDeadline(time.Unix(1, 0))
		}
	})
}

// loop accepts until stop. The socket may be shared with other processes
// (workers, a reload's successor), so it is never shut down to wake us; the
// poller's deadline does that.
func (a *acceptor) loop(ctx context.Context, f *os.File, out chan<- *clientConn) {
	rc, err := f.SyscallConn()
	if err != nil {
		glog.Errorf("accept: %v", err)
		return
	}
	for !a.stopping.Load() {
		if a.cfg.flow != nil && !a.cfg.flow.waitRoom(ctx, a.done) {
			return
		}
		fd, peer, outcome, err := frontend.AcceptNext(rc)
		switch outcome {
		case frontend.Accepted:
			if !a.admit(ctx, fd, peer, out) {
				return
			}
		case frontend.AcceptAgain:
		case frontend.AcceptStarved:
			a.log.Warningf("accept", "accept: %v; raise the open files limit or lower max_connections", err)
			time.Sleep(frontend.StarvedPause)
		case frontend.AcceptFailed:
			glog.Errorf("accept: %v", err)
			return
		default: // the deadline stop set, the file closed, or a reload retired the socket
			return
		}
	}
}

// adopt serves a connection that was accepted elsewhere: inetd's stdin.
func (a *acceptor) adopt(ctx context.Context, fd int, out chan<- *clientConn) bool {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return false
	}
	peer, _ := rawsys.Getpeername(fd) // none for a unix socket
	return a.admit(ctx, fd, peer, out)
}

// admit lets a new connection in (see admission.admit) and passes it on.
// It returns false only when the pipeline is torn down.
func (a *acceptor) admit(ctx context.Context, fd int, peer netip.AddrPort, out chan<- *clientConn) bool {
	c := &clientConn{connIdentity: connIdentity{Peer: peer}, read: connRead{fd: fd, awaitingHeader: a.cfg.admission.proxy}}
	if a.cfg.admission.admit(c) != "" {
		unix.Close(fd)
		return true
	}
	c.ID = a.nextID.Add(1)
	a.stats.Open.Add(1)
	if a.cfg.handOff != nil && a.cfg.handOff(c) {
		return true
	}
	if !stage.Send(ctx, out, c) {
		unix.Close(fd)
		a.stats.Open.Add(-1)
		return false
	}
	return true
}
