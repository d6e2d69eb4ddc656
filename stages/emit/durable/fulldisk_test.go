package durable

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"nsca_fast/stages/emit/internal/emittest"

	"nsca_fast/stages/emit/sink"
)

// TestDurableAdoptFullDisk: the queue of a removed worker slot, on a full
// file system and with an ack file that holds nothing yet (its first write
// needs space), is taken over: every result reaches the engine once,
// although the old queue cannot write its position until its segment is
// gone.
func TestDurableAdoptFullDisk(t *testing.T) {
	old := filepath.Join(emittest.SmallFS(t, "size=256k"), "order-1")
	e := &orderEngine{t: t, got: map[string][]int{}}
	e.down.Store(true)
	want := map[string]int{}
	d, err := New(e, Config{Dir: old})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		svc := fmt.Sprintf("s%d", i%3)
		want[svc]++
		if n, err := d.Write([]sink.Item{item(1, "h", svc, 0, fmt.Sprintf("seq %d", want[svc]))}); n != 1 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	ack := filepath.Join(old, "ack")
	if err := os.Remove(ack); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ack, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(filepath.Dir(old), "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 4096); ; {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	e.down.Store(false)
	d, err = New(e, Config{Dir: filepath.Join(t.TempDir(), "order-0"),
		LeftBehind: func() ([]string, error) { return []string{old}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	delivered := func() (n int) {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, got := range e.got {
			n += len(got)
		}
		return n
	}
	if !waitUntil(10*time.Second, func() bool { return delivered() >= 600 }) {
		t.Fatalf("%d of the 600 results delivered", delivered())
	}
	time.Sleep(3 * reopenEvery) // time for a second take-over, if any
	e.checkInOrder(want)
}
