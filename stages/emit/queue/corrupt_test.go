package queue

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// perSeg is how many rec records a 4096-byte segment holds.
var perSeg = int((4096 - segHeaderSize) / frameSize(rec(0)))

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func without(from, to int, skip ...int) []int {
	var want []int
	for i := from; i < to; i++ {
		if !slices.Contains(skip, i) {
			want = append(want, i)
		}
	}
	return want
}

// recOff is where record i of its segment starts.
func recOff(i int) int64 { return segHeaderSize + int64(i)*frameSize(rec(0)) }

func TestTornSegment(t *testing.T) {
	dir := t.TempDir()
	opt := Options{SegmentBytes: 4096}
	q := open(t, dir, opt)
	appendN(t, q, 0, 100)
	q.Close()
	segs := segFiles(t, dir)
	if len(segs) < 8 {
		t.Fatalf("%d segments", len(segs))
	}
	// Segment 1: cut mid-record, as a crash leaves a torn tail.
	fi, _ := os.Stat(segs[1])
	if err := os.Truncate(segs[1], fi.Size()-100); err != nil {
		t.Fatal(err)
	}
	lostTorn := 2*perSeg - 1
	// Segment 3: a flipped byte in the data of its third record.
	flipByte(t, segs[3], recOff(2)+frameHeaderSize+50)
	lostData := 3*perSeg + 2
	// Segment 5: a flipped byte in the length of its fifth record's header.
	flipByte(t, segs[5], recOff(4)+5)
	lostHeader := 5*perSeg + 4
	// Segment 6: a bad segment header; its records are still read.
	flipByte(t, segs[6], 3)
	// Segment 7: zeroes after the last record, as a power loss may leave.
	f, _ := os.OpenFile(segs[7], os.O_WRONLY|os.O_APPEND, 0)
	f.Write(make([]byte, 500))
	f.Close()

	q = open(t, dir, opt)
	st := q.Stats()
	if st.Corrupt != 5 || st.Records != int64(100-3) {
		t.Fatalf("stats at open %+v", st)
	}
	got := drain(t, q, 5)
	if want := without(0, 100, lostTorn, lostData, lostHeader); !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if st := q.Stats(); st.Corrupt != 5 || st.Records != 0 || st.Bytes != 0 {
		t.Fatalf("stats after drain %+v (damage counted twice?)", st)
	}
	// New records after the damage still flow.
	appendN(t, q, 100, 5)
	if got := drain(t, q, 5); !slices.Equal(got, without(100, 105)) {
		t.Fatalf("after: %v", got)
	}
	q.Close()
	// Everything passed is acknowledged: nothing comes again, nothing
	// counts again.
	q = open(t, dir, opt)
	if st := q.Stats(); st.Corrupt != 0 || st.Records != 0 {
		t.Fatalf("stats after reopen %+v", st)
	}
	q.Close()
}

// TestDamageWhileOpen damages records the reader has not read yet: the
// reader finds and counts it.
func TestDamageWhileOpen(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, Options{SegmentBytes: 4096})
	defer q.Close()
	appendN(t, q, 0, 30)
	segs := segFiles(t, dir)
	flipByte(t, segs[0], recOff(3)+frameHeaderSize)
	flipByte(t, segs[1], recOff(0)) // the magic of the first record
	got := drain(t, q, 4)
	if want := without(0, 30, 3, perSeg); !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if st := q.Stats(); st.Corrupt != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDamagedAckFile(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, Options{})
	appendN(t, q, 0, 10)
	recs, _ := q.Peek(4)
	q.Ack(len(recs)) // one slot written
	recs, _ = q.Peek(2)
	q.Ack(len(recs)) // the other
	q.Close()
	// One slot torn: the other, older position is used: duplicates only.
	flipByte(t, filepath.Join(dir, ackName), ackSlotSize*0+10)
	q = open(t, dir, Options{})
	if got := drain(t, q, 3); !slices.Equal(got, without(4, 10)) {
		t.Fatalf("one slot damaged: %v", got)
	}
	q.Close()
	// Both torn: from the oldest segment, counted.
	q = open(t, dir, Options{})
	appendN(t, q, 10, 3)
	q.Close()
	os.WriteFile(filepath.Join(dir, ackName), make([]byte, ackFileSize), 0o640)
	q = open(t, dir, Options{})
	if st := q.Stats(); st.Corrupt != 1 {
		t.Fatalf("stats %+v", st)
	}
	if got := drain(t, q, 3); len(got) == 0 || got[len(got)-1] != 12 {
		t.Fatalf("both slots damaged: %v", got)
	}
	q.Close()
}

// checkSegment writes data as a segment file, opens a queue on it and
// drains it; whatever the bytes, nothing may panic and every record
// delivered must be intact.
func checkSegment(t *testing.T, data []byte) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, segName(1)), data, 0o640); err != nil {
		t.Fatal(err)
	}
	q, err := Open(dir, Options{SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	open := q.Stats()
	n := 0
	for {
		recs, err := q.Peek(7)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		n += len(recs)
		if err := q.Ack(len(recs)); err != nil {
			t.Fatal(err)
		}
	}
	st := q.Stats()
	if int64(n) != open.Records || st.Records != 0 || st.Corrupt != open.Corrupt || st.Bytes != 0 {
		t.Fatalf("open %+v, after %d records %+v", open, n, st)
	}
}

func validSegment(n int) []byte {
	b := appendSegHeader(nil)
	for i := range n {
		b = appendFrame(b, rec(i)[:i*7%300], int64(i))
	}
	return b
}

func FuzzSegment(f *testing.F) {
	good := validSegment(5)
	f.Add(good)
	f.Add(good[:len(good)-10])
	f.Add(good[:segHeaderSize+3])
	f.Add(append(append([]byte{}, good...), good[segHeaderSize:]...))
	f.Add(append(append([]byte{}, good[:100]...), good[120:]...))
	f.Add([]byte{})
	f.Add([]byte("NQRC"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSegment(t, data)
	})
}

// FuzzScanner drives the scanner alone, faster than a whole queue: it must
// end, never panic, and return only intact records in order.
func FuzzScanner(f *testing.F) {
	good := validSegment(5)
	f.Add(good, int64(segHeaderSize))
	f.Add(good[:len(good)-10], int64(0))
	f.Add(good, int64(3))
	f.Fuzz(func(t *testing.T, data []byte, start int64) {
		if start < 0 || start > int64(len(data)) {
			return
		}
		s := &scanner{f: bytesReaderAt(data), off: start, end: int64(len(data))}
		last := start
		for i := 0; ; i++ {
			if i > len(data)+1 {
				t.Fatal("no progress")
			}
			ev, err := s.next()
			if err != nil {
				t.Fatal(err)
			}
			if ev.kind == evEnd {
				return
			}
			if ev.start != last || ev.end <= ev.start || ev.end > int64(len(data)) {
				t.Fatalf("event %+v after %d", ev, last)
			}
			if ev.kind == evRecord && crc(ev.data) != crc(data[ev.start+frameHeaderSize:ev.end]) {
				t.Fatal("record data")
			}
			last = ev.end
		}
	})
}

type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, errEOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, errEOF
	}
	return n, nil
}

var errEOF = io.EOF
