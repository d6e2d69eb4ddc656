package counters

import (
	"fmt"
	"reflect"
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
	DropUnauthorized  = "unauthorized" // outside the rights of the identity that sent it
	DropBadName       = "bad_name"     // a host or service name no core can hold (';', a control character, empty)
	// DropDestinationDown is what was refused, with FAIL, to a client
	// that waits for an answer while a destination could not take it:
	// the client keeps it and sends it again, so it is no loss.
	DropDestinationDown = "destination_down"
	DropSink            = "sink_failed"
	// DropNoCommandSink is an external command other than a check result
	// that reached a destination none of whose sinks can write commands
	// (a spool, Icinga 2, Gearman).
	DropNoCommandSink = "no_command_sink"
	DropShutdown      = "shutdown"
)

// DropReasons lists every drop reason, so that the metrics show each one
// at zero from the start.
var DropReasons = []string{DropBadVersion, DropBadCRC, DropStale, DropShort, DropAfterReject, DropTooManyChecks, DropSpoofed, DropSink, DropShutdown, DropUnauthorized, DropBadName, DropDestinationDown, DropNoCommandSink}

// Stats are the daemon's counters. They are updated with atomics from every
// stage, so reading them never stops the pipeline. Each field of Cells,
// and each family by key (Emitted and the methods below it), is a row of
// the table in table.go, which the snapshot, the metrics and the
// statistics line follow. Every counter lives in the Stats' arena: the
// heap, or a worker's memory shared with its supervisor (NewStatsIn).
type Stats struct {
	*Cells

	arena   *Arena
	mu      sync.Mutex
	keyed   map[string]map[string]*atomic.Uint64 // by row field, then key
	durable map[string]func() DurableQueue       // see RegisterDurable
}

// Cells are the counters that are not by key. They hold no pointer, so
// that they can live in memory shared with another process (an Arena),
// which reads them while this one counts.
type Cells struct {
	// Connections counts accepted connections; Open is how many are open now.
	Connections atomic.Uint64
	Open        atomic.Int64
	// Refused counts connections closed before the init packet (limits,
	// access, a missing or bad PROXY header).
	Refused atomic.Uint64
	// Incomplete counts connections that ended (closed by the client, timed
	// out) before they sent one whole packet: slowloris clients, scanners,
	// garbage. They carried no check, so they are not counted as received.
	Incomplete atomic.Uint64
	// HealthChecks counts a load balancer's own connections (a PROXY LOCAL
	// header), closed without an init packet and not counted as refused.
	HealthChecks atomic.Uint64
	// Received counts complete packets framed off connections.
	Received atomic.Uint64
	// Held is how many results a sink holds back right now (the spool at
	// its cap); they are part of what is queued.
	Held atomic.Int64
	// Chunks and BytesRead count what the read stage took off sockets;
	// Validated counts packets that passed validation.
	Chunks, BytesRead, Validated atomic.Uint64
	// DecryptNanos is the time spent decrypting, for the per-method cost.
	DecryptNanos atomic.Uint64
	// Finished counts results every destination is done with (written,
	// held by a sink, or dropped); SinkDropped counts the drops among them,
	// one per destination that dropped a result.
	Finished, SinkDropped atomic.Uint64
	// DialectLossy counts results the command file, the spool or the dump
	// file delivered in a lossy form of command_file_dialect: output the
	// core cannot store exactly, written in the documented substitute.
	DialectLossy atomic.Uint64
	// Latency is the time from a result's last byte read to every
	// destination being done with it.
	Latency Latency
}

// snapshotInto copies the cells into snap: its scalars and latency.
func (c *Cells) snapshotInto(snap *Snapshot) {
	c.Latency.snapshotInto(&snap.Latency)
	live, to := reflect.ValueOf(c).Elem(), reflect.ValueOf(snap).Elem()
	for _, r := range rows {
		if r.shape == scalar {
			r.load(live, to)
		}
	}
}

// NewStats returns zeroed counters on the heap.
func NewStats() *Stats { return NewStatsIn(nil) }

// NewStatsIn returns zeroed counters kept in arena, or on the heap when
// arena is nil or already holds another Stats' counters.
func NewStatsIn(arena *Arena) *Stats {
	s := &Stats{keyed: map[string]map[string]*atomic.Uint64{}}
	for _, r := range statsKeyed {
		s.keyed[r.field] = map[string]*atomic.Uint64{}
	}
	if s.Cells = arena.take(); s.Cells != nil {
		s.arena = arena
	} else {
		s.Cells = new(Cells)
	}
	return s
}

