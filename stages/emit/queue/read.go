package queue

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Peek returns up to n of the oldest unacknowledged records, reading them
// from disk as needed, without waiting: none when the queue is empty
// (wait on Ready). Peek again without Ack returns the same records first.
// The slice is valid until the next Peek or Ack; the records' Data stays
// valid. Damaged records met on the way are skipped and counted.
func (q *Queue) Peek(n int) ([]Record, error) {
	q.rmu.Lock()
	defer q.rmu.Unlock()
	if q.r.closed {
		return nil, ErrClosed
	}
	err := q.fill(n)
	avail := len(q.r.recs) - q.r.ph
	if avail == 0 {
		// Nothing pending: what was read (segment ends, damage) is
		// passed for good.
		if aerr := q.persistAck(); err == nil {
			err = aerr
		}
	}
	k := max(min(n, avail), 0)
	if k > 0 {
		err = nil // the records read are good; the error comes back next time
	}
	return q.r.recs[q.r.ph : q.r.ph+k : q.r.ph+k], err
}

// Ack acknowledges the n oldest records returned by Peek: they leave the
// queue, and the position after them is persisted (synced under
// FsyncAlways). Segments wholly acknowledged are deleted. If persisting
// fails, the records are gone from this Queue but may be delivered again
// after a restart; the error says so.
func (q *Queue) Ack(n int) error {
	q.rmu.Lock()
	defer q.rmu.Unlock()
	if q.r.closed {
		return ErrClosed
	}
	pending := len(q.r.recs) - q.r.ph
	if n < 0 || n > pending {
		return fmt.Errorf("%w: %d of %d", ErrAckRange, n, pending)
	}
	if n == 0 {
		return nil
	}
	clear(q.r.recs[q.r.ph : q.r.ph+n]) // let the chunks go
	q.r.ph += n
	if q.r.ph == len(q.r.recs) {
		q.r.recs, q.r.pos, q.r.ph = q.r.recs[:0], q.r.pos[:0], 0
	}
	err := q.persistAck()
	q.mu.Lock()
	q.records -= int64(n)
	q.acked += int64(n)
	left := q.records
	if left <= 0 {
		q.records, q.head = 0, 0
	} else if q.r.ph < len(q.r.recs) {
		q.head = q.r.recs[q.r.ph].Appended.UnixNano()
	}
	q.mu.Unlock()
	if left > 0 && q.r.ph == len(q.r.recs) {
		// Read the next record ahead for Stats.Oldest; Peek needs it next.
		if q.fill(1) == nil && q.r.ph < len(q.r.recs) {
			q.mu.Lock()
			if q.records > 0 {
				q.head = q.r.recs[q.r.ph].Appended.UnixNano()
			}
			q.mu.Unlock()
		}
	}
	return err
}

// readPos is the reader's position: after everything read.
func (q *Queue) readPos() (uint64, int64) {
	if q.r.sc == nil {
		if q.r.seg == q.r.ackSeg {
			return q.r.seg, q.r.ackOff
		}
		return q.r.seg, segHeaderSize
	}
	return q.r.seg, q.r.sc.off
}

// persistAck writes the acknowledged position, the start of the oldest
// pending record or else the read position, to the ack file, and deletes
// the segments before it. The segments go first: removing a file needs no
// space, so on a full file system it frees what the ack file may need, and
// a segment removed never comes again whether or not the write succeeds.
func (q *Queue) persistAck() error {
	seg, off := q.readPos()
	if q.r.ph < len(q.r.recs) {
		p := q.r.pos[q.r.ph]
		seg, off = p.seg, p.start
	}
	if seg == q.r.ackSeg && off == q.r.ackOff && !q.r.ackDirty {
		return nil
	}
	q.r.ackSeg, q.r.ackOff = seg, off
	var gone []*segment
	q.mu.Lock()
	q.ackSeg, q.ackOff = seg, off
	for len(q.segs) > 0 && q.segs[0].id < seg {
		gone = append(gone, q.segs[0])
		q.disk -= q.segs[0].size
		q.segs = q.segs[1:]
	}
	q.mu.Unlock()
	var err error
	for _, s := range gone {
		delete(q.r.known, s.id)
		if rerr := os.Remove(filepath.Join(q.dir, segName(s.id))); rerr != nil && !os.IsNotExist(rerr) && err == nil {
			err = rerr
		}
	}
	if werr := q.writeAck(); err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("queue: ack: %w", err)
	}
	return nil
}

// writeAck writes the reader's acknowledged position to the ack file
// (synced under FsyncAlways). After a failure the position is written
// again by the next persistAck or Close, even if it did not move.
func (q *Queue) writeAck() error {
	_ = q.reserveAck() // the write may succeed all the same
	q.r.ackN++
	encodeAck(&q.r.ackBuf, ackPos{counter: q.r.ackN, seg: q.r.ackSeg, off: q.r.ackOff})
	_, err := q.r.ack.WriteAt(q.r.ackBuf[:], int64(q.r.ackN%2)*ackSlotSize)
	if err == nil && q.opt.Fsync == FsyncAlways {
		err = q.r.ack.Sync()
	}
	q.r.ackDirty = err != nil
	return err
}

