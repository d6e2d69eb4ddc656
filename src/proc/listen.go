package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// ErrListen wraps failures to create the listening socket.
var ErrListen = errors.New("proc: listen")

// Listen opens a non-blocking TCP listening socket on address:port with
// SO_REUSEADDR and, when reusePort is set, SO_REUSEPORT, so that several
// worker processes can each own a listener on the same port. An empty
// address listens on all IPv6 and IPv4 addresses. The caller owns the socket:
// servers come and go on it (a reload) without closing it, so no client is
// refused while they change over.
func Listen(address string, port int, reusePort bool) (int, error) {
	fd, name, err := bindPort(address, port, reusePort)
	if err != nil {
		return -1, err
	}
	if err := unix.Listen(fd, 4096); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("%w: listen %s: %w", ErrListen, name, err)
	}
	return fd, nil
}

// CheckPortFree fails, as binding a socket of nsca_workers=0 would, when
// anything is bound to address:port: a socket without SO_REUSEPORT cannot
// share the port with any other, while SO_REUSEPORT sockets would silently
// share it with another daemon's, or with the workers still draining of a
// supervisor that was killed.
func CheckPortFree(address string, port int) error {
	fd, _, err := bindPort(address, port, false)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// lockPort serializes CheckPortFree and the binding of this daemon's
// sockets with any other daemon starting on the same port, which could
// otherwise also find the port free before either had bound its
// SO_REUSEPORT sockets. The lock is an abstract unix socket named after the
// port, in the network namespace as the port is: the kernel frees it when
// its holder dies, and it needs no file anywhere. If it cannot be had
// within lockPortWait the start goes on without it. The returned function
// releases it.
func lockPort(port int) (unlock func()) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return func() {}
	}
	sa := &unix.SockaddrUnix{Name: "@nsca_fast/listen/" + strconv.Itoa(port)}
	for deadline := time.Now().Add(lockPortWait); ; time.Sleep(10 * time.Millisecond) {
		if err := unix.Bind(fd, sa); err != unix.EADDRINUSE || time.Now().After(deadline) {
			break
		}
	}
	return func() { unix.Close(fd) }
}

// lockPortWait bounds the wait for another daemon's start on the port: a
// start binds its sockets within milliseconds.
const lockPortWait = 5 * time.Second

// bindPort is a socket bound to address:port, not yet listening, and the
// address's name for errors.
func bindPort(address string, port int, reusePort bool) (int, string, error) {
	ip := netip.IPv6Unspecified()
	if address != "" {
		addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", address)
		if err != nil || len(addrs) == 0 {
			return -1, "", fmt.Errorf("%w: server_address %q: %v", ErrListen, address, err)
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
		return -1, "", fmt.Errorf("%w: socket: %w", ErrListen, err)
	}
	name := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	fail := func(what string, err error) (int, string, error) {
		unix.Close(fd)
		return -1, "", fmt.Errorf("%w: %s %s: %w", ErrListen, what, name, err)
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
	return fd, name, nil
}

// Sockets is the OS side of a supervisor's own listening sockets: SO_REUSEPORT
// sockets on one port, which the kernel keeps in a group in the order they
// started listening and hands each new connection to one of. It is an
// interface so that the supervisor's decisions can be tested without them.
type Sockets interface {
	// Open adds one more listening socket to the group.
	Open() (int, error)
	// Steer has the kernel hand new connections only to the first n
	// sockets of the group, so that one about to close takes no more.
	Steer(fd, n int) error
	// Queued is how many connections wait in fd's accept queue.
	Queued(fd int) int
	// Close stops fd listening, which resets any connection still in its
	// queue and takes it out of the group at once, whoever else holds a
	// descriptor of it, and closes it.
	Close(fd int)
}

// PortSockets are the listening sockets of address:port (see Listen).
type PortSockets struct {
	Address string
	Port    int
}

// Open opens one more SO_REUSEPORT socket on the port.
func (p PortSockets) Open() (int, error) { return Listen(p.Address, p.Port, true) }

// Steer attaches to the group a classic BPF program that picks one of its
// first n sockets at random for each new connection: removing a socket
// from the group moves its last one into its place, so the supervisor
// keeps the sockets it serves first and retires them from the end.
func (p PortSockets) Steer(fd, n int) error {
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: skfAdRandom},
		{Code: unix.BPF_ALU | unix.BPF_MOD | unix.BPF_K, K: uint32(max(n, 1))},
		{Code: unix.BPF_RET | unix.BPF_A},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fprog); err != nil {
		return fmt.Errorf("%w: SO_ATTACH_REUSEPORT_CBPF: %w", ErrListen, err)
	}
	return nil
}

// skfAdRandom is SKF_AD_OFF + SKF_AD_RANDOM: a load from there gives a
// random 32-bit number.
const skfAdRandom = 0xfffff000 + 56

// Queued reads the accept queue's length, which TCP_INFO gives as
// tcpi_unacked for a listening socket.
func (p PortSockets) Queued(fd int) int {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0
	}
	return int(info.Unacked)
}

// Close shuts fd down and closes it.
func (p PortSockets) Close(fd int) {
	unix.Shutdown(fd, unix.SHUT_RD)
	unix.Close(fd)
}
