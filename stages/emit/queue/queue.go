package queue

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Sentinel errors. Errors returned wrap one of them, or an error from the
// operating system, with %w.
var (
	// ErrFull: the records would take the queued (unacknowledged) bytes
	// past Options.MaxBytes. The caller hands them to its fallback.
	ErrFull = errors.New("queue: full")
	// ErrTooLarge: a record is longer than MaxRecordBytes.
	ErrTooLarge = errors.New("queue: record too large")
	// ErrClosed: the queue was closed.
	ErrClosed = errors.New("queue: closed")
	// ErrLocked: another open Queue, in this or another process, holds
	// the directory.
	ErrLocked = errors.New("queue: directory in use by another queue")
	// ErrAckRange: Ack was asked for more records than Peek returned.
	ErrAckRange = errors.New("queue: ack beyond the records peeked")
	// ErrOptions: an Options field is out of range.
	ErrOptions = errors.New("queue: bad option")
	// ErrNotEmpty: Remove was asked of a queue that still holds records.
	ErrNotEmpty = errors.New("queue: not empty")
)

// Limits and defaults.
const (
	// MaxRecordBytes bounds one record's data.
	MaxRecordBytes = 16 << 20
	// DefaultMaxBytes is Options.MaxBytes when it is 0.
	DefaultMaxBytes = 1 << 30
	// DefaultSegmentBytes is Options.SegmentBytes when it is 0.
	DefaultSegmentBytes = 16 << 20
	// MinSegmentBytes is the smallest Options.SegmentBytes accepted.
	MinSegmentBytes = 1 << 10
)

// Fsync is when appended records are forced to stable storage. The zero
// value is FsyncBatch.
type Fsync uint8

const (
	// FsyncBatch syncs a segment once per Append call, before Append
	// returns: the default.
	FsyncBatch Fsync = iota
	// FsyncNever leaves writing back to the operating system.
	FsyncNever
	// FsyncAlways syncs after every record, and after every Ack.
	FsyncAlways
)

// ParseFsync parses "never", "batch" or "always"; "" is "batch".
func ParseFsync(s string) (Fsync, error) {
	switch s {
	case "", "batch":
		return FsyncBatch, nil
	case "never":
		return FsyncNever, nil
	case "always":
		return FsyncAlways, nil
	}
	return 0, fmt.Errorf("%w: fsync %q: want never, batch or always", ErrOptions, s)
}

// String returns the policy's name as ParseFsync reads it.
func (f Fsync) String() string {
	switch f {
	case FsyncBatch:
		return "batch"
	case FsyncNever:
		return "never"
	case FsyncAlways:
		return "always"
	}
	return fmt.Sprintf("Fsync(%d)", uint8(f))
}

// Options configure a Queue.
type Options struct {
	// MaxBytes bounds the queued bytes (unacknowledged records with
	// their headers, see Stats.Bytes); 0 is DefaultMaxBytes. The files
	// may hold up to one segment more: the acknowledged part of the
	// oldest segment.
	MaxBytes int64
	// SegmentBytes is the size past which appends go to a new segment
	// file; 0 is DefaultSegmentBytes. A record larger than that gets a
	// segment of its own.
	SegmentBytes int64
	// Fsync is the sync policy.
	Fsync Fsync
	// Now is the clock for record timestamps and Stats.OldestAge; nil is
	// time.Now.
	Now func() time.Time
	// OnDamage, when set, hears of each damaged region once, when Open
	// or the reader finds it (from the goroutine of Open or of the
	// reader), for the caller to log; and when the writer finds its
	// segment file removed (from the writer's, with Results unknown and
	// not counted: the reader, or Close, counts what it cost).
	OnDamage func(Damage)
}

