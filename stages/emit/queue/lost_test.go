package queue

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// damageLog collects what Options.OnDamage hears.
type damageLog struct {
	mu sync.Mutex
	ds []Damage
}

func (l *damageLog) add(d Damage) { l.mu.Lock(); l.ds = append(l.ds, d); l.mu.Unlock() }

func (l *damageLog) all() []Damage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ds)
}

// TestDamageLostCounted damages and removes segments under an open queue
// before the reader reaches them: each region is reported once, with its
// file and the number of records it cost, and Stats counts them in
// records; the reader goes on past them.
func TestDamageLostCounted(t *testing.T) {
	dir := t.TempDir()
	var log damageLog
	q := open(t, dir, Options{SegmentBytes: 4096, OnDamage: log.add})
	defer q.Close()
	appendN(t, q, 0, 5*perSeg)
	segs := segFiles(t, dir)
	if err := os.Truncate(segs[1], 10); err != nil { // the header cut: all of it
		t.Fatal(err)
	}
	if err := os.Remove(segs[2]); err != nil {
		t.Fatal(err)
	}
	flipByte(t, segs[3], recOff(2)+frameHeaderSize+50) // one record's data
	got := drain(t, q, 7)
	want := slices.Concat(without(0, perSeg), without(3*perSeg, 4*perSeg, 3*perSeg+2), without(4*perSeg, 5*perSeg))
	if !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	st := q.Stats()
	if wantLost := int64(2*perSeg + 1); st.Lost != wantLost || st.LostUnknown != 0 {
		t.Errorf("stats %+v: want %d records lost, none unknown", st, wantLost)
	}
	ds := log.all()
	byFile := map[string][]Damage{}
	for _, d := range ds {
		byFile[d.File] = append(byFile[d.File], d)
	}
	sum := func(ds []Damage) (n int64) {
		for _, d := range ds {
			n += d.Results
		}
		return n
	}
	if d := byFile[segs[1]]; len(d) == 0 || sum(d[:1]) != int64(perSeg) {
		t.Errorf("cut segment: %+v, want the first region to cost %d", d, perSeg)
	}
	if d := byFile[segs[2]]; len(d) != 1 || d[0].Results != int64(perSeg) || !strings.Contains(d[0].Cause, "removed") {
		t.Errorf("removed segment: %+v, want one region costing %d", d, perSeg)
	}
	if d := byFile[segs[3]]; len(d) != 1 || d[0].Results != 1 || d[0].Offset != recOff(2) {
		t.Errorf("damaged record: %+v", d)
	}
}

// TestDamageAtOpenUnknown: damage found at Open, where no one knows what
// the file held, is reported with an unknown cost and counted as such.
func TestDamageAtOpenUnknown(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, Options{SegmentBytes: 4096})
	appendN(t, q, 0, 3*perSeg)
	q.Close()
	segs := segFiles(t, dir)
	if err := os.Truncate(segs[0], 10); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(segs[1], 0); err != nil {
		t.Fatal(err)
	}
	var log damageLog
	q = open(t, dir, Options{SegmentBytes: 4096, OnDamage: log.add})
	defer q.Close()
	wantRange(t, drain(t, q, 10), 2*perSeg, 3*perSeg)
	if st := q.Stats(); st.LostUnknown != 2 || st.Lost != 0 {
		t.Errorf("stats %+v: want 2 regions of unknown cost", st)
	}
	ds := log.all()
	if len(ds) != 2 || ds[0].Results != -1 || ds[1].Results != -1 {
		t.Errorf("reported %+v", ds)
	}
}

// TestWriterSegmentRemoved removes the segment the writer appends to:
// the writer notices and goes on in a new file, and the reader counts
// what the removed one held.
func TestWriterSegmentRemoved(t *testing.T) {
	dir := t.TempDir()
	var log damageLog
	q := open(t, dir, Options{OnDamage: log.add})
	defer q.Close()
	appendN(t, q, 0, 10)
	segs := segFiles(t, dir)
	if err := os.Remove(segs[0]); err != nil {
		t.Fatal(err)
	}
	appendN(t, q, 10, 5)
	if n := len(segFiles(t, dir)); n != 1 {
		t.Fatalf("%d segment files after the removal, want a new one", n)
	}
	wantRange(t, drain(t, q, 4), 10, 15)
	if st := q.Stats(); st.Lost != 10 {
		t.Errorf("stats %+v: want 10 lost", st)
	}
	ds := log.all()
	if len(ds) != 2 || !strings.Contains(ds[0].Cause, "appended to") || ds[0].Results != -1 || ds[1].Results != 10 {
		t.Errorf("reported %+v", ds)
	}
}
