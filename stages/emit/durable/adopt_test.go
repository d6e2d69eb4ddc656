package durable

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"nsca_fast/stages/emit/sink"

	"nsca_fast/stages/emit/queue"
)

// TestDurableAdoptsLeftBehind: results queued by two worker slots that no
// longer run reach the engine through the queue that takes them over,
// each exactly once and in order; a directory still held is taken once it
// is free; the emptied directories are removed.
func TestDurableAdoptsLeftBehind(t *testing.T) {
	root := t.TempDir()
	e := &orderEngine{t: t, got: map[string][]int{}}
	e.down.Store(true)
	want := map[string]int{}
	fill := func(slot int) string {
		dir := filepath.Join(root, fmt.Sprintf("order-%d", slot))
		d, err := New(e, Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 600 {
			svc := fmt.Sprintf("slot%d-s%d", slot, i%3)
			want[svc]++
			if n, err := d.Write([]sink.Item{item(1, "h", svc, 0, fmt.Sprintf("seq %d", want[svc]))}); n != 1 || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	free, held := fill(1), fill(2)
	hold, err := queue.Open(held, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.down.Store(false)

	d, err := New(e, Config{Dir: filepath.Join(root, "order-0"),
		LeftBehind: func() ([]string, error) { return []string{free, held}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	delivered := func(prefix string) int {
		e.mu.Lock()
		defer e.mu.Unlock()
		n := 0
		for svc, got := range e.got {
			if len(svc) > len(prefix) && svc[:len(prefix)] == prefix {
				n += len(got)
			}
		}
		return n
	}
	if !waitUntil(10*time.Second, func() bool { return delivered("slot1-") == 600 }) {
		t.Fatalf("%d of the free directory's 600 results delivered", delivered("slot1-"))
	}
	if _, err := os.Stat(free); !os.IsNotExist(err) {
		t.Errorf("the emptied directory %s is still there: %v", free, err)
	}
	time.Sleep(2 * reopenEvery)
	if n := delivered("slot2-"); n != 0 {
		t.Errorf("%d results delivered from a directory another queue holds", n)
	}
	if err := hold.Close(); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(10*time.Second, func() bool { return delivered("slot2-") == 600 }) {
		t.Fatalf("%d of the held directory's 600 results delivered once it was free", delivered("slot2-"))
	}
	if !waitUntil(5*time.Second, func() bool { _, err := os.Stat(held); return os.IsNotExist(err) }) {
		t.Errorf("the emptied directory %s is still there", held)
	}
	e.checkInOrder(want)
}
