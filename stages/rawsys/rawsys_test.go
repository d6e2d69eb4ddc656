package rawsys

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestReadWriteCloseOnASocketPair(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	if n, err := Write(fds[0], []byte("hello")); n != 5 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	buf := make([]byte, 16)
	if n, err := Read(fds[1], buf); n != 5 || err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read: %d %q, %v", n, buf[:max(n, 0)], err)
	}
	if n, err := Read(fds[1], buf); n != -1 || err != unix.EAGAIN {
		t.Fatalf("read of an empty socket: %d, %v; want -1, EAGAIN", n, err)
	}
	if err := Close(fds[0]); err != nil {
		t.Fatal(err)
	}
	if n, err := Read(fds[1], buf); n != 0 || err != nil {
		t.Fatalf("read after the peer closed: %d, %v; want 0, nil", n, err)
	}
	if err := Close(fds[0]); err != unix.EBADF {
		t.Fatalf("second close: %v, want EBADF", err)
	}
}

func TestAccept4ReportsThePeer(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		ln, err := net.Listen(network, map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network])
		if err != nil {
			t.Logf("%s: %v", network, err)
			continue
		}
		f, _ := ln.(*net.TCPListener).File()
		lfd := int(f.Fd())
		unix.SetNonblock(lfd, true)
		if _, _, err := Accept4(lfd, unix.SOCK_NONBLOCK); err != unix.EAGAIN {
			t.Fatalf("%s: accept with nobody waiting: %v, want EAGAIN", network, err)
		}
		c, err := net.Dial(network, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		var fd int
		var peer netip.AddrPort
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			if fd, peer, err = Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC); err != unix.EAGAIN || time.Now().After(end) {
				break
			}
		}
		if err != nil {
			t.Fatalf("%s: accept: %v", network, err)
		}
		if want := c.LocalAddr().(*net.TCPAddr).AddrPort(); peer != want {
			t.Errorf("%s: peer %v, want %v", network, peer, want)
		}
		if got, err := Getpeername(fd); err != nil || got != peer {
			t.Errorf("%s: getpeername %v, %v; want %v", network, got, err, peer)
		}
		Close(fd)
		c.Close()
		f.Close()
		ln.Close()
	}
}

func TestEpollPollAndCtl(t *testing.T) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	efd, _ := unix.Eventfd(0, unix.EFD_NONBLOCK)
	defer unix.Close(efd)
	if err := EpollCtl(ep, unix.EPOLL_CTL_ADD, efd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(efd)}); err != nil {
		t.Fatal(err)
	}
	events := make([]unix.EpollEvent, 4)
	if n, err := EpollPoll(ep, events); n != 0 || err != nil {
		t.Fatalf("poll with nothing ready: %d, %v", n, err)
	}
	Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	if n, err := EpollPoll(ep, events); n != 1 || err != nil || events[0].Fd != int32(efd) {
		t.Fatalf("poll with the eventfd ready: %d, %v, %+v", n, err, events[0])
	}
	if err := EpollCtl(ep, unix.EPOLL_CTL_DEL, efd, nil); err != nil {
		t.Fatal(err)
	}
	if n, _ := EpollPoll(ep, events); n != 0 {
		t.Fatalf("poll after removal: %d events", n)
	}
}

func TestFstatSeesARemovedFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	var st, want unix.Stat_t
	unix.Stat(p, &want)
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := Fstat(fd, &st); err != nil || st.Ino != want.Ino || st.Nlink != 1 || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Fatalf("fstat: %v, %+v", err, st)
	}
	os.Remove(p)
	if err := Fstat(fd, &st); err != nil || st.Nlink != 0 {
		t.Fatalf("fstat of a removed FIFO: %v, %d links, want 0", err, st.Nlink)
	}
	if err := Fstat(-1, &st); err != unix.EBADF {
		t.Fatalf("fstat(-1): %v, want EBADF", err)
	}
}
