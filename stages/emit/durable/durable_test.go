package durable

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"nsca_fast/stages/emit/internal/emittest"

	"nsca_fast/stages/emit/sink"
)

// orderEngine records what it takes, in order per service, and takes
// nothing while down; it fails the test if it is written concurrently.
type orderEngine struct {
	t    *testing.T
	mu   sync.Mutex
	down atomic.Bool
	got  map[string][]int
	busy atomic.Int32
}

func (e *orderEngine) Name() string { return "order" }
func (e *orderEngine) Close() error { return nil }
func (e *orderEngine) Write(items []sink.Item) (int, error) {
	if e.busy.Add(1) != 1 {
		e.t.Error("the engine is written by two goroutines at once")
	}
	defer e.busy.Add(-1)
	if e.down.Load() {
		time.Sleep(time.Millisecond)
		return 0, errEngineDown
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, it := range items {
		seq, _ := strconv.Atoi(strings.TrimPrefix(it.Result.Output, "seq "))
		e.got[it.Result.Service] = append(e.got[it.Result.Service], seq)
	}
	return len(items), nil
}

// checkInOrder fails the test unless the engine got, for each service of
// want, its seqs 1..want[svc] once each, in order.
func (e *orderEngine) checkInOrder(want map[string]int) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for svc, n := range want {
		got := e.got[svc]
		if len(got) != n {
			e.t.Errorf("%s: %d results delivered, want %d", svc, len(got), n)
		}
		for i, s := range got {
			if s != i+1 {
				e.t.Errorf("%s: result %d is seq %d: %v", svc, i, s, got[max(i-3, 0):min(i+4, len(got))])
				break
			}
		}
	}
}

// TestDurableOrder: results written while the engine goes down and up
// again all reach it, in order per service, across a restart of the queue
// in the middle of the outage.
func TestDurableOrder(t *testing.T) {
	e := &orderEngine{t: t, got: map[string][]int{}}
	dir := t.TempDir()
	d, err := New(e, Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	seq := map[string]int{}
	write := func(rounds int) {
		for range rounds {
			batch := make([]sink.Item, 0, 8)
			for i := range 8 {
				svc := fmt.Sprintf("s%d", i%3)
				seq[svc]++
				batch = append(batch, item(1, "h", svc, 0, fmt.Sprintf("seq %d", seq[svc])))
			}
			if n, err := d.Write(batch); n != len(batch) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	write(200)
	e.down.Store(true)
	write(300)
	d.Close()
	if d, err = New(e, Config{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	write(100)
	e.down.Store(false)
	write(300)
	if !waitUntil(10*time.Second, func() bool { return d.Stats().Results == 0 }) {
		t.Fatalf("%d results still queued", d.Stats().Results)
	}
	e.checkInOrder(seq)
	if st := d.Stats(); st.Replayed == 0 {
		t.Errorf("nothing counted as replayed: %+v", st)
	}
}

func waitUntil(timeout time.Duration, cond func() bool) bool {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

var item = emittest.Item
