package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func open(t testing.TB, dir string, opt Options) *Queue {
	t.Helper()
	q, err := Open(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func rec(i int) []byte { return []byte(fmt.Sprintf("record %06d %s", i, strings.Repeat("x", 280))) }

func recNum(t testing.TB, r Record) int {
	t.Helper()
	f := strings.Fields(string(r.Data))
	if len(f) < 2 {
		t.Fatalf("bad record %q", r.Data)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("bad record %q", r.Data)
	}
	return n
}

func appendN(t testing.TB, q *Queue, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if k, err := q.Append(rec(i)); k != 1 || err != nil {
			t.Fatalf("append %d: %d, %v", i, k, err)
		}
	}
}

// drain peeks and acks everything, in batches of batch, returning the
// record numbers.
func drain(t testing.TB, q *Queue, batch int) []int {
	t.Helper()
	var got []int
	for {
		recs, err := q.Peek(batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return got
		}
		for _, r := range recs {
			got = append(got, recNum(t, r))
		}
		if err := q.Ack(len(recs)); err != nil {
			t.Fatal(err)
		}
	}
}

func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func wantRange(t testing.TB, got []int, from, to int) {
	t.Helper()
	if len(got) != to-from {
		t.Fatalf("got %d records, want %d (%d..%d)", len(got), to-from, from, to-1)
	}
	for i, n := range got {
		if n != from+i {
			t.Fatalf("record %d is %d, want %d", i, n, from+i)
		}
	}
}

func TestOrderAndAckAcrossReopen(t *testing.T) {
	for _, fs := range []Fsync{FsyncNever, FsyncBatch, FsyncAlways} {
		t.Run(fs.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "q")
			q := open(t, dir, Options{Fsync: fs})
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o750 {
				t.Fatalf("dir: %v %v", fi.Mode(), err)
			}
			appendN(t, q, 0, 100)
			recs, err := q.Peek(30)
			if err != nil || len(recs) != 30 || recNum(t, recs[0]) != 0 || recNum(t, recs[29]) != 29 {
				t.Fatalf("peek: %d, %v", len(recs), err)
			}
			// Peek again without Ack: the same records.
			if again, _ := q.Peek(5); recNum(t, again[0]) != 0 {
				t.Fatal("peek again did not start at the first unacked record")
			}
			if err := q.Ack(20); err != nil {
				t.Fatal(err)
			}
			if err := q.Ack(11); !errors.Is(err, ErrAckRange) {
				t.Fatalf("ack past peeked: %v", err)
			}
			st := q.Stats()
			if st.Records != 80 || st.Appended != 100 || st.Acked != 20 || st.Bytes != 80*frameSize(rec(0)) {
				t.Fatalf("stats %+v", st)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := q.Append(rec(1)); !errors.Is(err, ErrClosed) {
				t.Fatalf("append after close: %v", err)
			}
			if _, err := q.Peek(1); !errors.Is(err, ErrClosed) {
				t.Fatalf("peek after close: %v", err)
			}
			q = open(t, dir, Options{Fsync: fs})
			if st := q.Stats(); st.Records != 80 || st.Corrupt != 0 {
				t.Fatalf("stats after reopen %+v", st)
			}
			appendN(t, q, 100, 50)
			wantRange(t, drain(t, q, 7), 20, 150)
			q.Close()
			q = open(t, dir, Options{Fsync: fs})
			if st := q.Stats(); st.Records != 0 || st.Bytes != 0 {
				t.Fatalf("stats after drain %+v", st)
			}
			if got := drain(t, q, 10); len(got) != 0 {
				t.Fatalf("redelivered %v", got)
			}
			q.Close()
		})
	}
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, Options{})
	defer q.Close()
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []Options{{SegmentBytes: 100}, {MaxBytes: -1}, {Fsync: 9}} {
		if _, err := Open(t.TempDir(), o); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, s := range []string{"", "never", "batch", "always"} {
		f, err := ParseFsync(s)
		if err != nil || (s != "" && f.String() != s) {
			t.Errorf("%q: %v %v", s, f, err)
		}
	}
	if _, err := ParseFsync("sometimes"); !errors.Is(err, ErrOptions) || !strings.HasPrefix(err.Error(), "queue: ") {
		t.Errorf("sometimes: %v", err)
	}
}

func TestSegmentRolloverAndDeletion(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, Options{SegmentBytes: 4096, Fsync: FsyncNever})
	appendN(t, q, 0, 200) // 200 * 316 bytes: about 16 segments
	if n := len(segFiles(t, dir)); n < 10 {
		t.Fatalf("%d segments, want many", n)
	}
	for _, f := range segFiles(t, dir) {
		if fi, _ := os.Stat(f); fi.Size() > 4096 {
			t.Fatalf("%s: %d bytes", f, fi.Size())
		}
	}
	got := drain(t, q, 3)
	wantRange(t, got, 0, 200)
	if n := len(segFiles(t, dir)); n != 1 { // the one being written
		t.Fatalf("%d segments left after acking all", n)
	}
	st := q.Stats()
	if st.Segments != 1 || st.Records != 0 || st.Bytes != 0 {
		t.Fatalf("stats %+v", st)
	}
	q.Close()
	// Reopened, the next append starts a new segment and the old one goes
	// once the reader passes it.
	q = open(t, dir, Options{SegmentBytes: 4096, Fsync: FsyncNever})
	appendN(t, q, 200, 3)
	wantRange(t, drain(t, q, 10), 200, 203)
	if n := len(segFiles(t, dir)); n != 1 {
		t.Fatalf("%d segments after reopen and drain", n)
	}
	q.Close()
}