// counter is key's counter in the family of the row with field.
func (s *Stats) counter(field, key string) *atomic.Uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.keyed[field]
	c, ok := m[key]
	if !ok {
		c = s.arena.counter(field, key)
		m[key] = c
	}
	return c
}

// Emitted returns the counter of results written to the named sink.
func (s *Stats) Emitted(sink string) *atomic.Uint64 { return s.counter("Emitted", sink) }

// Dropped returns the counter of checks lost for the named reason.
func (s *Stats) Dropped(reason string) *atomic.Uint64 { return s.counter("Dropped", reason) }

// DroppedInSink counts n results a destination could not deliver, for
// reason: unlike drops before the emit stage, another destination may
// still have delivered them.
func (s *Stats) DroppedInSink(reason string, n int) {
	s.Dropped(reason).Add(uint64(n))
	s.SinkDropped.Add(uint64(n))
}

// SinkErrors returns the counter of failed writes to the named sink.
func (s *Stats) SinkErrors(sink string) *atomic.Uint64 { return s.counter("SinkErrors", sink) }

// FellBack returns the counter of results the named sink passed to its
// fallback: it failed to deliver them, or its queue was full.
func (s *Stats) FellBack(sink string) *atomic.Uint64 { return s.counter("FellBack", sink) }

// SinkDown returns the named sink's state: 1 while its last write (or,
// before any, its probe at start) failed, 0 once it takes results.
func (s *Stats) SinkDown(sink string) *atomic.Uint64 { return s.counter("SinkDown", sink) }

// SecretMatches returns the counter of connections whose first packet the
// named secret decrypted (a conf.Secret's name, never the password).
func (s *Stats) SecretMatches(secret string) *atomic.Uint64 {
	return s.counter("SecretMatches", secret)
}

// FrontReceived returns the counter of what the named front end (nsca,
// nsca-ng, nrdp) handed to validation: results and other commands.
func (s *Stats) FrontReceived(front string) *atomic.Uint64 { return s.counter("FrontReceived", front) }

// FrontRefused returns the counter of what validation refused of the
// named front end's submissions, for any reason.
func (s *Stats) FrontRefused(front string) *atomic.Uint64 { return s.counter("FrontRefused", front) }

// IdentityRefused returns the counter of results the named identity sent
// and has no right to.
func (s *Stats) IdentityRefused(identity string) *atomic.Uint64 {
	return s.counter("IdentityRefused", identity)
}

// Snapshot is a consistent-enough copy of the counters for logging and tests,
// and what a worker sends the supervisor as JSON. Each field but Latency
// and Durable is a row of the table in table.go, under the name of its
// field in Stats.
type Snapshot struct {
	Connections, Refused, Received uint64
	HealthChecks, Incomplete       uint64
	Open, Held                     int64
	Chunks, BytesRead, Validated   uint64
	DecryptNanos                   uint64
	Finished, SinkDropped          uint64
	DialectLossy                   uint64
	Emitted, Dropped, SinkErrors   map[string]uint64
	FellBack                       map[string]uint64
	// SinkDown is, per sink, how many pipelines find it failing: a gauge.
	SinkDown map[string]uint64 `json:",omitempty"`
	Latency  LatencySnapshot
	// SecretMatches and IdentityRefused are by secret and by identity
	// name; see Stats.SecretMatches and Stats.IdentityRefused.
	SecretMatches   map[string]uint64 `json:",omitempty"`
	IdentityRefused map[string]uint64 `json:",omitempty"`
	// FrontReceived and FrontRefused are by front end; see
	// Stats.FrontReceived and Stats.FrontRefused.
	FrontReceived map[string]uint64 `json:",omitempty"`
	FrontRefused  map[string]uint64 `json:",omitempty"`
	// Durable holds each destination's durable disk queue, when
	// queue_directory is set.
	Durable map[string]DurableQueue `json:",omitempty"`
	// Queues holds the depth of each queue between stages, when the
	// snapshot came from a running Server.
	Queues map[string]int64
}

// Snapshot copies the counters.
func (s *Stats) Snapshot() Snapshot {
	var snap Snapshot
	s.SnapshotInto(&snap)
	return snap
}

