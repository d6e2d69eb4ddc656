package queue

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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

// Open opens the queue in dir, creating the directory (0750) and its files
// if missing, and scans the unacknowledged records to check them and count
// them. A directory is held by one open Queue at a time (ErrLocked).
func Open(dir string, opt Options) (*Queue, error) {
	opt, err := withDefaults(opt)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	q := &Queue{dir: dir, opt: opt, ready: make(chan struct{}, 1)}
	ok := false
	defer func() {
		if !ok {
			q.closeFiles()
		}
	}()
	if err := q.lockDir(); err != nil {
		return nil, err
	}
	ack, haveAck, err := q.openAck()
	if err != nil {
		return nil, err
	}
	maxID, err := q.loadSegments(ack, haveAck)
	if err != nil {
		return nil, err
	}
	q.startAt(ack, haveAck, maxID)
	if err := q.scanAll(); err != nil {
		return nil, err
	}
	ok = true
	return q, nil
}

// withDefaults is opt with its zero fields given their defaults, or an
// ErrOptions error naming the field out of range.
func withDefaults(opt Options) (Options, error) {
	if opt.MaxBytes == 0 {
		opt.MaxBytes = DefaultMaxBytes
	}
	if opt.SegmentBytes == 0 {
		opt.SegmentBytes = DefaultSegmentBytes
	}
	if opt.MaxBytes < 0 || opt.SegmentBytes < MinSegmentBytes {
		return opt, fmt.Errorf("%w: max_bytes %d, segment_bytes %d (at least %d)", ErrOptions, opt.MaxBytes, opt.SegmentBytes, MinSegmentBytes)
	}
	if opt.Fsync > FsyncAlways {
		return opt, fmt.Errorf("%w: fsync %v", ErrOptions, opt.Fsync)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return opt, nil
}

// lockDir takes the directory's lock file, so that no other Queue, in this
// process or another, appends or acknowledges beside this one. The lock is
// held until the file is closed.
func (q *Queue) lockDir() error {
	var err error
	if q.lock, err = os.OpenFile(filepath.Join(q.dir, lockName), os.O_RDWR|os.O_CREATE, 0o640); err != nil {
		return fmt.Errorf("queue: %w", err)
	}
	if err := syscall.Flock(int(q.lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%w: %s", ErrLocked, q.dir)
		}
		return fmt.Errorf("queue: lock %s: %w", q.dir, err)
	}
	return nil
}

// openAck opens (or creates) the ack file and reads the acknowledged
// position from it; haveAck is false when it holds none, and a file that
// holds bytes but no valid position is reported as damage.
func (q *Queue) openAck() (ack ackPos, haveAck bool, err error) {
	if q.r.ack, err = os.OpenFile(filepath.Join(q.dir, ackName), os.O_RDWR|os.O_CREATE, 0o640); err != nil {
		return ack, false, fmt.Errorf("queue: %w", err)
	}
	var ab [ackFileSize]byte
	n, err := q.r.ack.ReadAt(ab[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return ack, false, fmt.Errorf("queue: read ack file: %w", err)
	}
	ack, haveAck = bestAck(ab[:n])
	if !haveAck && n > 0 {
		// Replay from the oldest segment: duplicates, nothing lost.
		q.report(Damage{File: q.r.ack.Name(), Bytes: int64(n), Cause: "no valid acknowledged position: delivering again from the oldest segment"}, 0)
	}
	q.r.ackN = ack.counter
	_ = q.reserveAck() // if the disk is full, Append tries again
	return ack, haveAck, nil
}

// loadSegments lists the segment files into q.segs, in ascending ids,
// removing those wholly acknowledged and those emptied, and returns the
// highest id found (0 when none), so that new segments come after it.
func (q *Queue) loadSegments(ack ackPos, haveAck bool) (maxID uint64, err error) {
	entries, err := os.ReadDir(q.dir)
	if err != nil {
		return 0, fmt.Errorf("queue: %w", err)
	}
	for _, e := range entries {
		if id, isSeg := parseSegName(e.Name()); isSeg && e.Type().IsRegular() {
			maxID = max(maxID, id)
		}
	}
	for _, e := range entries {
		id, isSeg := parseSegName(e.Name())
		if !isSeg || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return 0, fmt.Errorf("queue: %w", err)
		}
		// A segment wholly acknowledged (the ack at or past its end) is
		// removed as those before it: its space comes back at once.
		acked := haveAck && (id < ack.seg || (id == ack.seg && ack.off >= info.Size()))
		if !acked && info.Size() == 0 && id < maxID {
			// Only the newest segment can be empty by a crash between
			// its creation and its header: an older one was emptied.
			q.report(Damage{File: filepath.Join(q.dir, e.Name()), Results: -1, Cause: "segment file emptied"}, 0)
		}
		if acked || info.Size() == 0 {
			if err := os.Remove(filepath.Join(q.dir, e.Name())); err != nil {
				return 0, fmt.Errorf("queue: %w", err)
			}
			continue
		}
		q.segs = append(q.segs, &segment{id: id, size: info.Size(), sealed: true})
		q.disk += info.Size()
	}
	slices.SortFunc(q.segs, func(a, b *segment) int { return cmp.Compare(a.id, b.id) })
	return maxID, nil
}

// startAt sets where the writer's next segment and the reader start: the
// acknowledged position when it lies in the oldest segment left, else that
// segment's first record, never past a segment's end.
func (q *Queue) startAt(ack ackPos, haveAck bool, maxID uint64) {
	q.w.nextID = max(maxID, ack.seg) + 1
	q.ackSeg, q.ackOff = ack.seg, segHeaderSize
	if len(q.segs) > 0 {
		s := q.segs[0]
		if haveAck && s.id == ack.seg {
			q.ackOff = min(max(ack.off, segHeaderSize), s.size)
		} else {
			q.ackSeg = s.id
		}
		q.ackOff = min(q.ackOff, s.size) // a file shorter than a header
	}
	q.r.ackSeg, q.r.ackOff = q.ackSeg, q.ackOff
	q.r.seg = q.ackSeg
	q.r.known = map[uint64]map[int64]bool{}
}

// scanAll checks and counts the unacknowledged records at Open, noting
// where damage lies so that the reader does not count it again.
func (q *Queue) scanAll() error {
	buf := make([]byte, readChunk)
	for _, s := range q.segs {
		f, err := os.Open(filepath.Join(q.dir, segName(s.id)))
		if err != nil {
			return fmt.Errorf("queue: %w", err)
		}
		var hb [segHeaderSize]byte
		if n, _ := f.ReadAt(hb[:], 0); !validSegHeader(hb[:n]) {
			// The records behind a bad header are read all the same; a
			// file shorter than a header has lost what it held.
			lost := int64(0)
			if s.size < segHeaderSize {
				lost = -1
			}
			q.noteDamage(s.id, 0, min(s.size, segHeaderSize), true, lost, "bad segment header")
		}
		start := min(segHeaderSize, s.size)
		if s.id == q.ackSeg {
			start = q.ackOff
		}
		sc := &scanner{f: f, off: start, end: s.size, buf: buf[:0]}
		for {
			ev, err := sc.next()
			if err != nil {
				f.Close()
				return fmt.Errorf("queue: scan %s: %w", segName(s.id), err)
			}
			if ev.kind == evEnd {
				break
			}
			if ev.kind == evDamage {
				q.noteDamage(s.id, ev.start, ev.end-ev.start, true, ev.lost(), ev.cause())
				continue
			}
			if q.records == 0 {
				q.head = ev.time
			}
			q.records++
			s.records++
		}
		buf = sc.buf
		f.Close()
	}
	return nil
}

// noteDamage counts a damaged region of segment seg once: at Open, or
// when the reader finds damage that Open did not see. lost is what it cost
// (-1 unknown); found by the reader with lost unknown, it waits in
// r.missing for settle to tell.
func (q *Queue) noteDamage(seg uint64, start, n int64, atOpen bool, lost int64, cause string) {
	m := q.r.known[seg]
	if atOpen {
		if m == nil {
			m = map[int64]bool{}
			q.r.known[seg] = m
		}
		m[start] = true
	} else if m[start] {
		return
	}
	d := Damage{File: filepath.Join(q.dir, segName(seg)), Offset: start, Bytes: n, Results: lost, Cause: cause}
	if !atOpen && lost < 0 {
		q.r.missing = append(q.r.missing, d)
		return
	}
	q.report(d, lost)
}

// report counts a damaged region, and lost of the records it cost
// (unknown if d.Results < 0), and passes it to Options.OnDamage.
func (q *Queue) report(d Damage, lost int64) {
	q.mu.Lock()
	q.corrupt++
	q.corruptB += d.Bytes
	if d.Results < 0 {
		q.lostUnk++
	} else {
		q.lost += lost
	}
	q.mu.Unlock()
	if q.opt.OnDamage != nil {
		q.opt.OnDamage(d)
	}
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

// Append stores records at the end of the queue, in order, synced as
// Options.Fsync says before it returns. It returns how many of them,
// from the first, were stored; when that is fewer than all, err says why:
// ErrFull (MaxBytes reached), ErrTooLarge, ErrClosed, or a write error.
// The caller keeps ownership of recs.
func (q *Queue) Append(recs ...[]byte) (int, error) {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if q.w.closed {
		return 0, ErrClosed
	}
	if len(recs) == 0 {
		return 0, nil
	}
	if err := q.reserveAck(); err != nil {
		// Records stored now could not be acknowledged durably: after a
		// restart they would come again. The caller's fallback takes them.
		return 0, err
	}
	now := q.opt.Now().UnixNano()
	q.mu.Lock()
	queued := q.unackedLocked()
	q.mu.Unlock()
	n, need := 0, int64(0)
	var stop error
	for _, r := range recs {
		if len(r) > MaxRecordBytes {
			stop = fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(r), MaxRecordBytes)
			break
		}
		if f := frameSize(r); queued+need+f > q.opt.MaxBytes {
			stop = fmt.Errorf("%w: %d bytes queued, %d more would pass max_bytes %d", ErrFull, queued, need+f, q.opt.MaxBytes)
			break
		} else {
			need += f
		}
		n++
	}
	q.checkRemoved()
	for done := 0; done < n; {
		if q.w.f == nil || (q.w.size > segHeaderSize && q.w.size+frameSize(recs[done]) > q.opt.SegmentBytes) {
			if err := q.roll(); err != nil {
				return done, err
			}
		}
		buf := q.w.buf[:0]
		k := done
		for k < n {
			if k > done && (q.opt.Fsync == FsyncAlways || q.w.size+int64(len(buf))+frameSize(recs[k]) > q.opt.SegmentBytes) {
				break
			}
			buf = appendFrame(buf, recs[k], now)
			k++
		}
		if cap(buf) <= 4<<20 {
			q.w.buf = buf
		}
		if err := q.write(buf); err != nil {
			return done, err
		}
		q.publish(k-done, int64(len(buf)), now)
		done = k
	}
	return n, stop
}

// write writes buf at the end of the current segment and syncs it as the
// policy says. On failure it cuts the segment back to its last good end
// and seals it, so the next Append starts a new one.
func (q *Queue) write(buf []byte) error {
	_, err := q.w.f.Write(buf)
	if err == nil && q.opt.Fsync != FsyncNever {
		err = q.w.f.Sync()
	}
	if err == nil {
		q.w.size += int64(len(buf))
		return nil
	}
	name := q.w.f.Name()
	_ = q.w.f.Truncate(q.w.size)
	q.w.f.Close()
	q.w.f = nil
	q.mu.Lock()
	q.w.seg.sealed = true
	q.mu.Unlock()
	return fmt.Errorf("queue: append to %s: %w", name, err)
}

// checkRemoved seals the current segment if its file was removed under
// the queue (no link left), so that what comes next goes to a file that
// exists; what the removed one held is the reader's to count (settle).
func (q *Queue) checkRemoved() {
	if q.w.f == nil {
		return
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(q.w.f.Fd()), &st); err != nil || st.Nlink > 0 {
		return
	}
	if q.opt.OnDamage != nil {
		// Not counted: what it costs is told when the reader finds the
		// file missing, or at Close.
		q.opt.OnDamage(Damage{File: q.w.f.Name(), Bytes: q.w.size, Results: -1, Cause: "segment file removed while appended to, appending to a new one (what was not delivered of it is counted when it is lost)"})
	}
	q.w.f.Close()
	q.w.f = nil
	q.mu.Lock()
	q.w.seg.sealed = true
	q.mu.Unlock()
}

// publish makes records written and synced visible to the reader.
func (q *Queue) publish(n int, bytes, now int64) {
	q.mu.Lock()
	q.w.seg.size = q.w.size
	q.w.seg.records += int64(n)
	q.disk += bytes
	if q.records == 0 {
		q.head = now
	}
	q.records += int64(n)
	q.appended += int64(n)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// roll seals the current segment and starts the next one.
func (q *Queue) roll() error {
	if q.w.f != nil {
		q.w.f.Close()
		q.w.f = nil
		q.mu.Lock()
		q.w.seg.sealed = true
		q.mu.Unlock()
	}
	id := q.w.nextID
	q.w.nextID++
	path := filepath.Join(q.dir, segName(id))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return fmt.Errorf("queue: new segment: %w", err)
	}
	_, err = f.Write(appendSegHeader(nil))
	if err == nil && q.opt.Fsync != FsyncNever {
		if err = f.Sync(); err == nil {
			err = syncDir(q.dir)
		}
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("queue: new segment %s: %w", path, err)
	}
	s := &segment{id: id, size: segHeaderSize}
	q.w.f, q.w.seg, q.w.size = f, s, segHeaderSize
	q.mu.Lock()
	q.segs = append(q.segs, s)
	q.disk += segHeaderSize
	q.mu.Unlock()
	return nil
}

// reserveAck allocates the ack file's blocks (fallocate, keeping its
// size), so that writing a position never needs space: the first write of
// a new, empty file is what ENOSPC would refuse, and every record
// acknowledged since would come again after a restart. Once allocated, the
// slots are rewritten in place. A file system without fallocate is left
// as it is: there is nothing better to do.
func (q *Queue) reserveAck() error {
	if q.ackReserved.Load() {
		return nil
	}
	err := unix.Fallocate(int(q.r.ack.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, ackFileSize)
	if err != nil && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("queue: reserve space for %s: %w", q.r.ack.Name(), err)
	}
	q.ackReserved.Store(true)
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

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
