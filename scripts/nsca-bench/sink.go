package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// times is a growable array of int64 indexed by check id, written and read
// concurrently without a global lock: ids are dense (0, 1, 2, ...), so it
// is a table of lazily allocated segments.
type times struct {
	mu   sync.Mutex
	segs [1 << 14]atomic.Pointer[[segSize]atomic.Int64]
}

const segBits = 16
const segSize = 1 << segBits

// maxIDs is how many checks one run can track (1<<30).
const maxIDs = uint64(len(times{}.segs)) << segBits

func (t *times) seg(id uint64, create bool) *[segSize]atomic.Int64 {
	i := id >> segBits
	if i >= uint64(len(t.segs)) {
		return nil
	}
	if s := t.segs[i].Load(); s != nil || !create {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.segs[i].Load(); s != nil {
		return s
	}
	s := new([segSize]atomic.Int64)
	t.segs[i].Store(s)
	return s
}

// set stores v (which must not be 0) for id and returns the previous value.
func (t *times) set(id uint64, v int64) int64 {
	s := t.seg(id, true)
	if s == nil {
		return -1
	}
	return s[id&(segSize-1)].Swap(v)
}

func (t *times) get(id uint64) int64 {
	s := t.seg(id, false)
	if s == nil {
		return 0
	}
	return s[id&(segSize-1)].Load()
}

// Sink plays the monitoring core: it reads the command file FIFO and
// records when each check's line arrived.
type Sink struct {
	path  string
	fd    int
	clock func() int64 // nanoseconds since the run began, never 0 once running
	recv  *times

	Lines      atomic.Uint64 // every line read
	Delivered  atomic.Uint64 // lines matched to a check, first time, and floor lines
	Floor      atomic.Uint64 // of those, floor_server's fixed lines (no id: counted, no latency)
	Duplicates atomic.Uint64 // lines of a check already delivered
	Unknown    atomic.Uint64 // lines without a usable id
	Mismatched atomic.Uint64 // lines with an id whose content is not what was sent
	LastRecv   atomic.Int64  // clock of the last matched line
	FullReads  atomic.Uint64 // reads that found the FIFO full: the reader was behind
	firstBad   atomic.Pointer[string]
	floorMu    sync.Mutex
	floorRecv  []int64 // clock of each floor line, in order
	done       chan struct{}
	err        error
}

// OpenSink creates the FIFO at path (or reuses an existing FIFO) and opens
// it. It is opened read-write, so that the daemons, which open and close
// it for every write, never make it look closed (EOF) to us, and never
// find it without a reader (ENXIO).
func OpenSink(path string, clock func() int64, recv *times) (*Sink, error) {
	var st unix.Stat_t
	switch err := unix.Stat(path, &st); {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFIFO:
	case err == nil:
		return nil, fmt.Errorf("--fifo %s exists and is not a FIFO", path)
	case errors.Is(err, unix.ENOENT):
		if err := unix.Mkfifo(path, 0o600); err != nil {
			return nil, fmt.Errorf("mkfifo %s: %w", path, err)
		}
	default:
		return nil, fmt.Errorf("--fifo %s: %w", path, err)
	}
	// A blocking descriptor read by a thread of its own: the reader must keep
	// up with the daemon even while thousands of sending goroutines keep the
	// Go scheduler busy, or the FIFO fills and the daemon diverts results.
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &Sink{path: path, fd: fd, clock: clock, recv: recv, done: make(chan struct{})}, nil
}

// stopLine, written into the FIFO by Close, ends the reader.
const stopLine = "nsca-bench: stop reading\n"

// fdReader reads the FIFO and notes when the reader fell behind: a read
// that finds the pipe full (64 KiB, Linux's default) means the daemon may
// have had to wait for us.
type fdReader struct {
	fd int
	s  *Sink
}

func (f fdReader) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(f.fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		if n >= 64<<10 {
			f.s.FullReads.Add(1)
		}
		return n, nil
	}
}

