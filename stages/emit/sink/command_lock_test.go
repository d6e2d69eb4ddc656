package sink

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/codec"
)

// TestCommandFileLockShared: with Lock (several workers writing one FIFO),
// a batch the FIFO takes whole shares its lock with the other writers of
// such batches, so two workers never wait for each other, while a line
// longer than PIPE_BUF, which takes more than one write(2), waits until
// no other writer holds the lock and goes out whole.
func TestCommandFileLockShared(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "nagios.cmd")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	reader, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	// Another worker, in the middle of a batch of its own.
	other, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(other)
	if err := unix.Flock(other, unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	c := NewCommandFile(fifo, false, false)
	c.Lock = true
	defer c.Close()
	write := func(output string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := c.Write([]Item{{Result: codec.Result{Host: "web", Service: "disk", Output: output}, Time: 1}})
			done <- err
		}()
		return done
	}
	select {
	case err := <-write("short"):
		if err != nil {
			t.Fatalf("short batch: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a short batch waited for another worker's batch")
	}
	long := strings.Repeat("x", pipeBuf+100)
	done := write(long)
	select {
	case err := <-done:
		t.Fatalf("a line of %d bytes went out while another worker held the lock (err %v)", len(long), err)
	case <-time.After(300 * time.Millisecond):
	}
	unix.Flock(other, unix.LOCK_UN)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("long line: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long line still waited once the other worker let go")
	}
	lines := bufio.NewScanner(reader)
	lines.Buffer(make([]byte, 2*pipeBuf), 2*pipeBuf)
	for _, want := range []string{";web;disk;0;short", ";web;disk;0;" + long} {
		if !lines.Scan() {
			t.Fatalf("the FIFO ended before %q", want[:min(len(want), 40)])
		}
		if got := lines.Text(); !strings.HasSuffix(got, want) {
			t.Errorf("line %q..., want one ending in %q...", got[:min(len(got), 60)], want[:min(len(want), 40)])
		}
	}
}