// SnapshotInto copies the counters into snap, reusing its maps and
// latency buckets: a worker reports after the batches it delivers, a batch
// a check at a fleet's trickle, and a fresh snapshot's dozen maps were
// most of what a report cost. Whatever snap held is replaced, but for
// Queues, which are the Server's to fill.
func (s *Stats) SnapshotInto(snap *Snapshot) {
	s.Cells.snapshotInto(snap)
	to := reflect.ValueOf(snap).Elem()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range statsKeyed {
		field := to.Field(r.snap)
		m, _ := field.Interface().(map[string]uint64)
		field.Set(reflect.ValueOf(loadInto(m, s.keyed[r.field])))
	}
	snap.Durable = s.readDurable()
}

// loadInto reads the counters of m into out, emptied first (made when
// nil), and returns it.
func loadInto(out map[string]uint64, m map[string]*atomic.Uint64) map[string]uint64 {
	if out == nil {
		out = make(map[string]uint64, len(m))
	}
	// Overwritten in place: a map reused from the last report has the same
	// keys (a counter by key, once made, stays), and clearing it made each
	// report insert every key anew, half of what a snapshot cost. What it
	// has beyond m's keys, if anything, goes.
	for k, v := range m {
		out[k] = v.Load()
	}
	if len(out) != len(m) {
		for k := range out {
			if _, ok := m[k]; !ok {
				delete(out, k)
			}
		}
	}
	return out
}

// TotalEmitted sums the results written to every sink.
func (s Snapshot) TotalEmitted() uint64 { return sum(s.Emitted) }

// Queued is what was received and is not finished yet: in the pipeline's
// queues, a destination's queue, or held by a sink. With one destination,
// once drained, received = emitted + dropped.
func (s Snapshot) Queued() int64 {
	droppedBeforeEmit := int64(s.TotalDropped()) - int64(s.SinkDropped)
	return int64(s.Received) - droppedBeforeEmit - int64(s.Finished) + s.Held
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
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		// Counters the metrics show at zero from the start are news
		// here only once they count something.
		if m[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
		}
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
	line := fmt.Sprintf("%.0f conn/s, connections=%d, open=%d, refused=%d, incomplete=%d, health_checks=%d, received=%d, report_success=%d, report_failed=%d, queued=%d (held by sinks %d), emitted{%s}, dropped{%s}, fell_back{%s}",
		rate, s.Connections, s.Open, s.Refused, s.Incomplete, s.HealthChecks, s.Received, s.TotalEmitted(), s.TotalDropped(), s.Queued(), s.Held,
		formatCounts(s.Emitted), formatCounts(s.Dropped), formatCounts(s.FellBack))
	return line + s.lineExtras() + s.queueDamage()
}

// lineExtras renders the rows with a line key that are nonzero, in the
// table's order: only what happened (dialect_lossy practically never
// does with the nagios dialect), so the line stays what its parsers know.
func (s Snapshot) lineExtras() string {
	var out string
	for _, r := range rows {
		if r.line == "" {
			continue
		}
		switch v := r.in(&s); {
		case r.shape == keyed:
			if counts := formatCounts(v.Interface().(map[string]uint64)); counts != "" {
				out += fmt.Sprintf(", %s{%s}", r.line, counts)
			}
		case !v.IsZero():
			out += fmt.Sprintf(", %s=%v", r.line, v)
		}
	}
	return out
}

// queueDamage renders the damage found in the durable queues, only once
// there is some, as dialect_lossy: results lost where known, and regions
// whose cost is unknown.
func (s Snapshot) queueDamage() string {
	lost, unknown := map[string]uint64{}, map[string]uint64{}
	for k, q := range s.Durable {
		if q.Lost > 0 {
			lost[k] = q.Lost
		}
		if q.LostUnknown > 0 {
			unknown[k] = q.LostUnknown
		}
	}
	var out string
	if len(lost) > 0 {
		out += fmt.Sprintf(", queue_lost{%s}", formatCounts(lost))
	}
	if len(unknown) > 0 {
		out += fmt.Sprintf(", queue_lost_unknown{%s}", formatCounts(unknown))
	}
	return out
}

// Add sums o into s, for the statistics of several worker processes.
func (s *Snapshot) Add(o Snapshot) {
	for _, r := range rows {
		if r.shape != derived {
			r.add(s, &o)
		}
	}
	s.Latency.add(o.Latency)
	addDurable(&s.Durable, o.Durable)
}
