package frontend

import (
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/rawsys"
)

// AcceptOutcome is what one AcceptNext came to; the front end that called
// it (the accept stage, the nsca-ng listener) decides what each means for it.
type AcceptOutcome int

const (
	// Accepted: fd is a new non-blocking connection from peer.
	Accepted AcceptOutcome = iota
	// AcceptAgain: interrupted, or the client left before it was taken.
	AcceptAgain
	// AcceptStarved: out of descriptors or memory; the caller warns, waits
	// StarvedPause, and tries again.
	AcceptStarved
	// AcceptEnded: the poller gave up on the socket (the deadline a stop
	// set, or the file is closed); err is the poller's.
	AcceptEnded
	// AcceptRetired: the socket no longer listens (a reload retired it).
	AcceptRetired
	// AcceptFailed: any other error, in err.
	AcceptFailed
)

// StarvedPause is how long a front end waits after AcceptStarved before
// trying again, so that it does not spin while no descriptor is free.
const StarvedPause = 10 * time.Millisecond

// AcceptNext takes the next connection off a listening socket, waiting in
// Go's poller until one is there, with accept4 made raw (no sysmon
// wake-up), and classifies what it came to.
func AcceptNext(rc syscall.RawConn) (fd int, peer netip.AddrPort, outcome AcceptOutcome, err error) {
	a := acceptCalls.Get().(*acceptCall)
	defer acceptCalls.Put(a)
	// Read calls try again whenever it returns false, after the poller
	// says the socket is readable.
	if err := rc.Read(a.try); err != nil {
		return -1, peer, AcceptEnded, err
	}
	fd, peer, aerr := a.fd, a.peer, a.err
	switch aerr {
	case nil:
		return fd, peer, Accepted, nil
	case syscall.EINTR, syscall.ECONNABORTED:
		return -1, peer, AcceptAgain, aerr
	case syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM:
		return -1, peer, AcceptStarved, aerr
	case syscall.EINVAL:
		return -1, peer, AcceptRetired, aerr
	}
	return -1, peer, AcceptFailed, aerr
}

// acceptCall is one AcceptNext's accept4 and what it returned, with try
// bound to it once: a closure over AcceptNext's results escaped to the
// heap, three allocations per connection.
type acceptCall struct {
	fd   int
	peer netip.AddrPort
	err  error
	try  func(lfd uintptr) bool
}

var acceptCalls = sync.Pool{New: func() any {
	a := &acceptCall{}
	a.try = a.accept
	return a
}}

// accept is one accept4 on lfd; it reports whether the wait is over.
func (a *acceptCall) accept(lfd uintptr) bool {
	a.fd, a.peer, a.err = rawsys.Accept4(int(lfd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	return a.err != syscall.EAGAIN
}
