package counters

import (
	"sync/atomic"
	"time"
)

// LatencyBounds are the upper bounds, in seconds, of the result latency
// histogram's buckets (the last, +Inf, is implicit): from a result's last
// byte read off its socket to every destination being done with it. They
// span a quiet daemon's tens of microseconds to a backlog's seconds.
var LatencyBounds = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// latencyBoundsNanos are LatencyBounds in nanoseconds, for the hot path.
var latencyBoundsNanos = func() (b [len(LatencyBounds)]int64) {
	for i, s := range LatencyBounds {
		b[i] = int64(s * float64(time.Second))
	}
	return b
}()

// Latency is the result latency histogram: a counter per bucket (not
// cumulative; the exposition sums them) and the sum of the latencies. A
// batch is observed with one atomic add per bucket it touched.
type Latency struct {
	buckets  [len(LatencyBounds) + 1]atomic.Uint64
	sumNanos atomic.Uint64
}

// LatencyBatch gathers a batch's latencies on the stack before they are
// added to a Latency.
type LatencyBatch struct {
	buckets [len(LatencyBounds) + 1]uint64
	sum     uint64
	n       int
}

// Observe adds one latency in nanoseconds (negative, after the wall clock
// stepped back, counts as 0).
func (b *LatencyBatch) Observe(nanos int64) {
	nanos = max(nanos, 0)
	// The first bound not below nanos, by binary search: four
	// comparisons for sixteen bounds.
	lo, hi := 0, len(latencyBoundsNanos)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if nanos > latencyBoundsNanos[mid] {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	b.buckets[lo]++
	b.sum += uint64(nanos)
	b.n++
}

// Add moves the batch's observations into l.
func (l *Latency) Add(b *LatencyBatch) {
	if b.n == 0 {
		return
	}
	for i, n := range b.buckets {
		if n > 0 {
			l.buckets[i].Add(n)
		}
	}
	l.sumNanos.Add(b.sum)
}

// LatencySnapshot is a copy of a Latency, summed over processes like
// every counter of a Snapshot.
type LatencySnapshot struct {
	// Buckets holds the count of each bucket, not cumulative, the last
	// one above every bound.
	Buckets  []uint64 `json:",omitempty"`
	SumNanos uint64   `json:",omitempty"`
}

// snapshot is a copy of the histogram.
func (l *Latency) snapshot() LatencySnapshot {
	var s LatencySnapshot
	l.snapshotInto(&s)
	return s
}

// snapshotInto copies the histogram into s, reusing its buckets' array.
func (l *Latency) snapshotInto(s *LatencySnapshot) {
	s.Buckets = s.Buckets[:0]
	for i := range l.buckets {
		s.Buckets = append(s.Buckets, l.buckets[i].Load())
	}
	s.SumNanos = l.sumNanos.Load()
}

func (s *LatencySnapshot) add(o LatencySnapshot) {
	if len(s.Buckets) < len(o.Buckets) {
		s.Buckets = append(s.Buckets, make([]uint64, len(o.Buckets)-len(s.Buckets))...)
	}
	for i, n := range o.Buckets {
		s.Buckets[i] += n
	}
	s.SumNanos += o.SumNanos
}

// Count is how many latencies were observed.
func (s LatencySnapshot) Count() (n uint64) {
	for _, b := range s.Buckets {
		n += b
	}
	return n
}
