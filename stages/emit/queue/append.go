package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The writer's side: appending records, rolling segments, syncing.

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

// syncDir syncs the directory itself: a new segment's name is durable only
// then, and a crash could otherwise lose the file with its synced records.
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
