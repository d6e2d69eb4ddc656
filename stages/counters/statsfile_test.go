package counters

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
	"time"
)

// TestStatsFileFormat checks the file against the C++ nsca_fast's format:
// the header, then the eight keys in its order, each a decimal number.
func TestStatsFileFormat(t *testing.T) {
	dir := t.TempDir()
	st := NewStats()
	st.Connections.Store(12)
	st.Open.Store(3)
	st.Emitted("command_file").Store(40)
	st.Emitted("spool").Store(2)
	st.Dropped(DropBadCRC).Store(5)
	f, err := StartStatsFile(dir, 2, st.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "nsca-stats-2.txt")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(fmt.Sprintf(`^\[nsca stats\]\npid=%d\nprocess_started_at=[0-9]{10}\nfile_created_at=[0-9]{10}\n`+
		`connections_per_sec=[0-9]+\nconnections_current=3\nconnections_counter=12\nreport_success=42\nreport_failed=5\n$`, os.Getpid()))
	if !want.Match(b) {
		t.Errorf("%s:\n%s\nwant %v", path, b, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v (%v), want 0644 for Munin's plugins", fi.Mode(), err)
	}
	f.Stop()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the file is still there after Stop: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left in dir_stats: %v", left)
	}
}

// TestStatsFileRewrites checks that the counters move in the file, that a
// removed file comes back, and that a file another process put in its
// place (a worker's successor) is neither overwritten nor removed.
func TestStatsFileRewrites(t *testing.T) {
	defer func(d time.Duration) { statsFileEvery = d }(statsFileEvery)
	statsFileEvery = 20 * time.Millisecond
	dir := t.TempDir()
	var conns atomic.Uint64
	snap := func() Snapshot { return Snapshot{Connections: conns.Load()} }
	f, err := StartStatsFile(dir, 0, snap)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, StatsFileName(0))
	conns.Store(7)
	waitContent(t, path, regexp.MustCompile(`\nconnections_counter=7\n`))
	os.Remove(path)
	waitContent(t, path, regexp.MustCompile(`\nconnections_counter=7\n`))
	successor := "[nsca stats]\npid=1\n"
	if err := os.WriteFile(path+".new", []byte(successor), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	conns.Store(8)
	time.Sleep(10 * statsFileEvery)
	f.Stop()
	if b, err := os.ReadFile(path); err != nil || string(b) != successor {
		t.Errorf("the successor's file became %q (%v)", b, err)
	}
}

func TestStatsFileUnwritable(t *testing.T) {
	if _, err := StartStatsFile(filepath.Join(t.TempDir(), "missing"), 0, func() Snapshot { return Snapshot{} }); err == nil {
		t.Fatal("no error for a missing directory")
	}
	if f, err := StartStatsFile("", 0, nil); f != nil || err != nil {
		t.Fatalf("empty dir: %v, %v", f, err)
	}
}

func waitContent(t *testing.T, path string, re *regexp.Regexp) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if re.Match(b) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q does not match %v", path, b, re)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
