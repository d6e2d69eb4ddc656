package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// tmpfs mounts a tmpfs of the given size on a new directory for the test,
// or skips it when that is not allowed (not root).
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("skipped: cannot mount a %s tmpfs (needs root): %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// fillUntilFull appends records numbered from until the file system
// refuses one, and returns the number after the last stored.
func fillUntilFull(t *testing.T, q *Queue, from int) int {
	t.Helper()
	for i := from; ; i++ {
		if i-from > 1<<20 {
			t.Fatal("the file system never filled")
		}
		n, err := q.Append(rec(i))
		if n == 1 {
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append %d: %d, %v; want ENOSPC", i, n, err)
		}
		return i
	}
}

// drainFull is drain for a full file system: an Ack that cannot persist
// its position is an error of the test but the drain goes on, to see what
// a restart delivers.
func drainFull(t *testing.T, q *Queue, batch int) []int {
	t.Helper()
	var got []int
	for {
		recs, err := q.Peek(batch)
		if len(recs) == 0 {
			if err != nil {
				t.Errorf("peek: %v", err)
			}
			return got
		}
		for _, r := range recs {
			got = append(got, recNum(t, r))
		}
		if err := q.Ack(len(recs)); err != nil {
			t.Errorf("ack: %v", err)
		}
	}
}

// TestFullDiskNoDuplicates fills a small real tmpfs with a queue, drains
// it and restarts, several times: ENOSPC may hit the segment and the ack
// file, but no acknowledged record may come again after a restart, and
// the space of the drained segments must come back.
func TestFullDiskNoDuplicates(t *testing.T) {
	// One segment larger than the file system (the default 16 MiB on a
	// small disk) and several smaller ones.
	for _, seg := range []int64{1 << 20, 64 << 10} {
		t.Run(fmt.Sprintf("segment_bytes=%d", seg), func(t *testing.T) { fullDiskRounds(t, seg) })
	}
}

func fullDiskRounds(t *testing.T, segBytes int64) {
	root := tmpfs(t, "256k")
	dir := filepath.Join(root, "q")
	before := freeBytes(t, root)
	next, dups := 0, 0
	for round := range 4 {
		q := open(t, dir, Options{SegmentBytes: segBytes})
		if got := drainFull(t, q, 64); len(got) > 0 {
			dups += len(got)
			t.Errorf("round %d: %d records delivered again after the restart (%d..%d)", round, len(got), got[0], got[len(got)-1])
		}
		from := next
		next = fillUntilFull(t, q, next)
		if next == from {
			t.Errorf("round %d: nothing could be queued (%d bytes free)", round, freeBytes(t, root))
		}
		wantRange(t, drainFull(t, q, 64), from, next)
		if st := q.Stats(); st.Records != 0 {
			t.Fatalf("round %d: stats after the drain %+v", round, st)
		}
		if err := q.Close(); err != nil {
			t.Logf("round %d: close: %v", round, err)
		}
		// What the drained queue may keep: the ack and lock files, and
		// the header of an empty segment.
		if free := freeBytes(t, root); free < before-3*int64(os.Getpagesize()) {
			t.Errorf("round %d: %d bytes free after the drain, %d before the queue: the space did not come back", round, free, before)
		}
	}
	if dups > 0 {
		t.Fatalf("%d duplicates over 4 restarts", dups)
	}
}
