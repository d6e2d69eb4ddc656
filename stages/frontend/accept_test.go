package frontend

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAcceptNext: a waiting client comes out as accepted, non-blocking, with
// its address; a stop's deadline ends the wait as AcceptEnded, saying so.
func TestAcceptNext(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	lf, err := ListenReusePort(addr, "test") // a listening socket in Go's poller, as the front ends have
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	rc, err := lf.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fd, peer, outcome, err := AcceptNext(rc)
	if outcome != Accepted || err != nil {
		t.Fatalf("AcceptNext = %v, %v; want accepted", outcome, err)
	}
	defer unix.Close(fd)
	if peer.String() != c.LocalAddr().String() {
		t.Errorf("peer %v, want %v", peer, c.LocalAddr())
	}
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); fl&unix.O_NONBLOCK == 0 {
		t.Error("accepted connection is blocking")
	}
	lf.SetReadDeadline(time.Unix(1, 0))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, outcome, err = AcceptNext(rc)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("AcceptNext did not end at the deadline")
	}
	if outcome != AcceptEnded || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after the deadline AcceptNext = %v, %v; want AcceptEnded, deadline exceeded", outcome, err)
	}
}
