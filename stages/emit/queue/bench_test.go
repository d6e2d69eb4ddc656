package queue

import (
	"fmt"
	"testing"
	"time"
)

func benchRecords(n int) [][]byte {
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = rec(i)[:300]
	}
	return recs
}

// BenchmarkAppendAck is the queue's cost per result with the engine up:
// each batch is appended, read back and acknowledged at once. ns/op is per
// record.
func BenchmarkAppendAck(b *testing.B) {
	for _, fs := range []Fsync{FsyncNever, FsyncBatch, FsyncAlways} {
		for _, batch := range []int{1, 64} {
			b.Run(fmt.Sprintf("fsync=%s/batch=%d", fs, batch), func(b *testing.B) {
				q := open(b, b.TempDir(), Options{Fsync: fs})
				defer q.Close()
				recs := benchRecords(batch)
				b.SetBytes(300)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i += batch {
					if n, err := q.Append(recs...); n != batch || err != nil {
						b.Fatal(n, err)
					}
					got, err := q.Peek(batch)
					if err != nil || len(got) != batch {
						b.Fatal(len(got), err)
					}
					if err := q.Ack(batch); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// backlog appends n records without syncing.
func backlog(b *testing.B, dir string, n int) {
	q := open(b, dir, Options{Fsync: FsyncNever})
	recs := benchRecords(256)
	for i := 0; i < n; i += len(recs) {
		if k, err := q.Append(recs[:min(len(recs), n-i)]...); err != nil {
			b.Fatal(k, err)
		}
	}
	q.Close()
}

// BenchmarkDrain reads and acknowledges a 100,000-record backlog, as after
// an outage, in batches of 256; one op is the whole backlog. The backlog is
// in the page cache, as it is after an outage short enough to matter.
func BenchmarkDrain(b *testing.B) {
	const n = 100_000
	for _, fs := range []Fsync{FsyncBatch, FsyncAlways} {
		b.Run("fsync="+fs.String(), func(b *testing.B) {
			var total time.Duration
			for range b.N {
				b.StopTimer()
				dir := b.TempDir()
				backlog(b, dir, n)
				q := open(b, dir, Options{Fsync: fs})
				b.StartTimer()
				start := time.Now()
				got := 0
				for {
					recs, err := q.Peek(256)
					if err != nil {
						b.Fatal(err)
					}
					if len(recs) == 0 {
						break
					}
					got += len(recs)
					if err := q.Ack(len(recs)); err != nil {
						b.Fatal(err)
					}
				}
				total += time.Since(start)
				b.StopTimer()
				if got != n {
					b.Fatalf("drained %d", got)
				}
				q.Close()
			}
			b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "records/s")
		})
	}
}

// BenchmarkOpen is the start-up cost of a 100,000-record backlog (30 MB):
// Open checks every unacknowledged record.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	backlog(b, dir, 100_000)
	b.ResetTimer()
	for range b.N {
		q := open(b, dir, Options{})
		if st := q.Stats(); st.Records != 100_000 {
			b.Fatal(st)
		}
		q.Close()
	}
}

// BenchmarkPipeline is the queue as a destination uses it: one goroutine
// appends batches of 64 while another waits on Ready, peeks and acks.
// ns/op is per record, both sides together.
func BenchmarkPipeline(b *testing.B) {
	for _, fs := range []Fsync{FsyncNever, FsyncBatch} {
		b.Run("fsync="+fs.String(), func(b *testing.B) {
			q := open(b, b.TempDir(), Options{Fsync: fs})
			defer q.Close()
			recs := benchRecords(64)
			b.ReportAllocs()
			b.ResetTimer()
			done := make(chan error, 1)
			go func() {
				for got := 0; got < b.N; {
					r, err := q.Peek(256)
					if err != nil {
						done <- err
						return
					}
					if len(r) == 0 {
						<-q.Ready()
						continue
					}
					got += len(r)
					if err := q.Ack(len(r)); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			for i := 0; i < b.N; i += len(recs) {
				if _, err := q.Append(recs[:min(len(recs), b.N-i)]...); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
