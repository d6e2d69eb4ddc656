package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestSinkFullFIFOFallsBackToSpool: a core that stops reading fills the
// FIFO; the daemon waits a bounded time, then sends the rest to the spool.
// Every result ends up in exactly one place, and the FIFO holds only whole
// lines.
func TestSinkFullFIFOFallsBackToSpool(t *testing.T) {
	// Lines shorter than PIPE_BUF are written atomically; longer ones (a
	// 4000-byte output escapes to a line of about 4.1 KB) are not.
	for _, size := range []int{1000, 4000} {
		t.Run(fmt.Sprintf("output=%d", size), func(t *testing.T) {
			t.Parallel()
			fullFIFO(t, size)
		})
	}
}

func fullFIFO(t *testing.T, size int) {
	dir := t.TempDir()
	spool := makeSpoolDir(t, dir)
	fifo := makeFIFO(t, dir)
	// Hold the FIFO open for reading, but read nothing yet.
	held := openRDWR(t, fifo)
	defer held.Close()
	d, cl := startKeyed(t, 1, shortPassword, Config{"command_file": fifo, "aggregate_writes": "1", "check_result_path": spool})
	n := 160000 / size // well over a 64 KB pipe
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "full%02d\tsvc\t0\t%s\x17", i, longText(size))
	}
	cl.send(t, d.Port, in.String(), n)

	// Wait until the results stop moving: the FIFO is full and the rest
	// went to the spool.
	count := func() int { return countOKs(t, spool) }
	deadline := time.Now().Add(arriveTimeout)
	last, stable := -1, 0
	for stable < 15 && time.Now().Before(deadline) {
		c := count()
		if c == last && c > 0 {
			stable++
		} else {
			stable = 0
		}
		last = c
		time.Sleep(100 * time.Millisecond)
	}
	if count() == 0 {
		// Diagnose without reading (a read would let the daemon go on).
		unread := -1
		if rc, err := held.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) {
				var n int32
				if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e == 0 {
					unread = int(n)
				}
			})
		}
		line := len(serviceLine("full00", "svc", 0, longText(size))) + len("[1234567890] ") + 1
		t.Fatalf("nothing reached the spool within %v of the FIFO filling up (the full-pipe wait should be about 1 s); "+
			"the FIFO holds %d unread bytes = %d whole lines of %d bytes + %d bytes of a partial line",
			arriveTimeout, unread, unread/line, line, unread%line)
	}
	// Now the core reads again: what is in the FIFO.
	r := newFIFOReader(t, held)
	spooled := count()
	inFIFO := n - spooled
	if spooled == 0 || inFIFO <= 0 {
		t.Fatalf("%d results in the spool and %d left for the FIFO: want both to have some", spooled, inFIFO)
	}
	fifoLines := r.Collect(t, inFIFO)
	d.Stop()
	held.Close()
	<-r.done
	fifoLines = append(fifoLines, r.Pending()...)
	seen := map[string]int{}
	for _, l := range stripTimes(t, fifoLines, 0, 1<<40) {
		var i int
		if _, err := fmt.Sscanf(l, "PROCESS_SERVICE_CHECK_RESULT;full%02d;", &i); err != nil {
			t.Errorf("a FIFO line is not a whole result: %s", abbrev(l))
			continue
		}
		if want := serviceLine(fmt.Sprintf("full%02d", i), "svc", 0, longText(size)); l != want {
			t.Errorf("FIFO line for full%02d is damaged: %s", i, abbrev(l))
		}
		seen[fmt.Sprintf("full%02d", i)]++
	}
	for _, f := range listSpool(t, spool) {
		seen[f.host]++
	}
	for i := range n {
		h := fmt.Sprintf("full%02d", i)
		if seen[h] != 1 {
			t.Errorf("%s was delivered %d times (FIFO and spool together), want once", h, seen[h])
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct results delivered, want %d", len(seen), n)
	}
}

// TestShutdownWithoutReader: results that no sink can take do not keep the
// daemon from exiting promptly on SIGTERM.
func TestShutdownWithoutReader(t *testing.T) {
	fifo := makeFIFO(t, t.TempDir())
	d, cl := startKeyed(t, 1, shortPassword, Config{"command_file": fifo})
	cl.send(t, d.Port, "nobody\tsvc\t0\tlistening\x17nobody\t1\thost\x17", 2)
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	d.Stop() // asserts exit 0 within stopTimeout
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the daemon took %v to exit on SIGTERM", took)
	}
	if !strings.Contains(d.Stderr(), "nobody") {
		t.Errorf("the dropped results are not logged by host name:\n%s", d.Stderr())
	}
}

// TestMaxConnections: connections beyond max_connections are closed at
// once, without an init packet; the daemon serves again once they end.
func TestMaxConnections(t *testing.T) {
	d, cmd := startFileDaemon(t, 1, shortPassword, Config{"max_connections": "2"})
	time.Sleep(300 * time.Millisecond) // let the daemon see the end of startDaemon's probe connection
	a := dialRaw(t, d.Port, "")
	b := dialRaw(t, d.Port, "")
	c, err := dialLocal(d.Port, "", time.Second)
	if err == nil {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(make([]byte, initPacketSize))
		c.Close()
		if err == nil {
			t.Errorf("a third connection with max_connections=2 got %d bytes of an init packet", n)
		}
	}
	a.c.Close()
	b.c.Close()
	time.Sleep(200 * time.Millisecond)
	lo := now()
	Client{Password: shortPassword, Method: 1}.send(t, d.Port, "maxconn\tsvc\t0\tserved again\x17", 1)
	deliverAll(t, d, cmd, lo, []string{serviceLine("maxconn", "svc", 0, "served again")})
}

// TestSpoolMaxFiles: with check_result_path_max_files the spool never
// holds more unprocessed files than that; results wait and follow as the
// core takes files away.
func TestSpoolMaxFiles(t *testing.T) {
	spool := t.TempDir()
	d, cl := startKeyed(t, 1, shortPassword, Config{"check_result_path": spool, "check_result_path_max_files": "2"})
	const n = 5
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "cap%d\tsvc\t0\tresult %d\x17", i, i)
	}
	cl.send(t, d.Port, in.String(), n)
	got := map[string]bool{}
	deadline := time.Now().Add(arriveTimeout)
	for len(got) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d results came through the capped spool within %v", len(got), n, arriveTimeout)
		}
		entries, names := readDirNames(t, spool)
		results := 0
		for _, e := range entries {
			if spoolName.MatchString(e.Name()) {
				results++
			}
		}
		if results > 2 {
			t.Errorf("%d result files in the spool, check_result_path_max_files is 2", results)
		}
		// Play the core: take away the files that have their .ok.
		for name := range names {
			if !spoolName.MatchString(name) || !names[name+".ok"] {
				continue
			}
			b, err := os.ReadFile(filepath.Join(spool, name))
			if err != nil {
				t.Fatal(err)
			}
			if m := spoolHostRe.FindSubmatch(b); m != nil {
				got[string(m[1])] = true
			}
			os.Remove(filepath.Join(spool, name+".ok"))
			os.Remove(filepath.Join(spool, name))
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.Stop()
	for i := range n {
		if !got[fmt.Sprintf("cap%d", i)] {
			t.Errorf("cap%d never arrived", i)
		}
	}
}
