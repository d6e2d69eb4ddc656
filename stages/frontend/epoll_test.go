package frontend

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The reader parks in Go's poller: an event that comes while it waits must
// wake it, and with none it must come back after its timeout.
func TestEpollSetWaitsInThePoller(t *testing.T) {
	e, err := NewEpollSet()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	efd, _ := unix.Eventfd(0, unix.EFD_NONBLOCK)
	defer unix.Close(efd)
	if err := e.Add(efd); err != nil {
		t.Fatal(err)
	}
	events := make([]unix.EpollEvent, 8)
	start := time.Now()
	if n, err := e.Wait(events, 50*time.Millisecond); n != 0 || err != nil {
		t.Fatalf("wait with nothing ready: %d, %v", n, err)
	}
	if waited := time.Since(start); waited < 40*time.Millisecond {
		t.Fatalf("wait came back after %v, before its 50 ms timeout", waited)
	}
	for round := range 3 {
		go func() {
			time.Sleep(20 * time.Millisecond)
			unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		}()
		n, err := e.Wait(events, 10*time.Second)
		if n != 1 || err != nil || events[0].Fd != int32(efd) {
			t.Fatalf("round %d: wait: %d, %v", round, n, err)
		}
		var b [8]byte
		unix.Read(efd, b[:])
	}
	if err := e.Remove(efd); err != nil {
		t.Fatal(err)
	}
}