func TestBigRecord(t *testing.T) {
	q := open(t, t.TempDir(), Options{SegmentBytes: 4096})
	defer q.Close()
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i)
	}
	if n, err := q.Append(rec(0), big, rec(2)); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	if _, err := q.Append(make([]byte, MaxRecordBytes+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatal(err)
	}
	recs, err := q.Peek(10)
	if err != nil || len(recs) != 3 || string(recs[1].Data) != string(big) {
		t.Fatalf("%d %v", len(recs), err)
	}
	q.Ack(3)
}

func TestMaxBytes(t *testing.T) {
	dir := t.TempDir()
	f := frameSize(rec(0))
	q := open(t, dir, Options{MaxBytes: 10*f + segHeaderSize, SegmentBytes: 4096})
	batch := make([][]byte, 15)
	for i := range batch {
		batch[i] = rec(i)
	}
	n, err := q.Append(batch...)
	if n != 10 || !errors.Is(err, ErrFull) || !strings.HasPrefix(err.Error(), "queue: full") {
		t.Fatalf("append 15: %d, %v", n, err)
	}
	if n, err := q.Append(batch[10]); n != 0 || !errors.Is(err, ErrFull) {
		t.Fatalf("append when full: %d, %v", n, err)
	}
	if st := q.Stats(); st.Bytes > 10*f+segHeaderSize || st.Records != 10 {
		t.Fatalf("stats %+v", st)
	}
	recs, _ := q.Peek(5)
	q.Ack(len(recs))
	if n, err := q.Append(batch[10:]...); n != 5 || err != nil {
		t.Fatalf("append after ack: %d, %v", n, err)
	}
	q.Close()
	// The bound holds across a reopen.
	q = open(t, dir, Options{MaxBytes: 10*f + segHeaderSize, SegmentBytes: 4096})
	if n, err := q.Append(rec(99)); n != 0 || !errors.Is(err, ErrFull) {
		t.Fatalf("append after reopen: %d, %v", n, err)
	}
	wantRange(t, drain(t, q, 4), 5, 15)
	q.Close()
}

func TestOldestAge(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tick := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	dir := t.TempDir()
	q := open(t, dir, Options{Now: clock})
	if st := q.Stats(); !st.Oldest.IsZero() || st.OldestAge != 0 {
		t.Fatalf("empty: %+v", st)
	}
	appendN(t, q, 0, 2)
	tick(10 * time.Second)
	appendN(t, q, 2, 2)
	tick(5 * time.Second)
	if st := q.Stats(); st.OldestAge != 15*time.Second {
		t.Fatalf("age %v", st.OldestAge)
	}
	recs, _ := q.Peek(2)
	if !recs[0].Appended.Equal(time.Unix(1000, 0)) {
		t.Fatalf("appended %v", recs[0].Appended)
	}
	q.Ack(2)
	if st := q.Stats(); st.OldestAge != 5*time.Second {
		t.Fatalf("age after ack %v", st.OldestAge)
	}
	q.Close()
	q = open(t, dir, Options{Now: clock})
	if st := q.Stats(); st.OldestAge != 5*time.Second || st.Records != 2 {
		t.Fatalf("age after reopen %+v", st)
	}
	recs, _ = q.Peek(2)
	q.Ack(len(recs))
	if st := q.Stats(); st.OldestAge != 0 || !st.Oldest.IsZero() {
		t.Fatalf("drained %+v", st)
	}
	q.Close()
}

func TestReadyAndClose(t *testing.T) {
	q := open(t, t.TempDir(), Options{})
	select {
	case <-q.Ready():
		t.Fatal("ready before any append")
	default:
	}
	appendN(t, q, 0, 1)
	select {
	case <-q.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("not signalled")
	}
	done := make(chan struct{})
	go func() { <-q.Ready(); close(done) }()
	q.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("close did not wake the waiter")
	}
	if err := q.Close(); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}

// TestConcurrent runs one appender and one reader/acker at once; run it
// with -race.
func TestConcurrent(t *testing.T) {
	q := open(t, t.TempDir(), Options{SegmentBytes: 16 << 10, MaxBytes: 256 << 10, Fsync: FsyncNever})
	const total = 20000
	var wg sync.WaitGroup
	wg.Add(2)
	errs := make(chan error, 3)
	stop := make(chan struct{})
	go func() { // appender: batches of 1..32, waits while full
		defer wg.Done()
		for i := 0; i < total; {
			k := min(1+i%32, total-i)
			batch := make([][]byte, k)
			for j := range batch {
				batch[j] = rec(i + j)
			}
			n, err := q.Append(batch...)
			i += n
			if err != nil {
				if !errors.Is(err, ErrFull) {
					errs <- err
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	go func() { // reader: acks part of what it peeks, like a flaky engine
		defer wg.Done()
		next := 0
		for k := 0; next < total; k++ {
			recs, err := q.Peek(1 + k%50)
			if err != nil {
				errs <- err
				return
			}
			if len(recs) == 0 {
				select {
				case <-q.Ready():
				case <-time.After(time.Second):
				}
				continue
			}
			n := len(recs)
			if k%3 == 0 {
				n = len(recs) / 2
			}
			for _, r := range recs[:n] {
				if got := recNum(t, r); got != next {
					errs <- fmt.Errorf("got %d, want %d", got, next)
					return
				}
				next++
			}
			if err := q.Ack(n); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { // metrics
		for {
			select {
			case <-stop:
				return
			default:
				_ = q.Stats()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Records != 0 || st.Appended != total || st.Acked != total || st.Bytes != 0 {
		t.Fatalf("stats %+v", st)
	}
	q.Close()
}
