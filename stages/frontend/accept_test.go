package stages

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAcceptNext: a waiting client comes out as accepted, non-blocking, with
// its address; a stop's deadline ends the wait as acceptEnded, saying so.
func TestAcceptNext(t *testing.T) {
	addr, lf := ngTestListener(t) // a listening socket in Go's poller, as the front ends have
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
	fd, peer, outcome, err := acceptNext(rc)
	if outcome != accepted || err != nil {
		t.Fatalf("acceptNext = %v, %v; want accepted", outcome, err)
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
		_, _, outcome, err = acceptNext(rc)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("acceptNext did not end at the deadline")
	}
	if outcome != acceptEnded || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after the deadline acceptNext = %v, %v; want acceptEnded, deadline exceeded", outcome, err)
	}
}
