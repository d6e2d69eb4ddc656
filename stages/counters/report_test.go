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
		reportEvery(func() Snapshot { return Snapshot{Connections: conns.Load()} }, 10*time.Millisecond, time.Second, stop, func(line string) {
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
	go func() { reportEvery(nil, 0, time.Second, nil, nil); close(returned) }()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Error("an interval of 0 did not return")
	}
}

// due writes the statistics line at once for a noteworthy change (but at
// most once per noteworthyGap for those), otherwise only once the last line
// is stats_interval old, and never while nothing changes: under steady
// traffic, one line per interval instead of one per check.
func TestDue(t *testing.T) {
	base := Snapshot{Connections: 10, Received: 10, Dropped: map[string]uint64{}, SinkErrors: map[string]uint64{}}
	traffic := base
	traffic.Connections, traffic.Received = 20, 20
	with := func(f func(s *Snapshot)) Snapshot {
		s := traffic
		s.Dropped, s.SinkErrors, s.FellBack = map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
		f(&s)
		return s
	}
	dropped := with(func(s *Snapshot) { s.Dropped[DropBadCRC] = 1 })
	refused := with(func(s *Snapshot) { s.Refused = 1 })
	sinkErr := with(func(s *Snapshot) { s.SinkErrors["command_file"] = 1 })
	fellBack := with(func(s *Snapshot) { s.FellBack["icinga2"] = 3 })
	const interval = 300 * time.Second
	long := 24 * time.Hour
	for _, c := range []struct {
		name                       string
		now                        Snapshot
		sinceLine, sinceNoteworthy time.Duration
		write, note                bool
	}{
		{"idle, long after", base, long, long, false, false},
		{"steady traffic, 5 s after", traffic, 5 * time.Second, long, false, false},
		{"steady traffic, 299 s after", traffic, 299 * time.Second, long, false, false},
		{"steady traffic, an interval after", traffic, interval, long, true, false},
		{"a drop, 5 s after", dropped, 5 * time.Second, long, true, true},
		{"a refusal", refused, 5 * time.Second, long, true, true},
		{"a sink error", sinkErr, 5 * time.Second, long, true, true},
		{"a fallback", fellBack, 5 * time.Second, long, true, true},
		{"a drop, 30 s after the last noteworthy line", dropped, 5 * time.Second, 30 * time.Second, false, false},
		{"a drop, a minute after the last noteworthy line", dropped, 5 * time.Second, time.Minute, true, true},
		{"a drop, an interval after the last line", dropped, interval, 30 * time.Second, true, false},
	} {
		write, note := due(base, c.now, c.sinceLine, c.sinceNoteworthy, interval)
		if write != c.write || note != c.note {
			t.Errorf("%s: due = %v, %v; want %v, %v", c.name, write, note, c.write, c.note)
		}
	}
}
