package durable

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"nsca_fast/stages/emit/sink"

	"nsca_fast/stages/emit/queue"
)

// engine is an in-process stand-in for a remote engine, to measure what
// the durable queue adds around it: it takes everything while up and
// nothing while down.
type engine struct {
	down  atomic.Bool
	taken atomic.Int64
}

var errEngineDown = errors.New("engine down")

func (e *engine) Name() string { return "engine" }
func (e *engine) Close() error { return nil }
func (e *engine) Write(items []sink.Item) (int, error) {
	if e.down.Load() {
		return 0, errEngineDown
	}
	e.taken.Add(int64(len(items)))
	return len(items), nil
}

func benchItems(n int) []sink.Item {
	its := make([]sink.Item, n)
	for i := range its {
		its[i] = item(1762153445, "web01.example.org", fmt.Sprintf("svc-%d", i%50), 0, "OK - all fine|time=0.01s;1;2;0 size=1234B")
	}
	return its
}

// BenchmarkDurableEngineUp: the cost per result of a destination with and
// without the durable queue while the engine takes everything, per batch
// size (the emit stage hands on what has arrived, 1 to 256 results).
func BenchmarkDurableEngineUp(b *testing.B) {
	for _, size := range []int{1, 16, 256} {
		its := benchItems(size)
		for _, mode := range []string{"memory-only", "durable"} {
			b.Run(fmt.Sprintf("batch=%d/%s", size, mode), func(b *testing.B) {
				e := &engine{}
				var s sink.Sink = e
				if mode == "durable" {
					d, err := New(e, Config{Dir: b.TempDir()})
					if err != nil {
						b.Fatal(err)
					}
					defer d.Close()
					s = d
				}
				b.ResetTimer()
				for range b.N {
					if n, err := s.Write(its); n != len(its) || err != nil {
						b.Fatal(n, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(its)), "ns/result")
			})
		}
	}
}

// BenchmarkDurableDrain: results queued while the engine was down (in
// batches of 64), then delivered once it is up, per fsync policy: the
// append rate during the outage and the drain rate after it.
func BenchmarkDurableDrain(b *testing.B) {
	const total = 19968 // 312 batches of 64
	its := benchItems(64)
	for _, policy := range []queue.Fsync{queue.FsyncNever, queue.FsyncBatch, queue.FsyncAlways} {
		b.Run(policy.String(), func(b *testing.B) {
			for range b.N {
				e := &engine{}
				e.down.Store(true)
				d, err := New(e, Config{Dir: b.TempDir(), Fsync: policy})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				for n := 0; n < total; n += len(its) {
					if k, err := d.Write(its); k != len(its) || err != nil {
						b.Fatal(k, err)
					}
				}
				appended := time.Since(start)
				e.down.Store(false)
				// From the first delivery: before it, the drainer sleeps
				// out its back-off from the outage.
				for e.taken.Load() == 0 {
					time.Sleep(100 * time.Microsecond)
				}
				start = time.Now()
				for e.taken.Load() < total {
					time.Sleep(100 * time.Microsecond)
				}
				drained := time.Since(start)
				d.Close()
				b.ReportMetric(total/appended.Seconds(), "appended/s")
				b.ReportMetric(total/drained.Seconds(), "drained/s")
			}
		})
	}
}
