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

// fillFS takes every free byte of dir's file system with a file and
// returns a function removing it.
func fillFS(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	for _, n := range []int{1024, 256, 64, 1} { // the last partial page
		g, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		for {
			if _, err := g.Write(buf[:n]); err != nil {
				break
			}
		}
		g.Close()
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFullDiskAtOpen: a queue opened with one page left on its file
// system. That page must go to the ack file, not to a segment whose
// records could then never be acknowledged durably: the queue stores
// nothing (ENOSPC, for the fallback) until there is space, and nothing
// comes twice.
func TestFullDiskAtOpen(t *testing.T) {
	root := tmpfs(t, "64k")
	dir := filepath.Join(root, "q")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	free := fillFS(t, root)
	filler := filepath.Join(root, "filler")
	fi, err := os.Stat(filler)
	if err != nil {
		t.Fatal(err)
	}
	page := int64(os.Getpagesize())
	if err := os.Truncate(filler, (fi.Size()/page-1)*page); err != nil {
		t.Fatal(err)
	}
	q := open(t, dir, Options{})
	stored := fillUntilFull(t, q, 0)
	wantRange(t, drainFull(t, q, 4), 0, stored)
	q.Close()
	q = open(t, dir, Options{})
	defer q.Close()
	if again := drainFull(t, q, 4); len(again) > 0 {
		t.Fatalf("%d of the %d records stored came again after the restart", len(again), stored)
	}
	free()
	appendN(t, q, 100, 3)
	wantRange(t, drainFull(t, q, 2), 100, 103)
}

// TestFullDiskLegacyAck: a queue left with an empty ack file (as written
// before the ack file was reserved) on a file system that is full: the
// drained segment is removed before the position is written, so the write
// finds space and nothing comes again after a restart.
func TestFullDiskLegacyAck(t *testing.T) {
	root := tmpfs(t, "128k")
	dir := filepath.Join(root, "q")
	q := open(t, dir, Options{})
	appendN(t, q, 0, 100)
	q.Close()
	ack := filepath.Join(dir, ackName)
	if err := os.Remove(ack); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ack, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	fillFS(t, root)
	q = open(t, dir, Options{})
	var got []int
	for {
		recs, _ := q.Peek(30)
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			got = append(got, recNum(t, r))
		}
		q.Ack(len(recs)) // fails until the segment is gone
	}
	wantRange(t, got, 0, 100)
	q.Close()
	q = open(t, dir, Options{})
	defer q.Close()
	if again := drainFull(t, q, 30); len(again) > 0 {
		t.Fatalf("%d records delivered again after the restart", len(again))
	}
}
