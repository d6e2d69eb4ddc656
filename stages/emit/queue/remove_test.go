package queue

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRemove: a queue with records left is not removed (and loses none);
// an emptied one is, directory and all, and nothing is left set aside; a
// queue opened at its path afterwards starts afresh.
func TestRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gearman-3")
	q := open(t, dir, Options{})
	appendN(t, q, 0, 3)
	if err := q.Remove(); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Remove with 3 records left: %v, want ErrNotEmpty", err)
	}
	if got := drain(t, q, 10); len(got) != 3 {
		t.Fatalf("the queue lost records to a refused Remove: drained %v", got)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second Open while the first holds the queue: %v, want ErrLocked", err)
	}
	if err := q.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the removed queue's directory: %v, want it gone", err)
	}
	if _, err := os.Stat(dir + removingSuffix); !os.IsNotExist(err) {
		t.Errorf("the directory set aside: %v, want it gone", err)
	}
	fresh := open(t, dir, Options{})
	appendN(t, fresh, 10, 2)
	if got := drain(t, fresh, 10); len(got) != 2 || got[0] != 10 {
		t.Errorf("a queue opened after the removal drained %v, want [10 11]", got)
	}
	fresh.Close()
}
