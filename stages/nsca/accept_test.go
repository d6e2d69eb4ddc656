package nsca

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/stage"
)

// Every connection gets an IV of its own, also across a refill of the
// buffer they come from.
func TestIVsDiffer(t *testing.T) {
	seen := map[[codec.IVSize]byte]bool{}
	for range 3*ivsPerRefill + 5 {
		var iv [codec.IVSize]byte
		nextIV(&iv)
		if seen[iv] || iv == [codec.IVSize]byte{} {
			t.Fatalf("IV repeated or zero after %d IVs", len(seen))
		}
		seen[iv] = true
	}
}

// An accept stage waiting at a closed gate stops when accepting stops
// (its input closed, the start of a drain) or the pipeline is torn down,
// without waiting for the budget to come back.
func TestAcceptWaitingForTheFlowStops(t *testing.T) {
	for _, how := range []string{"drain", "teardown"} {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatal(err)
		}
		if err := unix.Listen(fd, 16); err != nil {
			t.Fatal(err)
		}
		f := newFlow(1, 1, nil)
		f.recheck = time.Hour
		f.take(&clientConn{}, int(f.limit.Load()))
		ctx, cancel := context.WithCancel(context.Background())
		in, out := make(chan int), make(chan *clientConn, 1)
		env := stage.Env{Stats: counters.NewStats(), Log: counters.NewRateLog(time.Second, 5)}
		if err := startAccept(ctx, in, out, acceptConfig{Listeners: []int{fd}, flow: f}, env); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for f.waiters.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if f.waiters.Load() == 0 {
			t.Fatalf("%s: accept does not wait at the gate", how)
		}
		if how == "teardown" {
			// The wait ends with the context; the stage then ends once
			// nothing more comes in.
			cancel()
			for f.waiters.Load() != 0 && time.Now().Before(deadline.Add(5*time.Second)) {
				time.Sleep(time.Millisecond)
			}
			if f.waiters.Load() != 0 {
				t.Fatal("teardown: accept still waits at the gate 5 s after the context was cancelled")
			}
		}
		close(in)
		select {
		case _, open := <-out:
			if open {
				t.Fatalf("%s: accept passed on a connection while the gate was closed", how)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: accept still runs 5 s after it was stopped", how)
		}
		cancel()
	}
}
