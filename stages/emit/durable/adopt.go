package durable

import (
	"errors"
	"time"

	"github.com/golang/glog"

	"nsca_fast/stages/emit/queue"
)

// adopt moves into q what waits in the queue directories LeftBehind lists,
// then removes them, so that results queued by a worker slot the
// configuration no longer has (nsca_workers lowered, or switched to or
// from a single process) are delivered instead of waiting on disk for a
// slot that never comes back. A directory still held (its worker of the
// previous generation is draining) is tried again every reopenEvery until
// it is free; the adopter ends when none is left, or at Close.
//
// The results join the end of q and are delivered by its drainer, after
// what q held already; q counts their time on disk from the move. A
// record is acknowledged in its old queue only once q stored it (synced
// as queue_fsync says): a crash in between delivers it twice rather than
// never.
func (d *Durable) adopt(q *queue.Queue) {
	defer d.workers.Done()
	for {
		dirs, err := d.cfg.LeftBehind()
		if err != nil && d.cfg.Log != nil {
			d.cfg.Log.Warningf("durable-adopt:"+d.name, "%s: looking for queues of removed worker slots: %v", d.name, err)
		}
		held := 0
		for _, dir := range dirs {
			if !d.adoptDir(q, dir) {
				held++
			}
		}
		if held == 0 && err == nil {
			return
		}
		select {
		case <-d.stop:
			return
		case <-time.After(reopenEvery):
		}
	}
}

// adoptDir moves the results of the queue in dir into q and removes dir.
// It reports whether dir is done with; false leaves it for the next try.
func (d *Durable) adoptDir(q *queue.Queue, dir string) bool {
	old, err := queue.Open(dir, d.queueOptions())
	if err != nil {
		if !errors.Is(err, queue.ErrLocked) && d.cfg.Log != nil {
			d.cfg.Log.Warningf("durable-adopt:"+d.name, "%s: queue %s of a removed worker slot not open: %v", d.name, dir, err)
		}
		return false
	}
	moved, left, err := d.moveRecords(q, old)
	if moved > 0 {
		glog.Infof("%s: took over %d results queued in %s by a removed worker slot", d.name, moved, dir)
	}
	if err != nil || left > 0 {
		old.Close()
		if d.cfg.Log != nil {
			d.cfg.Log.Warningf("durable-adopt:"+d.name, "%s: %d results stay in %s, of a removed worker slot, for now: %v", d.name, left, dir, err)
		}
		return false
	}
	if err := old.Remove(); err != nil {
		glog.Errorf("%s: removing the emptied queue %s: %v", d.name, dir, err)
	}
	return true
}

// moveRecords appends old's records to q in order, acknowledging in old
// each run q stored, until old is empty, q refuses (full, or failing) or
// Close. left is what old still holds.
func (d *Durable) moveRecords(q, old *queue.Queue) (moved, left int64, err error) {
	var data [][]byte
	for {
		select {
		case <-d.stop:
			return moved, old.Stats().Records, nil
		default:
		}
		recs, perr := old.Peek(drainBatch)
		if len(recs) == 0 {
			return moved, old.Stats().Records, perr
		}
		data = data[:0]
		for _, r := range recs {
			data = append(data, r.Data)
		}
		n, aerr := q.Append(data...)
		if n > 0 {
			// An acknowledgement that could not be written (a full disk)
			// does not stop the move: old has let the records go, and
			// stopping would reopen it at the written position and move
			// them twice. Emptied segments are removed all the same.
			if err := old.Ack(n); err != nil {
				glog.Errorf("%s: %v", d.name, err)
			}
			moved += int64(n)
		}
		if aerr != nil {
			return moved, old.Stats().Records, aerr
		}
	}
}
