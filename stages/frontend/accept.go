package stages

import (
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/rawsys"
)

// acceptOutcome is what one acceptNext came to; the front end that called
// it (the accept stage, the nsca-ng listener) decides what each means for it.
type acceptOutcome int

const (
	// accepted: fd is a new non-blocking connection from peer.
	accepted acceptOutcome = iota
	// acceptAgain: interrupted, or the client left before it was taken.
	acceptAgain
	// acceptStarved: out of descriptors or memory; the caller warns, waits
	// starvedPause, and tries again.
	acceptStarved
	// acceptEnded: the poller gave up on the socket (the deadline a stop
	// set, or the file is closed); err is the poller's.
	acceptEnded
	// acceptRetired: the socket no longer listens (a reload retired it).
	acceptRetired
	// acceptFailed: any other error, in err.
	acceptFailed
)

// starvedPause is how long a front end waits after acceptStarved before
// trying again, so that it does not spin while no descriptor is free.
const starvedPause = 10 * time.Millisecond

// acceptNext takes the next connection off a listening socket, waiting in
// Go's poller until one is there, with accept4 made raw (no sysmon
// wake-up), and classifies what it came to.
func acceptNext(rc syscall.RawConn) (fd int, peer netip.AddrPort, outcome acceptOutcome, err error) {
	var aerr error
	// Read calls the function again whenever it returns false, after the
	// poller says the socket is readable.
	if err := rc.Read(func(lfd uintptr) bool {
		fd, peer, aerr = rawsys.Accept4(int(lfd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		return aerr != syscall.EAGAIN
	}); err != nil {
		return -1, peer, acceptEnded, err
	}
	switch aerr {
	case nil:
		return fd, peer, accepted, nil
	case syscall.EINTR, syscall.ECONNABORTED:
		return -1, peer, acceptAgain, aerr
	case syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM:
		return -1, peer, acceptStarved, aerr
	case syscall.EINVAL:
		return -1, peer, acceptRetired, aerr
	}
	return -1, peer, acceptFailed, aerr
}
