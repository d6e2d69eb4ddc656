package counters

import (
	"io"
	"net/http/httptest"
	"testing"
)

// Snapshot runs at every worker report (once a second) and every scrape.
func BenchmarkSnapshot(b *testing.B) {
	s := knownStats()
	for b.Loop() {
		s.Snapshot()
	}
}

// Add runs once per worker for every scrape and report of the supervisor.
func BenchmarkSnapshotAdd(b *testing.B) {
	one := knownSnapshot()
	for b.Loop() {
		var sum Snapshot
		sum.Add(one)
		sum.Add(one)
	}
}

func BenchmarkScrape(b *testing.B) {
	h := MetricsHandler(knownSource())
	req := httptest.NewRequest("GET", "/metrics", nil)
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		io.Discard.Write(rec.Body.Bytes())
	}
}

// SnapshotInto is what a worker's report after each batch takes: the
// snapshot of the last report, its maps reused.
func BenchmarkSnapshotInto(b *testing.B) {
	s := knownStats()
	var snap Snapshot
	b.ReportAllocs()
	for b.Loop() {
		s.SnapshotInto(&snap)
	}
}
