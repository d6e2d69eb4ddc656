package queue

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPending follows a queue through its life from outside: nothing in a
// directory that never held one, records pending once appended (also while
// the queue is open, and across segments), fewer as they are acknowledged,
// none once all are.
func TestPending(t *testing.T) {
	pending := func(dir string) (int64, bool) {
		t.Helper()
		n, found, err := Pending(dir)
		if err != nil {
			t.Fatal(err)
		}
		return n, found
	}
	plain := t.TempDir()
	os.WriteFile(filepath.Join(plain, "notes.txt"), []byte("not a queue"), 0o600)
	if n, found := pending(plain); found || n != 0 {
		t.Errorf("a directory without a queue: pending %d, found %v; want 0, false", n, found)
	}
	if _, _, err := Pending(filepath.Join(plain, "missing")); err == nil {
		t.Errorf("a missing directory: no error")
	}

	dir := t.TempDir()
	q := open(t, dir, Options{SegmentBytes: MinSegmentBytes})
	if n, found := pending(dir); !found || n != 0 {
		t.Errorf("a new queue: pending %d, found %v; want 0, true", n, found)
	}
	appendN(t, q, 0, 40)
	if len(segFiles(t, dir)) < 2 {
		t.Fatalf("the test wants records in more than one segment, has %d", len(segFiles(t, dir)))
	}
	all, _ := pending(dir)
	if want := q.Stats().Bytes; all == 0 || all > want {
		t.Errorf("40 records appended: pending %d, want more than 0 and at most Stats.Bytes %d", all, want)
	}
	recs, err := q.Peek(25)
	if err != nil || len(recs) != 25 {
		t.Fatalf("peek: %d records, %v", len(recs), err)
	}
	if err := q.Ack(25); err != nil {
		t.Fatal(err)
	}
	if some, _ := pending(dir); some == 0 || some >= all {
		t.Errorf("25 of 40 acknowledged: pending %d, want between 0 and %d", some, all)
	}
	drain(t, q, 100)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if n, found := pending(dir); !found || n != 0 {
		t.Errorf("every record acknowledged: pending %d, found %v; want 0, true", n, found)
	}
}
