package queue

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// Opening a queue: recovering its state from the files left by the last
// one, and counting the damage found there.

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
