// Package board is a shared-memory slot on which one process publishes a
// small record (a worker its last report) for another to read (its
// supervisor) whenever it wants them, beside room for counters that the
// first keeps there and the second reads as they count (Counters). Publishing makes no system call and
// wakes nobody: a report every few milliseconds through a pipe woke the
// supervisor each time, which cost 2 % of a two-worker daemon's CPU.
//
// The region holds two records. The writer fills the older one, its
// sequence number odd while it writes and even when done, so a writer
// killed in the middle of a write leaves the other record whole and the
// reader returns that one. Every access to the region is a 64-bit atomic
// one: neither process ever reads a torn word, and Go's memory model
// orders the record's words between the two reads of its sequence number.
package board

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Size is the size of a board's region in bytes: the records, then the
// counters. Only the pages touched take memory; a worker's report takes
// one, its counters another.
const Size = recordsSize + countersSize

const (
	recordsSize  = 1 << 20
	countersSize = 1 << 20
	wordBytes    = 8
	recordWords  = recordsSize / wordBytes / 2
	headerWords  = 2 // sequence number, length in bytes
	// MaxRecord is the longest record a board holds.
	MaxRecord = (recordWords - headerWords) * wordBytes
	// readTries bounds how often Read retries a record being rewritten;
	// a write takes microseconds, so running out means the writer died
	// mid-write and the record is given up.
	readTries = 1000
)

// ErrTooLarge is returned by Publish for a record longer than MaxRecord.
var ErrTooLarge = errors.New("board: record too large")

// Board is one mapped region. A process uses it either to publish (one
// goroutine at a time) or to read (safe for concurrent use); Close unmaps
// it and must not run concurrently with either.
type Board struct {
	mem     []byte
	words   []uint64
	version uint64 // the writer's last published record
}

// Create makes a new, empty board and returns it with a descriptor of its
// memory (close-on-exec) to pass to the other process, which the caller
// closes once passed.
func Create(name string) (*Board, int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, -1, fmt.Errorf("board: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, Size); err != nil {
		unix.Close(fd)
		return nil, -1, fmt.Errorf("board: ftruncate: %w", err)
	}
	b, err := mapFD(fd)
	if err != nil {
		unix.Close(fd)
		return nil, -1, err
	}
	return b, fd, nil
}

// Open maps the board behind fd, which it closes.
func Open(fd int) (*Board, error) {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("board: fstat: %w", err)
	}
	if st.Size != Size {
		return nil, fmt.Errorf("board: descriptor %d is %d bytes, not a board of %d", fd, st.Size, Size)
	}
	return mapFD(fd)
}

func mapFD(fd int) (*Board, error) {
	mem, err := unix.Mmap(fd, 0, Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("board: mmap: %w", err)
	}
	words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(mem))), Size/wordBytes)
	return &Board{mem: mem, words: words}, nil
}

// record is the words of record i (0 or 1).
func (b *Board) record(i uint64) []uint64 {
	return b.words[i*recordWords : (i+1)*recordWords]
}

// Publish makes data the board's record.
func (b *Board) Publish(data []byte) error {
	if len(data) > MaxRecord {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), MaxRecord)
	}
	v := b.version + 1
	r := b.record(v % 2)
	atomic.StoreUint64(&r[0], 2*v-1)
	atomic.StoreUint64(&r[1], uint64(len(data)))
	body := r[headerWords:]
	for i := 0; len(data) > 0; i++ {
		var w [wordBytes]byte
		n := copy(w[:], data)
		atomic.StoreUint64(&body[i], *(*uint64)(unsafe.Pointer(&w)))
		data = data[n:]
	}
	atomic.StoreUint64(&r[0], 2*v)
	b.version = v
	return nil
}

// Read returns a copy of the newest whole record, and false when nothing
// was published yet. The two records are read one after the other, so the
// first may be out of date by the time the second is: when the second is
// being written, and with a version past the one after the first, the
// writer has rewritten the first meanwhile, and Read starts again rather
// than return an older record than a Read before it did. A record the
// writer died writing is the one after the newest whole one.
func (b *Board) Read() ([]byte, bool) {
	for range readTries {
		var best []byte
		var bestSeq, writing uint64
		for i := range uint64(2) {
			data, seq, ok := b.readRecord(b.record(i))
			switch {
			case ok && seq > bestSeq:
				best, bestSeq = data, seq
			case !ok && seq != 0:
				writing = seq | 1 // rewritten while we read it: as good as being written
			}
		}
		if writing == 0 || writing == bestSeq+1 {
			return best, bestSeq > 0
		}
	}
	return nil, false
}

// readRecord reads one record: its data and sequence number, or false if
// it was never written or is not whole, with the last sequence number seen
// then (odd if it is being written).
func (b *Board) readRecord(r []uint64) ([]byte, uint64, bool) {
	var seq uint64
	for range readTries {
		seq = atomic.LoadUint64(&r[0])
		if seq == 0 {
			return nil, 0, false
		}
		if seq%2 == 1 {
			runtime.Gosched()
			continue
		}
		n := atomic.LoadUint64(&r[1])
		if n > MaxRecord {
			return nil, 0, false
		}
		data := make([]byte, (n+wordBytes-1)/wordBytes*wordBytes)
		body := r[headerWords:]
		for i := range len(data) / wordBytes {
			*(*uint64)(unsafe.Pointer(&data[i*wordBytes])) = atomic.LoadUint64(&body[i])
		}
		if atomic.LoadUint64(&r[0]) == seq {
			return data[:n], seq, true
		}
	}
	return nil, seq, false
}

// Counters is the board's room for counters, zeroed when created, which
// both processes map; what is kept there is their own business.
func (b *Board) Counters() []uint64 { return b.words[recordsSize/wordBytes:] }

// Close unmaps the board.
func (b *Board) Close() error {
	if b.mem == nil {
		return nil
	}
	err := unix.Munmap(b.mem)
	b.mem, b.words = nil, nil
	return err
}
