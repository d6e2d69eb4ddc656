package sink

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func items(n int, outLen int) []Item {
	its := make([]Item, n)
	for i := range its {
		out := fmt.Sprintf("result %04d ", i)
		if pad := outLen - len(out); pad > 0 {
			out += strings.Repeat(string(rune('a'+i%26)), pad)
		}
		svc := fmt.Sprintf("svc%d", i)
		if i%5 == 4 {
			svc = "" // some host checks
		}
		its[i] = item(1762153445+int64(i), fmt.Sprintf("host%d", i), svc, int16(i%4), out)
	}
	return its
}

func commandLines(its []Item) []byte {
	var b []byte
	for _, it := range its {
		b = AppendCommand(b, it)
	}
	return b
}

func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nsca.cmd")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	return p
}

// openReader opens the reading side without blocking (a FIFO's O_RDONLY
// open blocks for a writer unless O_NONBLOCK).
func openReader(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open reader: %v", err)
	}
	return fd
}

// drain reads everything currently in the pipe.
func drain(t *testing.T, fd int) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Read(fd, buf)
		if n > 0 {
			out = append(out, buf[:n]...)
			continue
		}
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN || n == 0 {
			return out
		}
		t.Fatalf("read fifo: %v", err)
	}
}

func TestCommandFileFIFOInOrder(t *testing.T) {
	path := mkfifo(t)
	rfd := openReader(t, path)
	defer unix.Close(rfd)

	c := NewCommandFile(path, false, false)
	defer c.Close()
	its := items(3, 20)
	n, err := c.Write(its)
	if n != 3 || err != nil {
		t.Fatalf("Write = %d, %v; want 3, nil", n, err)
	}
	if c.Name() != "fifo" {
		t.Errorf("Name() = %q, want fifo", c.Name())
	}
	got := drain(t, rfd)
	if want := commandLines(its); !bytes.Equal(got, want) {
		t.Errorf("fifo content:\n%q\nwant\n%q", got, want)
	}

	// A batch far over PIPE_BUF: everything arrives, in order.
	big := items(300, 80)
	n, err = c.Write(big)
	if n != len(big) || err != nil {
		t.Fatalf("Write(300) = %d, %v", n, err)
	}
	got = drain(t, rfd)
	want := commandLines(big)
	if len(want) <= 4096 {
		t.Fatalf("test batch is only %d bytes", len(want))
	}
	if !bytes.Equal(got, want) {
		t.Errorf("big batch: got %d bytes, want %d; first difference at %d", len(got), len(want), firstDiffBytes(got, want))
	}
}

// mustWrite writes its to s, failing the test unless all were written.
func mustWrite(t *testing.T, s Sink, its []Item) {
	t.Helper()
	if n, err := s.Write(its); n != len(its) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
}