// fill reads records until n are pending or nothing more is published.
func (q *Queue) fill(n int) error {
	if q.r.ph > 0 && q.r.ph >= len(q.r.recs)/2 {
		k := copy(q.r.recs, q.r.recs[q.r.ph:])
		copy(q.r.pos, q.r.pos[q.r.ph:])
		clear(q.r.recs[k:])
		q.r.recs, q.r.pos, q.r.ph = q.r.recs[:k], q.r.pos[:k], 0
	}
	for len(q.r.recs)-q.r.ph < n {
		q.mu.Lock()
		var cur, next *segment
		for _, s := range q.segs {
			if s.id == q.r.seg {
				cur = s
			} else if s.id > q.r.seg {
				next = s
				break
			}
		}
		var size, records int64
		var sealed bool
		if cur != nil {
			size, sealed, records = cur.size, cur.sealed, cur.records
		}
		q.mu.Unlock()
		if cur == nil || q.r.gone || (q.r.sc != nil && q.r.sc.off >= size) {
			if cur != nil {
				q.settle(cur.id, size, records)
			}
			if cur != nil && sealed && next == nil {
				// Past the end of a segment no one appends to: move on to
				// the id the writer will use next, so that persistAck
				// removes it and its space comes back now, not when the
				// writer starts another (on a full disk, never).
				q.moveTo(cur.id + 1)
				return nil
			}
			if next == nil || (cur != nil && !sealed) {
				return nil // caught up
			}
			q.moveTo(next.id)
			continue
		}
		if q.r.sc == nil {
			if err := q.openSegment(size); errors.Is(err, fs.ErrNotExist) {
				q.r.gone = true
				q.r.missing = append(q.r.missing, Damage{File: filepath.Join(q.dir, segName(q.r.seg)), Bytes: size, Results: -1, Cause: "segment file removed"})
			} else if err != nil {
				return err
			}
			continue
		}
		sc := q.r.sc
		sc.end = size
		for len(q.r.recs)-q.r.ph < n {
			ev, err := sc.next()
			if err != nil {
				return fmt.Errorf("queue: read %s: %w", segName(q.r.seg), err)
			}
			if ev.kind == evEnd {
				break
			}
			if ev.kind == evDamage {
				if ev.badData && !q.r.known[q.r.seg][ev.start] {
					q.r.taken++ // one of the records counted in the segment
				}
				q.noteDamage(q.r.seg, ev.start, ev.end-ev.start, false, ev.lost(), ev.cause())
				continue
			}
			q.r.taken++
			q.r.recs = append(q.r.recs, Record{Data: ev.data, Appended: time.Unix(0, ev.time)})
			q.r.pos = append(q.r.pos, recPos{seg: q.r.seg, start: ev.start, end: ev.end})
			// A record cut short by a shorter file than published: the
			// scanner moved end; keep going with the next segment.
		}
		if sc.end < size {
			// The file was cut while open: the rest is gone.
			q.r.missing = append(q.r.missing, Damage{File: filepath.Join(q.dir, segName(q.r.seg)), Offset: sc.end, Bytes: size - sc.end, Results: -1, Cause: "segment file cut short"})
			sc.off = size
		}
		if len(q.r.recs)-q.r.ph < n && sc.off >= size && !sealed {
			return nil
		}
	}
	return nil
}

// moveTo leaves the current segment for segment id.
func (q *Queue) moveTo(id uint64) {
	if q.r.f != nil {
		q.r.f.Close()
	}
	q.r.f, q.r.sc, q.r.seg = nil, nil, id
	q.r.taken, q.r.missing, q.r.gone = 0, nil, false
}

// settle tells what the damage the reader found in segment id cost, now
// that it has passed everything published in it (size): of the records
// counted in the segment (at Open, and appended since; records, read with
// size), those it did not read. With one region found,
// that is its cost; with several, their sum is reported with each.
// Records missing with no damage found (a file replaced) are a region of
// their own at the end.
func (q *Queue) settle(id uint64, size, records int64) {
	short := records - q.r.taken
	if short <= 0 && len(q.r.missing) == 0 {
		return
	}
	q.r.taken += max(short, 0)
	short = max(short, 0)
	regions := q.r.missing
	q.r.missing = nil
	if len(regions) == 0 {
		if q.r.gone {
			// More records went to the removed file after it was
			// reported (the writer had not noticed yet).
			q.mu.Lock()
			q.lost += short
			q.mu.Unlock()
			return
		}
		regions = []Damage{{File: filepath.Join(q.dir, segName(id)), Offset: size, Cause: "records missing"}}
	}
	for i, d := range regions {
		d.Results = short
		if len(regions) > 1 {
			d.Cause += fmt.Sprintf(" (%d regions of this segment lost these together)", len(regions))
		}
		if i == 0 {
			q.report(d, short)
		} else {
			q.report(d, 0) // the sum is counted once
		}
	}
}

// openSegment opens the reader's segment and checks its header.
func (q *Queue) openSegment(size int64) error {
	f, err := os.Open(filepath.Join(q.dir, segName(q.r.seg)))
	if err != nil {
		return fmt.Errorf("queue: %w", err)
	}
	var hb [segHeaderSize]byte
	if n, _ := f.ReadAt(hb[:], 0); !validSegHeader(hb[:n]) {
		q.noteDamage(q.r.seg, 0, min(size, segHeaderSize), false, -1, "bad segment header")
	}
	start := min(segHeaderSize, size)
	if q.r.seg == q.r.ackSeg {
		start = q.r.ackOff
	}
	q.r.f = f
	q.r.sc = &scanner{f: f, off: start, end: size, fresh: true}
	return nil
}
