package emit

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"nsca_fast/conf"
)

func TestLeftBehindBy(t *testing.T) {
	for _, tc := range []struct {
		dir           string
		slot, workers int
		want          bool
	}{
		{"gearman-0", -1, 0, true},
		{"gearman-7", -1, 0, true},
		{"gearman", -1, 0, false}, // the single process's own
		{"gearman", 0, 2, true},
		{"gearman", 1, 2, false},
		{"gearman-0", 0, 2, false}, // a running slot's own
		{"gearman-1", 0, 2, false},
		{"gearman-2", 0, 2, true},
		{"gearman-3", 0, 2, false},
		{"gearman-3", 1, 2, true},
		{"gearman-4", 0, 2, true},
		{"gearman-2", 0, 1, true},
		{"gearman-02", 0, 1, false}, // not a name this daemon makes
		{"gearman-x", -1, 0, false},
		{"gearman-", -1, 0, false},
		{"gearman2-1", -1, 0, false},
		{"icinga2-1", -1, 0, false},
	} {
		if got := leftBehindBy(tc.dir, "gearman", tc.slot, tc.workers); got != tc.want {
			t.Errorf("leftBehindBy(%q, slot %d of %d) = %v, want %v", tc.dir, tc.slot, tc.workers, got, tc.want)
		}
	}
}

func TestLeftBehindDirs(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"gearman", "gearman-0", "gearman-1", "gearman-2", "gearman-3", "icinga2-2"} {
		if err := os.Mkdir(filepath.Join(root, name), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "gearman-5"), nil, 0o600); err != nil { // not a directory
		t.Fatal(err)
	}
	cfg := &conf.Config{QueueDirectory: root, Workers: 2}
	got, err := leftBehindDirs(cfg, 0, "gearman")
	if want := []string{filepath.Join(root, "gearman"), filepath.Join(root, "gearman-2")}; err != nil || !slices.Equal(got, want) {
		t.Errorf("slot 0 of 2 takes %q, %v; want %q", got, err, want)
	}
	cfg.QueueDirectory = filepath.Join(root, "missing")
	if got, err := leftBehindDirs(cfg, 0, "gearman"); err != nil || len(got) != 0 {
		t.Errorf("no queue_directory yet: %q, %v; want nothing", got, err)
	}
}
