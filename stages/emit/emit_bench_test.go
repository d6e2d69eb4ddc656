package emit

import (
	"testing"
	"time"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/sink"
)

// BenchmarkObserveLatency is the emit stage's cost of the latency
// histogram for a full batch: one clock read and the bucket adds.
func BenchmarkObserveLatency(b *testing.B) {
	var l counters.Latency
	items := make([]sink.Item, maxBatch)
	now := time.Now().UnixNano()
	for i := range items {
		items[i].ReadAt = now - int64(i)*10000
	}
	b.ReportAllocs()
	for b.Loop() {
		observeLatency(&l, items)
	}
}
