package sink

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// smallFS mounts a tmpfs with the given options (size=..., nr_inodes=...)
// on a new directory, for real ENOSPC; it skips the test when it cannot
// (not root, no mount permission in this container).
func smallFS(t *testing.T, opts string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Skipf("cannot mount a tmpfs (%s) for a full-disk test: %v", opts, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	return dir
}

// assertWholeLines checks that the file holds exactly the lines of its, in
// order, and nothing else: no partial line, no line glued to another.
func assertWholeLines(t *testing.T, path string, its []Item) {
	t.Helper()
	got := mustRead(t, path)
	if want := commandLines(its); !bytes.Equal(got, want) {
		t.Fatalf("%s holds %d bytes (%d newlines), want the %d lines reported written (%d bytes); first difference at %d",
			path, len(got), bytes.Count(got, []byte("\n")), len(its), len(want), firstDiffBytes(got, want))
	}
}

// writeUntilFull writes batches of its to s until a write fails, and
// returns the items reported written and the error.
func writeUntilFull(t *testing.T, s Sink, its []Item, batch int) ([]Item, error) {
	t.Helper()
	var written []Item
	for off := 0; off < len(its); off += batch {
		b := its[off:min(off+batch, len(its))]
		n, err := s.Write(b)
		written = append(written, b[:n]...)
		if err != nil {
			return written, err
		}
	}
	t.Fatalf("%d items written and the file system never filled", len(its))
	return nil, nil
}

// The dump file on a full disk: a write cut short counts the lines that
// reached the file, and leaves no partial line; when space returns, the
// next lines start fresh.
func TestDumpFullDisk(t *testing.T) {
	dir := smallFS(t, "size=256k")
	path := filepath.Join(dir, "nsca.dump")
	d := NewDump(path)
	defer d.Close()
	its := items(2000, 300) // about 700 KB
	written, err := writeUntilFull(t, d, its, 37)
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("the write that filled the disk returned %v, want ENOSPC", err)
	}
	assertWholeLines(t, path, written)
	t.Logf("%d of %d lines written before ENOSPC; the file holds exactly those", len(written), len(its))

	// The disk is full: nothing more is taken, and nothing is left half.
	n, err := d.Write(its[len(written):][:5])
	written = append(written, its[len(written):][:n]...)
	if err == nil {
		t.Fatalf("a write to a full disk succeeded")
	}
	assertWholeLines(t, path, written)

	// Space returns: writing resumes, and the first line after the outage
	// is not glued onto anything.
	if err := os.Truncate(path, 0); err != nil { // the operator rotates the dump file
		t.Fatal(err)
	}
	rest := its[len(written):][:50]
	mustWrite(t, d, rest)
	assertWholeLines(t, path, rest)
}

// A regular command file (append_to_file=1) on a full disk: the lines
// that reached it are reported written, so they are not sent to the next
// sink too, and the partial line is cut off.
func TestCommandFileRegularFullDisk(t *testing.T) {
	dir := smallFS(t, "size=128k")
	path := filepath.Join(dir, "nagios.cmd")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := NewCommandFile(path, true, false)
	its := items(1000, 300)
	written, err := writeUntilFull(t, c, its, 64) // batches over PIPE_BUF: several chunks each
	if err == nil || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("the write that filled the disk returned %v, want ENOSPC", err)
	}
	assertWholeLines(t, path, written)
	t.Logf("%d of %d lines written before ENOSPC; the file holds exactly those", len(written), len(its))

	// Space returns: once the back-off has passed the file takes results
	// again, starting on a fresh line.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	rest := its[len(written):][:20]
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Write(rest)
		if err == nil && n == len(rest) {
			break
		}
		if !errors.Is(err, errBackoff) || time.Now().After(deadline) {
			t.Fatalf("Write after space returned = %d, %v", n, err)
		}
		var b *BackoffError
		if !errors.As(err, &b) || b.Cause == nil || !strings.Contains(b.Cause.Error(), "no space") {
			t.Errorf("the back-off error %q does not carry its cause (ENOSPC)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	assertWholeLines(t, path, rest)
}

// A result file whose .ok cannot be created (no inode left) is removed:
// the result goes to the next sink, and only there.
func TestSpoolOKFailureLeavesNoFile(t *testing.T) {
	dir := smallFS(t, "size=1m,nr_inodes=8")
	// Use up the inodes but one: the result file takes it, and its .ok
	// finds none.
	for i := 0; ; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("x%d", i)))
		if err != nil {
			if i == 0 {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(dir, fmt.Sprintf("x%d", i-1)))
			break
		}
		f.Close()
	}
	s := NewSpool(dir, 0o600)
	n, err := s.Write(items(1, 10))
	if n != 0 || !errors.Is(err, errSpool) || !strings.Contains(err.Error(), ".ok") {
		t.Fatalf("Write = %d, %v; want 0 and the failed .ok", n, err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if isResultName(e.Name()) || strings.HasPrefix(e.Name(), "t") {
			t.Errorf("%s left behind after its .ok failed: the core could read the result twice", e.Name())
		}
	}
}

// A FIFO whose reader stopped: once a write has waited FullWait in vain,
// later writes do not wait again until the core reads, even when a small
// write fits into room left over in the pipe.
func TestCommandFileCongestionNeedsReading(t *testing.T) {
	c, rfd := stalledFIFO(t)
	c.Aggregate = true
	c.FullWait = time.Second
	// Fill the pipe with writes that each take a page and leave 96 bytes
	// of it free, so that a short line still fits afterwards.
	wfd, err := unix.Open(c.Path, unix.O_WRONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 4000)
	for {
		if _, err := unix.Write(wfd, chunk); err != nil {
			break
		}
	}
	unix.Close(wfd)
	big := items(20, 1000)
	start := time.Now()
	if _, err := c.Write(big); !errors.Is(err, errFull) {
		t.Fatalf("Write to a full pipe = %v, want errFull", err)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("the first write to the full pipe gave up after %v, want FullWait (1s)", took)
	}
	waitBackoff := func() {
		for c.retry.Left() > 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitBackoff()
	small := []Item{item(1, "h", "s", 0, "x")}
	if n, err := c.Write(small); n != 1 || err != nil {
		t.Fatalf("a short line into the room left = %d, %v; want it written", n, err)
	}
	start = time.Now()
	if _, err := c.Write(big); !errors.Is(err, errFull) {
		t.Fatalf("Write = %v, want errFull", err)
	}
	if took := time.Since(start); took > 300*time.Millisecond {
		t.Errorf("after a short write that fitted, the next batch waited %v again for a core that reads nothing", took)
	}
	// The core reads: the pipe is no longer congested.
	drain(t, rfd)
	waitBackoff()
	if n, err := c.Write(big); n != len(big) || err != nil {
		t.Errorf("Write after the core read = %d, %v", n, err)
	}
}
