// Package rawsys makes the hot path's system calls raw: every one of them
// is on a non-blocking socket, pipe, epoll instance or eventfd, or is an
// fstat(2), and returns at once, so it need not tell the scheduler it may
// block. A normal call does (entersyscall), and under this daemon's load of
// many short calls that costs more than the calls' own bookkeeping: each
// call wakes a sleeping sysmon, which then polls every 20 µs for a
// millisecond, and one that lasts past sysmon's tick has its P handed to
// another thread, both futex wake-ups and context switches per check.
// Calls that can block (disk files, cgo) stay normal.
package rawsys

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PipeBuf is PIPE_BUF on Linux: a write of at most this many bytes into a
// pipe goes in whole or not at all.
const PipeBuf = 4096

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// Read is read(2) on a non-blocking descriptor.
func Read(fd int, b []byte) (int, error) { return transfer(unix.SYS_READ, fd, b) }

// Write is write(2) on a non-blocking descriptor.
func Write(fd int, b []byte) (int, error) { return transfer(unix.SYS_WRITE, fd, b) }

// transfer is read(2) or write(2) of b.
func transfer(trap uintptr, fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	runtime.KeepAlive(b)
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// Close is close(2) of a socket without SO_LINGER, which does not wait.
func Close(fd int) error {
	_, _, e := unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
	return errnoErr(e)
}

// EpollPoll is epoll_wait(2) with a zero timeout.
func EpollPoll(epfd int, events []unix.EpollEvent) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	runtime.KeepAlive(events)
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// EpollCtl is epoll_ctl(2).
func EpollCtl(epfd, op, fd int, ev *unix.EpollEvent) error {
	_, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	runtime.KeepAlive(ev)
	return errnoErr(e)
}

// Accept4 is accept4(2) on a non-blocking listening socket, with the
// peer's address.
func Accept4(lfd int, flags int) (int, netip.AddrPort, error) {
	var sa unix.RawSockaddrAny
	size := uint32(unsafe.Sizeof(sa))
	fd, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(lfd), uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&size)), uintptr(flags), 0, 0)
	if e != 0 {
		return -1, netip.AddrPort{}, e
	}
	return int(fd), peer(&sa), nil
}

// Getpeername is getpeername(2): the address of the socket's peer, the
// zero AddrPort for other families than IPv4 and IPv6.
func Getpeername(fd int) (netip.AddrPort, error) {
	var sa unix.RawSockaddrAny
	size := uint32(unsafe.Sizeof(sa))
	_, _, e := unix.RawSyscall(unix.SYS_GETPEERNAME, uintptr(fd), uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&size)))
	if e != 0 {
		return netip.AddrPort{}, e
	}
	return peer(&sa), nil
}

// peer decodes an IPv4 or IPv6 socket address; other families (a unix
// socket under inetd) have none.
func peer(sa *unix.RawSockaddrAny) netip.AddrPort {
	switch sa.Addr.Family {
	case unix.AF_INET:
		in := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&in.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(in.Addr), port)
	case unix.AF_INET6:
		in := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&in.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom16(in.Addr).Unmap(), port)
	}
	return netip.AddrPort{}
}

// Flock is flock(2); with LOCK_EX or LOCK_SH it must carry LOCK_NB, since
// waiting for a lock is blocking. Unlocking never waits.
func Flock(fd, how int) error {
	_, _, e := unix.RawSyscall(unix.SYS_FLOCK, uintptr(fd), uintptr(how), 0)
	return errnoErr(e)
}

// Fstat is fstat(2).
func Fstat(fd int, st *unix.Stat_t) error {
	_, _, e := unix.RawSyscall(unix.SYS_FSTAT, uintptr(fd), uintptr(unsafe.Pointer(st)), 0)
	runtime.KeepAlive(st)
	return errnoErr(e)
}
