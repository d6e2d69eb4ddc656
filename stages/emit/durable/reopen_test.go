package durable

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"nsca_fast/stages/emit/sink"
)

// TestDurableOpensHeldQueueUnprompted: a queue held at start (the previous
// pipeline draining after a reload) is opened once it is free and what it
// holds is delivered, though no result comes to Write meanwhile.
func TestDurableOpensHeldQueueUnprompted(t *testing.T) {
	dir := t.TempDir()
	e := &orderEngine{t: t, got: map[string][]int{}}
	e.down.Store(true)
	prev, err := New(e, Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if n, err := prev.Write([]sink.Item{item(1, "h", "s", 0, fmt.Sprintf("seq %d", i+1))}); n != 1 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	next, err := New(e, Config{Dir: dir})
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

// TestDurableUnusableQueueAtStart: a queue directory that cannot be used at
// start (here a path through a regular file) does not fail New: what
// the engine does not take is returned for the fallback, as when the queue
// fails while running, and the queue opens by itself once it can.
func TestDurableUnusableQueueAtStart(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e := &orderEngine{t: t, got: map[string][]int{}}
	e.down.Store(true)
	d, err := New(e, Config{Dir: filepath.Join(blocker, "queue")})
	if err != nil {
		t.Fatalf("New with an unusable directory: %v", err)
	}
	defer d.Close()
	if n, err := d.Write([]sink.Item{item(1, "h", "s", 0, "seq 1")}); n != 0 || err == nil {
		t.Errorf("Write with the engine down and no queue = %d, %v; want 0 and the engine's error, for the fallback", n, err)
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(10*time.Second, func() bool { return d.queue() != nil }) {
		t.Fatal("the queue did not open once its directory could be made")
	}
	if n, err := d.Write([]sink.Item{item(1, "h", "s", 0, "seq 2")}); n != 1 || err != nil {
		t.Errorf("Write with the engine down and the queue open = %d, %v; want 1 queued", n, err)
	}
}
