package sink

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"nsca_fast/stages/codec"
)

// resultFiles returns the names of the result files in dir.
func resultFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if spoolName.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names
}

// eventually polls cond for up to two seconds: inotify events arrive a
// moment after the file operations that cause them.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func capItems(n int) []Item {
	its := make([]Item, n)
	for i := range its {
		its[i] = Item{Result: codec.Result{Host: "h", Service: "s", Output: string(rune('a' + i))}, Time: 1700000000}
	}
	return its
}

func TestSpoolCapQueuesThenRefuses(t *testing.T) {
	dir := t.TempDir()
	s := NewSpool(dir, 0o600).Capped(3, 2)
	eventually(t, "the watcher", func() bool { _, ok := s.files.Files(); return ok })

	n, err := s.Write(capItems(6))
	if n != 5 || !errors.Is(err, errSpoolFull) {
		t.Fatalf("Write(6) = %d, %v; want 5 taken (3 written, 2 queued) and errSpoolFull", n, err)
	}
	if got := len(resultFiles(t, dir)); got != 3 {
		t.Fatalf("%d result files, want the cap of 3", got)
	}
	if s.Queued() != 2 {
		t.Fatalf("Queued = %d, want 2", s.Queued())
	}
	// Our own files must be counted once, not again when their events come.
	eventually(t, "the count to settle", func() bool { c, _ := s.files.Files(); return c == 3 })
	time.Sleep(50 * time.Millisecond)
	if c, _ := s.files.Files(); c != 3 {
		t.Fatalf("count %d after the events, want 3", c)
	}

	// The core takes one file: one queued result goes out, in order.
	first := resultFiles(t, dir)[0]
	os.Remove(filepath.Join(dir, first))
	os.Remove(filepath.Join(dir, first+".ok"))
	eventually(t, "the core's delete to be seen", func() bool { c, _ := s.files.Files(); return c == 2 })
	w, err := s.Flush()
	if w != 1 || err != nil || s.Queued() != 1 {
		t.Fatalf("Flush = %d, %v, queued %d; want 1 written, 1 still queued", w, err, s.Queued())
	}
	if rest := s.Abandon(); len(rest) != 1 || rest[0].Result.Output != "e" {
		t.Fatalf("Abandon = %+v; want the last queued result (output e)", rest)
	}
}

func TestSpoolWatchSurvivesDirectoryReplacement(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "spool")
	os.Mkdir(dir, 0o700)
	s := NewSpool(dir, 0o600).Capped(10, 10)
	eventually(t, "the watcher", func() bool { _, ok := s.files.Files(); return ok })
	os.RemoveAll(dir)
	eventually(t, "the loss to be noticed", func() bool { _, ok := s.files.Files(); return !ok })
	if n, err := s.Write(capItems(1)); n != 1 || err != nil || s.Queued() != 1 {
		t.Fatalf("Write while the directory is gone = %d, %v, queued %d; want it queued", n, err, s.Queued())
	}
	os.Mkdir(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "cAAAAAA"), nil, 0o600) // a file the core has not taken yet
	eventually(t, "the directory to be watched again", func() bool { c, ok := s.files.Files(); return ok && c == 1 })
	if w, err := s.Flush(); w != 1 || err != nil {
		t.Fatalf("Flush after the directory came back = %d, %v", w, err)
	}
	if got := len(resultFiles(t, dir)); got != 2 {
		t.Fatalf("%d result files, want 2", got)
	}
}
