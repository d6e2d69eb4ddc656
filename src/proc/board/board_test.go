package board

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// pair returns a board and a second mapping of the same memory, as the
// supervisor and its worker each hold one.
func pair(t *testing.T) (writer, reader *Board) {
	t.Helper()
	reader, fd, err := Create("board-test")
	if err != nil {
		t.Fatal(err)
	}
	writer, err = Open(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		writer.Close()
		reader.Close()
	})
	return writer, reader
}

func TestPublishRead(t *testing.T) {
	w, r := pair(t)
	if got, ok := r.Read(); ok {
		t.Fatalf("a fresh board reads %q", got)
	}
	for i, rec := range []string{"first", "", "a record longer than the two before it", "x"} {
		if err := w.Publish([]byte(rec)); err != nil {
			t.Fatal(err)
		}
		got, ok := r.Read()
		if !ok || string(got) != rec {
			t.Fatalf("after publish %d read %q, %v; want %q", i, got, ok, rec)
		}
	}
}

// A writer killed in the middle of a write leaves the record before it.
func TestTornWriteKeepsThePreviousRecord(t *testing.T) {
	w, r := pair(t)
	w.Publish([]byte("whole"))
	w.Publish([]byte("also whole"))
	// What a write of the third record leaves when it stops after its
	// first store: record 3 % 2 marked as being written.
	next := w.version + 1
	w.record(next % 2)[0] = 2*next - 1
	got, ok := r.Read()
	if !ok || string(got) != "also whole" {
		t.Fatalf("read %q, %v; want the last whole record", got, ok)
	}
}

func TestTooLarge(t *testing.T) {
	w, r := pair(t)
	w.Publish([]byte("kept"))
	if err := w.Publish(make([]byte, MaxRecord+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("publishing %d bytes: %v, want ErrTooLarge", MaxRecord+1, err)
	}
	if got, _ := r.Read(); string(got) != "kept" {
		t.Fatalf("read %q after a refused publish", got)
	}
	if err := w.Publish(bytes.Repeat([]byte{7}, MaxRecord)); err != nil {
		t.Fatalf("publishing MaxRecord bytes: %v", err)
	}
	if got, _ := r.Read(); len(got) != MaxRecord {
		t.Fatalf("read %d bytes, want %d", len(got), MaxRecord)
	}
}

func TestOpenRefusesOtherDescriptors(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "not-a-board")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := Open(fd); err == nil {
		b.Close()
		t.Fatal("Open took an empty file for a board")
	}
}

// record makes a self-checking record: its length and every byte follow
// from v, so a reader can tell a mix of two records from a whole one.
func record(v int) []byte {
	return bytes.Repeat([]byte{byte(v)}, 1+(v*37)%3000)
}

// While the writer publishes, every read is one whole record, and the
// records read never go back in time.
func TestConcurrentReadsSeeWholeRecords(t *testing.T) {
	w, r := pair(t)
	const n = 20000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := 1; v <= n; v++ {
			w.Publish(record(v))
		}
	}()
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := 0
			for last < n {
				got, ok := r.Read()
				if !ok {
					continue
				}
				// Which record is it? Only one not older than the last
				// one read may be.
				found := 0
				for c := max(last, 1); c <= n; c++ {
					if byte(c) == got[0] && bytes.Equal(got, record(c)) {
						found = c
						break
					}
				}
				if found == 0 {
					errs <- fmt.Errorf("read a record of %d bytes that no publish wrote whole (after record %d)", len(got), last)
					return
				}
				last = found
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
