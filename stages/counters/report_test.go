package counters

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The periodic line is logged when a counter changed since the last one
// logged, and not while nothing changes; it says the rate since the last
// line logged. An interval of 0 logs nothing and returns at once.
func TestReportEverySkipsIdle(t *testing.T) {
	var conns atomic.Uint64
	var mu sync.Mutex
	var lines []string
	logged := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		reportEvery(func() Snapshot { return Snapshot{Connections: conns.Load()} }, 10*time.Millisecond, stop, func(line string) {
			mu.Lock()
			defer mu.Unlock()
			lines = append(lines, line)
		})
	}()
	time.Sleep(100 * time.Millisecond)
	if got := logged(); len(got) != 0 {
		t.Errorf("idle: %q, want nothing", got)
	}
	conns.Store(50)
	deadline := time.Now().Add(5 * time.Second)
	for len(logged()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	<-done
	got := logged()
	if len(got) != 1 || !strings.HasPrefix(got[0], "statistics: ") || !strings.Contains(got[0], " conn/s, connections=50, ") {
		t.Errorf("lines %q, want one statistics line with connections=50", got)
	}
	returned := make(chan struct{})
	go func() { reportEvery(nil, 0, nil, nil); close(returned) }()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Error("an interval of 0 did not return")
	}
}
