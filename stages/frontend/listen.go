package frontend

import (
	"context"
	"net"
	"net/netip"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ListenReusePort listens on address, with SO_REUSEPORT so that a
// reload's successor and each worker process listen beside it, as a non-blocking
// descriptor in Go's poller, which accepts with accept4 as the accept
// stage does (a net.Listener's raw connection cannot be read). It is done
// when the server is built, so that a reload's new pipeline listens before
// the old one stops.
func ListenReusePort(address, name string) (*os.File, error) {
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
	return os.NewFile(uintptr(dup), name), nil
}

// Allowed says whether ip is in one of nets (allowed_hosts, an
// identity's networks).
func Allowed(nets []netip.Prefix, ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
