package stages

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/stages/packet"
)

// ErrListen wraps failures to create the listening socket.
var ErrListen = errors.New("stages: listen")

// Listen opens a non-blocking TCP listening socket on address:port with
// SO_REUSEADDR and, when reusePort is set, SO_REUSEPORT, so that several
// worker processes can each own a listener on the same port. An empty
// address listens on all IPv6 and IPv4 addresses. The caller owns the socket:
// servers come and go on it (a reload) without closing it, so no client is
// refused while they change over.
func Listen(address string, port int, reusePort bool) (int, error) {
	ip := netip.IPv6Unspecified()
	if address != "" {
		addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", address)
		if err != nil || len(addrs) == 0 {
			return -1, fmt.Errorf("%w: server_address %q: %v", ErrListen, address, err)
		}
		ip = addrs[0].Unmap()
	}
	family := unix.AF_INET6
	var sa unix.Sockaddr
	if ip.Is4() {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: port, Addr: ip.As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: port, Addr: ip.As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return -1, fmt.Errorf("%w: socket: %w", ErrListen, err)
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("%w: %s %s: %w", ErrListen, what, net.JoinHostPort(ip.String(), strconv.Itoa(port)), err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("SO_REUSEADDR", err)
	}
	if reusePort {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return fail("SO_REUSEPORT", err)
		}
	}
	if family == unix.AF_INET6 && address == "" {
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	if err := unix.Listen(fd, 4096); err != nil {
		return fail("listen", err)
	}
	return fd, nil
}

// AcceptConfig are the accept stage's settings.
type AcceptConfig struct {
	// MaxConnections caps open connections; the ones over it are closed at once.
	MaxConnections int
	// Allowed, when not empty, lists the client networks that may connect.
	Allowed []netip.Prefix
}

// Acceptor is the accept stage: it takes connections off the listening
// sockets, sends each its init packet and hands it to the read stage.
type Acceptor struct {
	cfg       AcceptConfig
	listeners []int
	stats     *Stats
	log       *rateLog
	nextID    atomic.Uint64
	stopOnce  sync.Once
	stopping  atomic.Bool
	wakeMu    sync.Mutex // guards wakefd against Stop after the stage ended
	wakefd    int
}

// NewAcceptor returns an accept stage over already listening sockets.
func NewAcceptor(listeners []int, cfg AcceptConfig, stats *Stats, log *rateLog) (*Acceptor, error) {
	wakefd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: eventfd: %w", ErrListen, err)
	}
	for _, fd := range listeners {
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(wakefd)
			return nil, fmt.Errorf("%w: listening socket %d: %w", ErrListen, fd, err)
		}
	}
	return &Acceptor{cfg: cfg, listeners: listeners, stats: stats, log: log, wakefd: wakefd}, nil
}

// Stop makes the accept goroutines return. It leaves the listening sockets
// open: they belong to the caller and may already serve a successor (a
// reload), and connections waiting in their backlog are not reset.
func (a *Acceptor) Stop() {
	a.stopOnce.Do(func() {
		a.stopping.Store(true)
		var one [8]byte
		one[0] = 1
		a.wakeMu.Lock()
		if a.wakefd >= 0 {
			unix.Write(a.wakefd, one[:])
		}
		a.wakeMu.Unlock()
	})
}

// Start runs one accept goroutine per listening socket and closes out when
// all have returned (after Stop, or when ctx is cancelled).
func (a *Acceptor) Start(ctx context.Context, out chan<- *Conn) {
	var wg sync.WaitGroup
	for _, lfd := range a.listeners {
		run(ctx, &wg, "accept", func(ctx context.Context) { a.loop(ctx, lfd, out) })
	}
	finished := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			a.Stop()
		case <-finished:
		}
	}()
	go func() {
		wg.Wait()
		close(finished)
		a.wakeMu.Lock()
		unix.Close(a.wakefd)
		a.wakefd = -1
		a.wakeMu.Unlock()
		close(out)
	}()
}

// loop accepts until Stop. It waits in poll() on the listening socket and
// the stop eventfd rather than in a blocking accept(), because the socket
// may be shared with other processes (workers, a reload's successor) and
// must not be shut down to wake us.
func (a *Acceptor) loop(ctx context.Context, lfd int, out chan<- *Conn) {
	fds := []unix.PollFd{{Fd: int32(lfd), Events: unix.POLLIN}, {Fd: int32(a.wakefd), Events: unix.POLLIN}}
	for !a.stopping.Load() {
		fd, sa, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch err {
		case nil:
			if !a.admit(ctx, fd, sockaddrAddrPort(sa), out) {
				return
			}
		case unix.EAGAIN:
			if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
				glog.Errorf("accept: poll: %v", err)
				return
			}
		case unix.EINTR, unix.ECONNABORTED:
		case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
			a.log.Warningf("accept", "accept: %v; raise the open files limit or lower max_connections", err)
			time.Sleep(10 * time.Millisecond)
		default:
			glog.Errorf("accept: %v", err)
			return
		}
	}
}

// Adopt serves a connection that was accepted elsewhere: inetd's stdin.
func (a *Acceptor) Adopt(ctx context.Context, fd int, out chan<- *Conn) bool {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return false
	}
	var peer netip.AddrPort
	if sa, err := unix.Getpeername(fd); err == nil {
		peer = sockaddrAddrPort(sa)
	}
	return a.admit(ctx, fd, peer, out)
}

// admit applies the access rules to a new connection, sends its init packet
// and passes it on. It returns false only when the pipeline is torn down.
func (a *Acceptor) admit(ctx context.Context, fd int, peer netip.AddrPort, out chan<- *Conn) bool {
	if reason := a.refuse(peer); reason != "" {
		a.stats.Refused.Add(1)
		a.log.Warningf(peer.Addr().String(), "refused connection from %s: %s", peer, reason)
		unix.Close(fd)
		return true
	}
	c := &Conn{ID: a.nextID.Add(1), Peer: peer, fd: fd, InitTime: uint32(time.Now().Unix())}
	rand.Read(c.IV[:])
	var init [packet.InitSize]byte
	packet.InitPacket(init[:], c.IV[:], c.InitTime)
	if n, err := unix.Write(fd, init[:]); n != len(init) {
		a.log.Warningf(peer.Addr().String(), "closing connection from %s: sending the init packet: wrote %d of %d bytes: %v", peer, n, len(init), err)
		unix.Close(fd)
		return true
	}
	a.stats.Connections.Add(1)
	a.stats.Open.Add(1)
	if !send(ctx, out, c) {
		unix.Close(fd)
		a.stats.Open.Add(-1)
		return false
	}
	return true
}

// refuse says why a new connection is not served, or "" to serve it.
func (a *Acceptor) refuse(peer netip.AddrPort) string {
	if len(a.cfg.Allowed) > 0 && !allowed(a.cfg.Allowed, peer.Addr()) {
		return "not in allowed_hosts"
	}
	if a.cfg.MaxConnections > 0 && a.stats.Open.Load() >= int64(a.cfg.MaxConnections) {
		return fmt.Sprintf("max_connections=%d reached", a.cfg.MaxConnections)
	}
	return ""
}

func allowed(nets []netip.Prefix, ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

func sockaddrAddrPort(sa unix.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port))
	}
	return netip.AddrPort{}
}