// Start reads lines until Close.
func (s *Sink) Start() {
	go func() {
		runtime.LockOSThread()
		defer close(s.done)
		s.err = s.read(fdReader{s.fd, s})
	}()
}

func (s *Sink) read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var want []byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer is no line of ours.
			s.Lines.Add(1)
			s.bad("overlong line")
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			if errors.Is(err, os.ErrClosed) || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if string(line) == stopLine {
			return nil
		}
		now := s.clock()
		s.Lines.Add(1)
		want = s.match(line[:len(line)-1], now, want)
	}
}

// match records one line (without its newline).
func (s *Sink) match(line []byte, now int64, scratch []byte) []byte {
	if string(line) == floorServerLine {
		s.Floor.Add(1)
		s.floorMu.Lock()
		s.floorRecv = append(s.floorRecv, now)
		s.floorMu.Unlock()
		s.delivered(now)
		return scratch
	}
	i := bytes.Index(line, []byte(idMarker))
	if i < 0 {
		s.Unknown.Add(1)
		s.bad(string(line))
		return scratch
	}
	j := i + len(idMarker)
	k := j
	for k < len(line) && line[k] >= '0' && line[k] <= '9' {
		k++
	}
	id, err := strconv.ParseUint(string(line[j:k]), 10, 64)
	if err != nil || id >= maxIDs {
		s.Unknown.Add(1)
		s.bad(string(line))
		return scratch
	}
	// "[<time>] " then the expected text, exactly.
	scratch = appendExpected(scratch[:0], id)
	rb := bytes.IndexByte(line, ']')
	if line[0] != '[' || rb < 2 || !allDigits(line[1:rb]) || rb+1 >= len(line) ||
		line[rb+1] != ' ' || !bytes.Equal(line[rb+2:], scratch) {
		s.Mismatched.Add(1)
		s.bad(string(line))
		return scratch
	}
	if prev := s.recv.set(id, now); prev != 0 {
		s.recv.set(id, prev) // keep the first arrival
		s.Duplicates.Add(1)
		return scratch
	}
	s.delivered(now)
	return scratch
}

// floorServerLine is what floor_server (../shared/bench/floor_server.c) writes for
// every packet, decoding nothing: such lines count as delivered; their
// latency can only be estimated from their order (FloorArrivals).
const floorServerLine = "[0] PROCESS_SERVICE_CHECK_RESULT;h;s;0;floor"

func (s *Sink) delivered(now int64) {
	s.Delivered.Add(1)
	for {
		last := s.LastRecv.Load()
		if now <= last || s.LastRecv.CompareAndSwap(last, now) {
			break
		}
	}
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

func (s *Sink) bad(line string) {
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	s.firstBad.CompareAndSwap(nil, &line)
}

// FloorArrivals returns the clocks at which floor lines were read, in order.
func (s *Sink) FloorArrivals() []int64 {
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	return slices.Clone(s.floorRecv)
}

// FirstBad is the first line that did not match, for diagnostics.
func (s *Sink) FirstBad() string {
	if p := s.firstBad.Load(); p != nil {
		return *p
	}
	return ""
}

// WaitFor waits until n checks were delivered, or until no line arrived for
// quiet, whichever is first. It reports whether all n arrived.
func (s *Sink) WaitFor(n uint64, quiet time.Duration) bool {
	last, lastChange := s.Lines.Load(), time.Now()
	for s.Delivered.Load() < n {
		time.Sleep(5 * time.Millisecond)
		if l := s.Lines.Load(); l != last {
			last, lastChange = l, time.Now()
		} else if time.Since(lastChange) > quiet {
			return false
		}
	}
	return true
}

// Close stops reading. The FIFO itself is left for the daemon, which must
// not find it missing (stock would then create alternate_dump_file).
func (s *Sink) Close() error {
	unix.Write(s.fd, []byte(stopLine))
	<-s.done
	unix.Close(s.fd)
	return s.err
}
