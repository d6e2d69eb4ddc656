package sink

import (
	"errors"
	"fmt"

	"nsca_fast/stages/emit/queue"
)

// replayQueue is a durable queue directory that Replay reads: the queue of
// a remote destination the configuration no longer has, or of a daemon
// that is stopped. Its records stay in it until every destination took
// them.
type replayQueue struct {
	dir string
	q   *queue.Queue
	// item holds, per record in queue order, the index of its result in
	// Replay's items, or -1 for a record that does not decode (skipped).
	item []int
}

// isQueueDir reports whether dir holds a durable queue rather than a spool.
func isQueueDir(dir string) bool {
	_, found, err := queue.Pending(dir)
	return err == nil && found
}

// readQueue opens the durable queue in dir and reads every result it has
// not acknowledged, in order, without acknowledging any. A queue a running
// daemon has open is refused: the daemon delivers it itself.
func readQueue(dir string, rep *ReplayReport) ([]Item, *replayQueue, error) {
	q, err := queue.Open(dir, queue.Options{})
	if errors.Is(err, queue.ErrLocked) {
		return nil, nil, fmt.Errorf("%w: the queue %s is open in a running nsca, which delivers it: %w", ErrReplayInput, dir, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrReplayInput, err)
	}
	rq := &replayQueue{dir: dir, q: q}
	recs, err := q.Peek(int(q.Stats().Records))
	if err != nil {
		q.Close()
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrReplayInput, dir, err)
	}
	var items []Item
	for i, r := range recs {
		it, err := decodeRecord(r.Data)
		if err != nil {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: record %d: %v", dir, i+1, err))
			rq.item = append(rq.item, -1)
			continue
		}
		rq.item = append(rq.item, len(items))
		items = append(items, it)
	}
	if st := q.Stats(); st.Corrupt > 0 {
		rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %d damaged regions (%d bytes)", dir, st.Corrupt, st.CorruptBytes))
	}
	rep.Read, rep.FromQueue = len(items), true
	return items, rq, nil
}

// finish acknowledges the records, from the oldest, whose result every one
// of the sinks destinations took (and those that did not decode), so that
// a second replay does not send them again; it stops at the first one a
// destination did not take, which keeps the rest in order for the next
// try. An emptied queue directory is removed. The queue is closed.
func (rq *replayQueue) finish(taken []int, sinks int, rep *ReplayReport) error {
	done := 0
	for _, i := range rq.item {
		if i >= 0 && taken[i] < sinks {
			break
		}
		done++
	}
	var errs []error
	if done > 0 {
		if err := rq.q.Ack(done); err != nil {
			errs = append(errs, fmt.Errorf("sink: replay: acknowledge in %s: %w", rq.dir, err))
		} else {
			rep.Acked = done
		}
	}
	q := rq.q
	rq.q = nil
	if q.Stats().Records > 0 || len(errs) > 0 {
		if err := q.Close(); err != nil {
			errs = append(errs, fmt.Errorf("sink: replay: %w", err))
		}
		return errors.Join(errs...)
	}
	if err := q.Remove(); err != nil {
		return fmt.Errorf("sink: replay: remove the emptied queue: %w", err)
	}
	rep.QueueRemoved = true
	return nil
}

// close gives the queue up unchanged, when Replay stops before delivering.
func (rq *replayQueue) close() {
	if rq != nil && rq.q != nil {
		rq.q.Close()
		rq.q = nil
	}
}