// Damage is one damaged region of a queue file, as Options.OnDamage
// hears of it.
type Damage struct {
	// File is the path of the segment or ack file; Offset and Bytes
	// locate the region in it.
	File          string
	Offset, Bytes int64
	// Results is how many records the region cost, -1 when no one can
	// tell: the records of a segment this Queue has read or written are
	// known and missing ones are counted when the reader has passed the
	// segment's end; those of damage found at Open are not.
	Results int64
	// Cause says what is wrong.
	Cause string
}

// Record is one queued record, as Peek returns it.
type Record struct {
	// Data is the record as appended. The queue never writes to it
	// again: it stays valid after Ack.
	Data []byte
	// Appended is when the Append call that stored it began.
	Appended time.Time
}

// Stats is a snapshot of a queue's state and counters.
type Stats struct {
	// Records is the unacknowledged records on disk (those found intact
	// at Open, plus appended, minus acknowledged).
	Records int64
	// Bytes is the unacknowledged bytes on disk: records with their
	// headers, segment headers, and damaged regions not yet passed.
	// Options.MaxBytes bounds it.
	Bytes int64
	// DiskBytes is the size of all segment files.
	DiskBytes int64
	// Segments is the number of segment files.
	Segments int
	// Oldest is when the oldest unacknowledged record was appended; zero
	// when the queue is empty.
	Oldest time.Time
	// OldestAge is how long ago Oldest was; 0 when the queue is empty.
	OldestAge time.Duration
	// Corrupt counts damaged regions skipped since Open: each record
	// whose checksum failed, each run of bytes without a valid record
	// header (a torn tail counts once), each bad segment header or ack
	// file, each segment file removed or cut short under the queue.
	// CorruptBytes is their size.
	Corrupt      int64
	CorruptBytes int64
	// Lost counts the records those regions cost where known;
	// LostUnknown the regions whose cost no one can tell (see
	// Damage.Results).
	Lost, LostUnknown int64
	// Appended and Acked count records since Open.
	Appended int64
	Acked    int64
}

// segment is one segment file. size, sealed and records are guarded by
// Queue.mu once the Queue is open.
type segment struct {
	id      uint64
	size    int64 // bytes readable: the end of the last whole record written
	sealed  bool  // no more appends
	records int64 // intact records in it, from where the reader starts: at Open's scan, and published since
}

// Queue is a durable FIFO queue of records in one directory. Append is
// for one writer goroutine and Peek/Ack for one reader; each side is
// serialised by its own lock, so more goroutines per side are safe but
// wait for each other. Stats, Ready and Close may be called from any
// goroutine.
type Queue struct {
	dir   string
	opt   Options
	lock  *os.File
	ready chan struct{}

	wmu sync.Mutex // the writer side
	w   struct {
		f      *os.File
		seg    *segment
		size   int64 // bytes written to f and known good
		buf    []byte
		nextID uint64
		closed bool
	}

	rmu sync.Mutex // the reader side
	r   struct {
		seg   uint64
		sc    *scanner // over f, nil until the segment is opened
		f     *os.File
		recs  []Record
		pos   []recPos // per recs entry
		ph    int      // recs[ph:] are pending: read, not acknowledged
		known map[uint64]map[int64]bool
		// taken counts the records of segment seg read (or found
		// damaged one by one); missing has the regions found in it whose
		// cost is told once the reader is past its end (settle); gone:
		// its file was not there to open.
		taken   int64
		missing []Damage
		gone    bool
		ack     *os.File
		ackN    uint64
		ackBuf  [ackSlotSize]byte
		closed  bool
		ackSeg  uint64 // the position last persisted
		ackOff  int64
		// ackDirty: the last write of the position failed.
		ackDirty bool
	}
	// ackReserved: the ack file's blocks are allocated (reserveAck).
	ackReserved atomic.Bool

	mu       sync.Mutex // shared state
	segs     []*segment // ascending ids
	ackSeg   uint64     // first unacknowledged byte: segs before it are deleted
	ackOff   int64
	disk     int64
	records  int64
	head     int64 // append time of the oldest unacknowledged record
	corrupt  int64
	corruptB int64
	lost     int64
	lostUnk  int64
	appended int64
	acked    int64
}

