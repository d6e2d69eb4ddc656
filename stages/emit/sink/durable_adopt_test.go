package sink

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"nsca_fast/conf"
	"nsca_fast/stages/emit/queue"
)

func TestLeftBehindBy(t *testing.T) {
	for _, tc := range []struct {
		dir           string
		slot, workers int
		want          bool
	}{
		{"gearman-0", -1, 0, true},
		{"gearman-7", -1, 0, true},
		{"gearman", -1, 0, false}, // the single process's own
		{"gearman", 0, 2, true},
		{"gearman", 1, 2, false},
		{"gearman-0", 0, 2, false}, // a running slot's own
		{"gearman-1", 0, 2, false},
		{"gearman-2", 0, 2, true},
		{"gearman-3", 0, 2, false},
		{"gearman-3", 1, 2, true},
		{"gearman-4", 0, 2, true},
		{"gearman-2", 0, 1, true},
		{"gearman-02", 0, 1, false}, // not a name this daemon makes
		{"gearman-x", -1, 0, false},
		{"gearman-", -1, 0, false},
		{"gearman2-1", -1, 0, false},
		{"icinga2-1", -1, 0, false},
	} {
		if got := leftBehindBy(tc.dir, "gearman", tc.slot, tc.workers); got != tc.want {
			t.Errorf("leftBehindBy(%q, slot %d of %d) = %v, want %v", tc.dir, tc.slot, tc.workers, got, tc.want)
		}
	}
}

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
		d, err := NewDurable(e, DurableConfig{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 600 {
			svc := fmt.Sprintf("slot%d-s%d", slot, i%3)
			want[svc]++
			if n, err := d.Write([]Item{item(1, "h", svc, 0, fmt.Sprintf("seq %d", want[svc]))}); n != 1 || err != nil {
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

	d, err := NewDurable(e, DurableConfig{Dir: filepath.Join(root, "order-0"),
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

func TestLeftBehindDirs(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"gearman", "gearman-0", "gearman-1", "gearman-2", "gearman-3", "icinga2-2"} {
		if err := os.Mkdir(filepath.Join(root, name), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "gearman-5"), nil, 0o600); err != nil { // not a directory
		t.Fatal(err)
	}
	defer func(slot int) { WorkerSlot = slot }(WorkerSlot)
	cfg := &conf.Config{QueueDirectory: root, Workers: 2}
	WorkerSlot = 0
	got, err := leftBehindDirs(cfg, "gearman")
	if want := []string{filepath.Join(root, "gearman"), filepath.Join(root, "gearman-2")}; err != nil || !slices.Equal(got, want) {
		t.Errorf("slot 0 of 2 takes %q, %v; want %q", got, err, want)
	}
	cfg.QueueDirectory = filepath.Join(root, "missing")
	if got, err := leftBehindDirs(cfg, "gearman"); err != nil || len(got) != 0 {
		t.Errorf("no queue_directory yet: %q, %v; want nothing", got, err)
	}
}
