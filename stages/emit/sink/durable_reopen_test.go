package sink

import (
	"fmt"
	"testing"
	"time"
)

// TestDurableOpensHeldQueueUnprompted: a queue held at start (the previous
// pipeline draining after a reload) is opened once it is free and what it
// holds is delivered, though no result comes to Write meanwhile.
func TestDurableOpensHeldQueueUnprompted(t *testing.T) {
	dir := t.TempDir()
	e := &orderEngine{t: t, got: map[string][]int{}}
	e.down.Store(true)
	prev, err := NewDurable(e, DurableConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if n, err := prev.Write([]Item{item(1, "h", "s", 0, fmt.Sprintf("seq %d", i+1))}); n != 1 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	next, err := NewDurable(e, DurableConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := prev.Close(); err != nil {
		t.Fatal(err)
	}
	e.down.Store(false)
	if !waitUntil(10*time.Second, func() bool { e.mu.Lock(); defer e.mu.Unlock(); return len(e.got["s"]) == 50 }) {
		e.mu.Lock()
		defer e.mu.Unlock()
		t.Fatalf("%d of the 50 queued results delivered", len(e.got["s"]))
	}
}