// recPos is where a pending record lies.
type recPos struct {
	seg        uint64
	start, end int64
}

// unackedLocked is Stats.Bytes; q.mu is held.
func (q *Queue) unackedLocked() int64 {
	if len(q.segs) > 0 && q.segs[0].id == q.ackSeg {
		return q.disk - q.ackOff
	}
	return q.disk
}

// Ready returns a channel that receives a value after records were
// appended, so a reader that found the queue empty can wait without
// polling: Peek, and if it returns nothing, wait on Ready. A value may be
// stale (the records already read); Peek again to see. The channel is
// closed by Close.
func (q *Queue) Ready() <-chan struct{} { return q.ready }

// Stats returns a snapshot of the queue's state and counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := Stats{
		Records:      q.records,
		Bytes:        q.unackedLocked(),
		DiskBytes:    q.disk,
		Segments:     len(q.segs),
		Corrupt:      q.corrupt,
		CorruptBytes: q.corruptB,
		Lost:         q.lost,
		LostUnknown:  q.lostUnk,
		Appended:     q.appended,
		Acked:        q.acked,
	}
	if q.records > 0 {
		st.Oldest = time.Unix(0, q.head)
		st.OldestAge = max(q.opt.Now().Sub(st.Oldest), 0)
	}
	return st
}

// Close syncs what the policy asks to be synced (nothing under
// FsyncNever), closes the files, releases the directory and closes the
// Ready channel. Calls after the first return ErrClosed, as do Append,
// Peek and Ack after it.
func (q *Queue) Close() error {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	q.rmu.Lock()
	defer q.rmu.Unlock()
	if q.w.closed {
		return ErrClosed
	}
	q.w.closed, q.r.closed = true, true
	q.reportRemoved()
	var err error
	if q.r.ackDirty {
		err = q.writeAck()
	}
	if q.opt.Fsync != FsyncNever {
		if q.w.f != nil {
			if serr := q.w.f.Sync(); err == nil {
				err = serr
			}
		}
		if serr := q.r.ack.Sync(); err == nil {
			err = serr
		}
	}
	if cerr := q.closeFiles(); err == nil {
		err = cerr
	}
	close(q.ready)
	if err != nil {
		return fmt.Errorf("queue: close: %w", err)
	}
	return nil
}

// reportRemoved counts, at Close, the records left unacknowledged in
// segment files removed under the queue: the reader may still have been
// delivering them from its open file, but no one can once it is closed.
// Both sides' locks are held.
func (q *Queue) reportRemoved() {
	pending := map[uint64]int64{}
	for _, p := range q.r.pos[q.r.ph:] {
		pending[p.seg]++
	}
	q.mu.Lock()
	segs := slices.Clone(q.segs)
	q.mu.Unlock()
	for _, s := range segs {
		if _, err := os.Lstat(filepath.Join(q.dir, segName(s.id))); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		q.mu.Lock()
		left := pending[s.id]
		switch {
		case s.id == q.r.seg:
			left += s.records - q.r.taken
		case s.id > q.r.seg:
			left += s.records
		}
		q.mu.Unlock()
		if left > 0 {
			q.report(Damage{File: filepath.Join(q.dir, segName(s.id)), Bytes: s.size, Results: left, Cause: "segment file removed under the queue: what was not delivered of it is lost at close"}, left)
		}
	}
}

// closeFiles closes every file the queue holds, also those of an Open that
// failed part way, and joins what failed so that Close can say it.
func (q *Queue) closeFiles() error {
	var errs []error
	for _, f := range []*os.File{q.w.f, q.r.f, q.r.ack, q.lock} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	q.w.f, q.r.f, q.r.ack, q.lock = nil, nil, nil, nil
	return errors.Join(errs...)
}
