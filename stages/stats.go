package stages

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Drop reasons: every check or byte a client delivered that does not reach a
// sink is counted under one of these, so an operator can tell a wrong password
// from a full spool.
const (
	DropBadVersion    = "bad_version"
	DropBadCRC        = "bad_crc"
	DropStale         = "stale"
	DropShort         = "short_packet"
	DropAfterReject   = "after_reject"
	DropTooManyChecks = "too_many_checks"
	DropSpoofed       = "spoofed_host"
	DropSink          = "sink_failed"
	DropShutdown      = "shutdown"
)

// Stats are the daemon's counters. They are updated with atomics from every
// stage, so reading them never stops the pipeline.
type Stats struct {
	// Connections counts accepted connections; Open is how many are open now.
	Connections atomic.Uint64
	Open        atomic.Int64
	// Refused counts connections closed before the init packet (limits, access).
	Refused atomic.Uint64
	// Received counts complete packets framed off connections.
	Received atomic.Uint64
	// Held is how many results a sink holds back right now (the spool at
	// its cap); they are part of what is queued.
	Held atomic.Int64

	mu      sync.Mutex
	emitted map[string]*atomic.Uint64
	dropped map[string]*atomic.Uint64
}

// NewStats returns zeroed counters.
func NewStats() *Stats {
	return &Stats{emitted: map[string]*atomic.Uint64{}, dropped: map[string]*atomic.Uint64{}}
}

func (s *Stats) counter(m map[string]*atomic.Uint64, key string) *atomic.Uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := m[key]
	if !ok {
		c = new(atomic.Uint64)
		m[key] = c
	}
	return c
}

// Emitted returns the counter of results written to the named sink.
func (s *Stats) Emitted(sink string) *atomic.Uint64 { return s.counter(s.emitted, sink) }

// Dropped returns the counter of checks lost for the named reason.
func (s *Stats) Dropped(reason string) *atomic.Uint64 { return s.counter(s.dropped, reason) }

// Snapshot is a consistent-enough copy of the counters for logging and tests.
type Snapshot struct {
	Connections, Refused, Received uint64
	Open, Held                     int64
	Emitted, Dropped               map[string]uint64
}

// Snapshot copies the counters.
func (s *Stats) Snapshot() Snapshot {
	snap := Snapshot{
		Connections: s.Connections.Load(),
		Refused:     s.Refused.Load(),
		Received:    s.Received.Load(),
		Open:        s.Open.Load(),
		Held:        s.Held.Load(),
		Emitted:     map[string]uint64{},
		Dropped:     map[string]uint64{},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.emitted {
		snap.Emitted[k] = v.Load()
	}
	for k, v := range s.dropped {
		snap.Dropped[k] = v.Load()
	}
	return snap
}

// TotalEmitted sums the results written to every sink.
func (s Snapshot) TotalEmitted() uint64 { return sum(s.Emitted) }

// Queued is what was received and is neither emitted nor dropped yet: in
// the pipeline's queues or held by a sink.
func (s Snapshot) Queued() int64 {
	return int64(s.Received) - int64(s.TotalEmitted()) - int64(s.TotalDropped())
}

// TotalDropped sums the checks lost for every reason.
func (s Snapshot) TotalDropped() uint64 { return sum(s.Dropped) }

func sum(m map[string]uint64) (n uint64) {
	for _, v := range m {
		n += v
	}
	return n
}

func formatCounts(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ",")
}

// Line renders the statistics line in the spirit of nsca_fast's, with the
// connection rate over the given interval since prev.
func (s Snapshot) Line(prev Snapshot, seconds float64) string {
	rate := 0.0
	if seconds > 0 {
		rate = float64(s.Connections-prev.Connections) / seconds
	}
	return fmt.Sprintf("%.0f conn/s, connections=%d, open=%d, refused=%d, received=%d, report_success=%d, report_failed=%d, queued=%d (held by sinks %d), emitted{%s}, dropped{%s}",
		rate, s.Connections, s.Open, s.Refused, s.Received, s.TotalEmitted(), s.TotalDropped(), s.Queued(), s.Held,
		formatCounts(s.Emitted), formatCounts(s.Dropped))
}

// Add sums o into s, for the statistics of several worker processes.
func (s *Snapshot) Add(o Snapshot) {
	s.Connections += o.Connections
	s.Refused += o.Refused
	s.Received += o.Received
	s.Open += o.Open
	s.Held += o.Held
	for _, m := range []struct {
		dst *map[string]uint64
		src map[string]uint64
	}{{&s.Emitted, o.Emitted}, {&s.Dropped, o.Dropped}} {
		if *m.dst == nil {
			*m.dst = map[string]uint64{}
		}
		for k, v := range m.src {
			(*m.dst)[k] += v
		}
	}
}
