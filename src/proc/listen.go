package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

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
