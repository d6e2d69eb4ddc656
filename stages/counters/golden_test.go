package counters

import (
	"encoding/json"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// update rewrites the golden files from the code under test. The files in
// testdata were written by the code before the counters became a table, so
// that these tests prove the table renders the same bytes. A new row
// changes them on purpose: rewrite them with -update and read the diff.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// knownStats has every counter of Stats at a distinct value and every keyed
// family with two keys, so that no row of the output is left at its zero.
func knownStats() *Stats {
	s := NewStats()
	s.Connections.Store(1001)
	s.Open.Store(7)
	s.Refused.Store(13)
	s.Incomplete.Store(17)
	s.HealthChecks.Store(19)
	s.Received.Store(900)
	s.Held.Store(23)
	s.Chunks.Store(450)
	s.BytesRead.Store(648000)
	s.Validated.Store(880)
	s.DecryptNanos.Store(1234567890)
	s.Finished.Store(850)
	s.SinkDropped.Store(3)
	s.DialectLossy.Store(29)
	s.Emitted("command_file").Store(800)
	s.Emitted("spool").Store(31)
	s.Dropped(DropBadCRC).Store(11)
	s.Dropped("custom_reason").Store(2)
	s.DroppedInSink(DropSink, 3)
	s.SinkErrors("icinga2").Store(37)
	s.SinkErrors("spool").Store(0)
	s.FellBack("icinga2").Store(41)
	s.FellBack("spool").Store(43)
	s.SinkDown("icinga2").Store(1)
	s.SinkDown("spool").Store(0)
	s.SecretMatches("password/XOR").Store(47)
	s.SecretMatches("alice").Store(53)
	s.IdentityRefused("alice").Store(59)
	s.IdentityRefused("bob").Store(61)
	s.FrontReceived("nsca").Store(67)
	s.FrontReceived("nrdp").Store(71)
	s.FrontRefused("nsca-ng").Store(73)
	s.RegisterDurable("icinga2", func() DurableQueue {
		return DurableQueue{Results: 67, Bytes: 71000, OldestSeconds: 73.5, Replayed: 79, Corrupt: 83, Lost: 89, LostUnknown: 97}
	})
	s.RegisterDurable("gearman", func() DurableQueue { return DurableQueue{Results: 1, Bytes: 2} })
	var b LatencyBatch
	for _, d := range []time.Duration{0, 50 * time.Microsecond, 100 * time.Microsecond, 700 * time.Microsecond,
		3 * time.Millisecond, 40 * time.Millisecond, 2 * time.Second, time.Minute} {
		b.Observe(int64(d))
	}
	s.Latency.Add(&b)
	return s
}

// knownSnapshot is knownStats's snapshot with the queue depths a Server
// adds.
func knownSnapshot() Snapshot {
	snap := knownStats().Snapshot()
	snap.Queues = map[string]int64{"accept_to_read": 3, "read_to_decrypt": 0, "destination_icinga2": 101}
	return snap
}

// knownSource serves knownSnapshot with every optional part of the metrics.
func knownSource() Source {
	var reloads Reloads
	reloads.Started(time.Unix(1700000000, 0))
	reloads.Record(nil)
	reloads.Record(os.ErrInvalid)
	reloads.last.Store(time.Unix(1700000100, 500000000).UnixNano())
	return Source{
		Snapshot: knownSnapshot,
		Method:   "tripledes",
		Build:    BuildInfo{Version: "1.2.3", GoVersion: "go1.26", Revision: `ab"c\d`},
		Process: func() ProcessStats {
			return ProcessStats{CPUSeconds: 12.25, ResidentBytes: 1 << 24, OpenFDs: 42, StartTimeUnix: 1700000000.5, VirtualBytes: 1 << 30, Processes: 3}
		},
		Reloads: &reloads,
	}
}

func scrapeBody(t *testing.T, src Source) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	MetricsHandler(src).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.Bytes()
}

// The exposition of a known set of counts, and of a fresh daemon's, is
// byte for byte what it was: names, HELP and TYPE text, labels, order.
func TestGoldenMetrics(t *testing.T) {
	golden(t, "metrics_known.golden", scrapeBody(t, knownSource()))
	golden(t, "metrics_fresh.golden", scrapeBody(t, Source{Snapshot: NewStats().Snapshot, Method: "xor"}))
}

// The statistics line, periodic and at exit, is what its parsers know,
// with the extras a known set of counts adds; a fresh daemon's has none.
func TestGoldenLine(t *testing.T) {
	prev := knownSnapshot()
	prev.Connections -= 50
	now := knownSnapshot()
	fresh := NewStats().Snapshot()
	golden(t, "line.golden", []byte(now.Line(prev, 10)+"\n"+fresh.Line(fresh, 0)+"\n"))
}

// The statistics file of a known set of counts is the C++ nsca_fast's
// format with the values in their places.
func TestGoldenStatsFile(t *testing.T) {
	dir := t.TempDir()
	start := time.Unix(1700000000, 0)
	f := &StatsFile{path: filepath.Join(dir, StatsFileName(1)), pid: 4242, started: start, snapshot: knownSnapshot, prevAt: start}
	f.prevConns = 1
	if err := f.write(start.Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "statsfile.golden", b)
}

// A snapshot crosses from a worker to the supervisor as JSON: its encoding
// is what a worker of the same release sends, summed over two workers and
// after a retirement, which keeps counters and drops gauges.
func TestGoldenSnapshotJSON(t *testing.T) {
	var sum Snapshot
	sum.Add(knownSnapshot())
	sum.Add(knownSnapshot())
	var totals Totals
	totals.Add(1, knownSnapshot)
	totals.Add(2, knownSnapshot)
	totals.Retire(2, knownSnapshot())
	var out []byte
	for _, s := range []Snapshot{knownSnapshot(), sum, totals.Sum(), NewStats().Snapshot()} {
		b, err := json.MarshalIndent(s, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, b...), '\n')
	}
	golden(t, "snapshot.golden", out)
}