func mustClose(t *testing.T, s Sink) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeAfterBackoff writes its to c, trying again every 20 ms for up to 2 s
// while c is backing off.
func writeAfterBackoff(c *CommandFile, its []Item) (n int, err error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		n, err = c.Write(its)
		if !errors.Is(err, errBackoff) || time.Now().After(deadline) {
			return n, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func firstDiffBytes(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// With a one-page pipe and a reader reading concurrently, every read returns
// whole writes; so if each write ends on a line boundary, each chunk read
// ends in a newline and is at most PIPE_BUF bytes.
func TestCommandFileWritesEndOnLineBoundaries(t *testing.T) {
	path := mkfifo(t)
	rfd := openReader(t, path)
	defer unix.Close(rfd)
	if _, err := unix.FcntlInt(uintptr(rfd), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Skipf("F_SETPIPE_SZ: %v", err)
	}

	var (
		mu     sync.Mutex
		chunks [][]byte
		stop   = make(chan struct{})
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		buf := make([]byte, 1<<16)
		for {
			fds := []unix.PollFd{{Fd: int32(rfd), Events: unix.POLLIN}}
			unix.Poll(fds, 5)
			n, _ := unix.Read(rfd, buf)
			if n > 0 {
				mu.Lock()
				chunks = append(chunks, bytes.Clone(buf[:n]))
				mu.Unlock()
				continue
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()

	c := NewCommandFile(path, false, true)
	c.FullWait = 5 * time.Second
	defer c.Close()
	var all []Item
	for round := range 3 {
		its := items(120, 50+round*40)
		all = append(all, its...)
		if n, err := c.Write(its); n != len(its) || err != nil {
			t.Fatalf("round %d: Write = %d, %v", round, n, err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	<-done

	mu.Lock()
	defer mu.Unlock()
	var got []byte
	for i, ch := range chunks {
		if len(ch) > 4096 {
			t.Errorf("chunk %d is %d bytes, over PIPE_BUF", i, len(ch))
		}
		if ch[len(ch)-1] != '\n' {
			t.Errorf("chunk %d (%d bytes) does not end on a line boundary: ...%q", i, len(ch), ch[max(0, len(ch)-30):])
		}
		got = append(got, ch...)
	}
	if want := commandLines(all); !bytes.Equal(got, want) {
		t.Errorf("content: got %d bytes, want %d; first difference at %d", len(got), len(want), firstDiffBytes(got, want))
	}
	if len(chunks) < 3 {
		t.Errorf("only %d chunks read: the pipe size did not constrain the writes", len(chunks))
	}
}

func TestCommandFileNoReader(t *testing.T) {
	path := mkfifo(t)
	c := NewCommandFile(path, false, false)
	defer c.Close()
	n, err := c.Write(items(2, 10))
	if n != 0 || !errors.Is(err, errNoReader) {
		t.Fatalf("Write without a reader = %d, %v; want 0, errNoReader", n, err)
	}
	// Back-off: an immediate retry does not even try.
	n, err = c.Write(items(2, 10))
	if n != 0 || !errors.Is(err, errBackoff) {
		t.Fatalf("immediate retry = %d, %v; want 0, errBackoff", n, err)
	}
	// Once the core is back and the back-off has passed, results flow again.
	rfd := openReader(t, path)
	defer unix.Close(rfd)
	its := items(2, 10)
	n, err = writeAfterBackoff(c, its)
	if n != 2 || err != nil {
		t.Fatalf("after back-off = %d, %v", n, err)
	}
	if got, want := drain(t, rfd), commandLines(its); !bytes.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestCommandFileMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such.cmd")
	c := NewCommandFile(path, true, false)
	defer c.Close()
	n, err := c.Write(items(1, 10))
	if n != 0 || !errors.Is(err, errMissing) {
		t.Fatalf("Write = %d, %v; want 0, errMissing", n, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("command file was created (stat: %v); stock never creates it", err)
	}
	if n, err := c.Write(items(1, 10)); n != 0 || !errors.Is(err, errBackoff) {
		t.Errorf("immediate retry = %d, %v; want 0, errBackoff", n, err)
	}
}

func TestCommandFileRegularAppend(t *testing.T) {
	for _, aggregate := range []bool{false, true} {
		t.Run(fmt.Sprintf("aggregate=%v", aggregate), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "nsca.cmd")
			if err := os.WriteFile(path, []byte("existing line\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			c := NewCommandFile(path, true, aggregate)
			a, b := items(5, 30), items(300, 60)
			mustWrite(t, c, a)
			if c.Name() != "file" {
				t.Errorf("Name() = %q, want file", c.Name())
			}
			mustWrite(t, c, b)
			mustClose(t, c)
			got := mustRead(t, path)
			want := append([]byte("existing line\n"), commandLines(append(a, b...))...)
			if !bytes.Equal(got, want) {
				t.Errorf("file: got %d bytes, want %d; first difference at %d", len(got), len(want), firstDiffBytes(got, want))
			}
		})
	}
}

// stalledFIFO is a CommandFile writing to a FIFO whose reader reads
// nothing until the test drains rfd; a Write gives up after 100 ms of a
// full pipe. Cleanup closes both.
func stalledFIFO(t *testing.T) (c *CommandFile, rfd int) {
	path := mkfifo(t)
	rfd = openReader(t, path)
	t.Cleanup(func() { unix.Close(rfd) })
	c = NewCommandFile(path, false, false)
	c.FullWait = 100 * time.Millisecond
	t.Cleanup(func() { c.Close() })
	return c, rfd
}

// A FIFO whose reader does not read: the pipe fills, Write waits FullWait
// and gives up, reporting how many results went in whole.
func TestCommandFileFull(t *testing.T) {
	c, rfd := stalledFIFO(t)
	its := items(400, 1000) // about 400 KB, far over a 64 KiB pipe
	start := time.Now()
	n, err := c.Write(its)
	took := time.Since(start)
	if !errors.Is(err, errFull) {
		t.Fatalf("Write = %d, %v; want errFull", n, err)
	}
	if n <= 0 || n >= len(its) {
		t.Errorf("n = %d, want 0 < n < %d", n, len(its))
	}
	if took < 90*time.Millisecond || took > 2*time.Second {
		t.Errorf("Write took %v with FullWait 100ms", took)
	}
	got := drain(t, rfd)
	if want := commandLines(its[:n]); !bytes.Equal(got, want) {
		t.Errorf("pipe holds %d bytes, want exactly the %d lines reported written (%d bytes); first difference at %d",
			len(got), n, len(want), firstDiffBytes(got, want))
	}
	if n2, err := c.Write(its[n:]); n2 != 0 || !errors.Is(err, errBackoff) {
		t.Errorf("immediate retry = %d, %v; want 0, errBackoff", n2, err)
	}
}

// Lines longer than PIPE_BUF (plugin output near its 4095-byte maximum) are
// written alone, and such a write is not atomic: when the pipe has room for
// only part of it, the kernel takes part of the line. The sink must not
// leave a partial line in the FIFO when it gives up, because the core would
// then read it glued to the next line written, and the emitter also passes
// the "unwritten" result on to the next sink.
func TestCommandFileFullLongLinesNoPartialLine(t *testing.T) {
	c, rfd := stalledFIFO(t)
	its := items(40, 4095) // each line about 4150 bytes
	if l := len(AppendCommand(nil, its[0])); l <= 4096 {
		t.Fatalf("line is only %d bytes", l)
	}
	n, err := c.Write(its)
	if !errors.Is(err, errFull) {
		t.Fatalf("Write = %d, %v; want errFull", n, err)
	}
	got := drain(t, rfd)
	want := commandLines(its[:n])
	if len(got) > 0 && got[len(got)-1] != '\n' {
		t.Errorf("the FIFO ends in a partial line: Write reported %d lines (%d bytes) written, the pipe holds %d bytes; "+
			"the extra %d bytes are the start of line %d, which the core will read glued to the next line",
			n, len(want), len(got), len(got)-len(want), n+1)
	}
	if !bytes.Equal(got, want) && bytes.HasPrefix(got, want) {
		t.Errorf("Write reported %d results written but %d more bytes of result %d are in the FIFO (it will also be handed to the next sink: duplicate)",
			n, len(got)-len(want), n+1)
	}
}

// With aggregate_writes the FIFO stays open; when the core goes away the
// next write fails with EPIPE (not a SIGPIPE death), and once the core is
// back and the back-off has passed, writing resumes.
func TestCommandFileAggregateReaderGone(t *testing.T) {
	path := mkfifo(t)
	rfd := openReader(t, path)
	c := NewCommandFile(path, false, true)
	defer c.Close()
	a := items(3, 10)
	mustWrite(t, c, a)
	if got := drain(t, rfd); !bytes.Equal(got, commandLines(a)) {
		t.Errorf("got %q", got)
	}
	unix.Close(rfd)

	n, err := c.Write(items(2, 10))
	if n != 0 || !errors.Is(err, errNoReader) {
		t.Fatalf("Write after the reader left = %d, %v; want 0, errNoReader", n, err)
	}
	rfd = openReader(t, path)
	defer unix.Close(rfd)
	b := items(2, 10)
	n, err = writeAfterBackoff(c, b)
	if n != 2 || err != nil {
		t.Fatalf("Write after the reader came back = %d, %v", n, err)
	}
	if got := drain(t, rfd); !bytes.Equal(got, commandLines(b)) {
		t.Errorf("got %q, want %q", got, commandLines(b))
	}
}

// newSpool builds the sink directly rather than through NewSpool, whose
// signature is being extended in parallel (check_result_path_max_files);
// with only Dir and Mode set it is the plain, uncapped spool.
func newSpool(dir string, mode uint32) *Spool { return &Spool{Dir: dir, Mode: mode} }

var spoolName = regexp.MustCompile(`^c[A-Za-z0-9]{6}$`)

func TestSpoolWrite(t *testing.T) {
	withLocal(t, time.UTC)
	old := unix.Umask(0o022)
	defer unix.Umask(old)

	dir := t.TempDir()
	s := newSpool(dir, 0o600)
	if s.Name() != "spool" {
		t.Errorf("Name() = %q", s.Name())
	}
	if err := s.Writable(); err != nil {
		t.Fatalf("Writable: %v", err)
	}
	its := items(5, 40)
	its[1].Result.Output = "multi\nline \\ output"
	mustWrite(t, s, its)
	mustClose(t, s)

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var results, oks []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case spoolName.MatchString(name):
			results = append(results, name)
		case strings.HasSuffix(name, ".ok") && spoolName.MatchString(strings.TrimSuffix(name, ".ok")):
			oks = append(oks, name)
		default:
			t.Errorf("unexpected file %q left in the spool directory", name)
		}
	}
	if len(results) != len(its) || len(oks) != len(its) {
		t.Fatalf("%d result files and %d .ok files, want %d each: %v", len(results), len(oks), len(its), entries)
	}

	want := map[string]string{}
	for _, it := range its {
		want[it.Result.Host] = string(AppendSpool(nil, it))
	}
	for _, name := range results {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", name, perm)
		}
		ok, err := os.Stat(p + ".ok")
		if err != nil {
			t.Errorf("%s has no .ok: %v", name, err)
		} else {
			if ok.Size() != 0 {
				t.Errorf("%s.ok is %d bytes, want empty", name, ok.Size())
			}
			if perm := ok.Mode().Perm(); perm&0o077 != 0 {
				t.Errorf("%s.ok: mode %04o is readable by others", name, perm)
			}
		}
		data := mustRead(t, p)
		host := ""
		for _, l := range strings.Split(string(data), "\n") {
			if h, found := strings.CutPrefix(l, "host_name="); found {
				host = h
			}
		}
		if w, found := want[host]; !found {
			t.Errorf("%s: unknown host %q:\n%s", name, host, data)
		} else if string(data) != w {
			t.Errorf("%s: content\n%q\nwant\n%q", name, data, w)
		} else {
			delete(want, host)
		}
	}
	if len(want) > 0 {
		t.Errorf("results not found in the spool: %v", sortedKeys(want))
	}
}

func sortedKeys(m map[string]string) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// The file mode is applied whatever the umask.
func TestSpoolModeIgnoresUmask(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	dir := t.TempDir()
	s := newSpool(dir, 0o640)
	mustWrite(t, s, items(1, 10))
	names := resultFiles(t, dir)
	for _, name := range names {
		fi, _ := os.Stat(filepath.Join(dir, name))
		if perm := fi.Mode().Perm(); perm != 0o640 {
			t.Errorf("mode %04o, want 0640", perm)
		}
	}
	if len(names) == 0 {
		t.Fatalf("no result file in %s", dir)
	}
}

func TestSpoolMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	s := newSpool(dir, 0o600)
	if err := s.Writable(); err == nil || !errors.Is(err, errSpool) {
		t.Errorf("Writable on a missing dir = %v, want an errSpool error", err)
	}
	n, err := s.Write(items(2, 10))
	if n != 0 || !errors.Is(err, errSpool) {
		t.Errorf("Write = %d, %v; want 0, errSpool", n, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory was created: %v", err)
	}
}

func TestSpoolWritableLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := newSpool(dir, 0o600).Writable(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Writable left %v", entries)
	}
}

func TestDump(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nsca.dump")
	d := NewDump(path)
	if d.Name() != "dump_file" {
		t.Errorf("Name() = %q", d.Name())
	}
	a, b := items(3, 10), items(2, 20)
	mustWrite(t, d, a)
	mustWrite(t, d, b)
	mustClose(t, d)
	// Reopened after Close: appends, never truncates.
	d2 := NewDump(path)
	mustWrite(t, d2, a[:1])
	d2.Close()
	got := mustRead(t, path)
	want := commandLines(append(append(append([]Item{}, a...), b...), a[0]))
	if !bytes.Equal(got, want) {
		t.Errorf("dump:\n%q\nwant\n%q", got, want)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestDumpMissingDir(t *testing.T) {
	d := NewDump(filepath.Join(t.TempDir(), "missing", "nsca.dump"))
	if n, err := d.Write(items(1, 10)); n != 0 || err == nil {
		t.Errorf("Write = %d, %v; want 0 and an error", n, err)
	}
}
