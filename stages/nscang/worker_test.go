package nscang

import (
	"testing"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/rawsys"
)

// TestWorkerPostWakesOnlyParked checks that an event posted while the
// worker runs waits in its inbox without an eventfd write (it drains the
// inbox before it parks), and that one posted while it is parked writes
// the eventfd once, however many follow, and none once it runs again.
func TestWorkerPostWakesOnlyParked(t *testing.T) {
	w, err := newWorker(&listener{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	signaled := func() bool {
		var b [8]byte
		n, _ := rawsys.Read(w.wake, b[:])
		return n == 8
	}
	w.post(event{ack: true})
	if signaled() {
		t.Error("a post to a running worker wrote the eventfd")
	}
	if w.park() {
		t.Error("the worker parked with an event in its inbox")
	}
	w.inbox = nil // as drainInbox takes them
	if !w.park() {
		t.Fatal("the worker did not park with an empty inbox")
	}
	w.post(event{ack: true})
	w.post(event{ack: true})
	if !signaled() {
		t.Error("a post to a parked worker did not write the eventfd")
	}
	if signaled() {
		t.Error("a second post to a parked worker wrote the eventfd again")
	}
	w.unpark()
	w.post(event{ack: true})
	if signaled() {
		t.Error("a post after unpark wrote the eventfd")
	}
	var b [8]byte
	if _, err := rawsys.Read(w.wake, b[:]); err != unix.EAGAIN {
		t.Errorf("eventfd read: %v, want EAGAIN", err)
	}
}
