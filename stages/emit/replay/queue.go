package replay

import (
	"errors"
	"fmt"

	"nsca_fast/stages/emit/durable"
	"nsca_fast/stages/emit/sink"

	"nsca_fast/stages/emit/queue"
)

// replayQueueChunk is how many records of a queue Replay reads, delivers
// and acknowledges at a time: its memory stays bounded whatever the queue
// holds (up to queue_max_bytes, a GiB by default).
const replayQueueChunk = 4096

// replayQueue is a durable queue directory that Replay delivers: the queue
// of a remote destination the configuration no longer has, or of a daemon
// that is stopped. A record leaves it only once every destination took its
// result.
type replayQueue struct {
	dir   string
	q     *queue.Queue
	chunk int
	// item holds, per record of the chunk in queue order, the index of its
	// result in the chunk's items, or -1 for a record that does not decode
	// (skipped).
	item []int
}

// isQueueDir reports whether dir holds a durable queue rather than a spool.
func isQueueDir(dir string) bool {
	_, found, err := queue.Pending(dir)
	return err == nil && found
}

// openReplayQueue opens the durable queue in dir for Replay. A queue a
// running daemon has open is refused: that daemon delivers it itself.
func openReplayQueue(dir string) (*replayQueue, error) {
	q, err := queue.Open(dir, queue.Options{})
	if errors.Is(err, queue.ErrLocked) {
		return nil, fmt.Errorf("%w: the queue %s is open in a running nsca, which delivers it: %w", errInput, dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInput, err)
	}
	return &replayQueue{dir: dir, q: q, chunk: replayQueueChunk}, nil
}

// deliver sends the queue through sinks a chunk at a time, oldest first,
// acknowledging after each chunk what every sink took. It stops at the
// first result a sink did not take, so that the next replay resumes there
// in order; what it did not read then counts as left for every sink. It
// ends by closing the queue, or removing it once emptied.
func (rq *replayQueue) deliver(sinks []sink.Sink, prog *tracker, rep *Report) []error {
	rep.FromQueue = true
	var errs []error
	for {
		items, records, err := rq.read(rep)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if records == 0 {
			break
		}
		taken := make([]int, len(items))
		prog.total += len(items)
		for _, s := range sinks {
			if err := replayInto(s, items, taken, prog, rep); err != nil {
				errs = append(errs, err)
			}
		}
		acked, err := rq.ackTaken(taken, len(sinks))
		rep.Acked += acked
		if err != nil {
			errs = append(errs, err)
		}
		if acked < records || len(errs) > 0 {
			unread := int(rq.q.Stats().Records) - (records - acked)
			for _, s := range sinks {
				rep.Left[s.Name()] += unread
			}
			break
		}
	}
	if st := rq.q.Stats(); st.Corrupt > 0 {
		rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %d damaged regions (%d bytes)", rq.dir, st.Corrupt, st.CorruptBytes))
	}
	if err := rq.finish(rep); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// read returns the results of the next chunk of records, how many records
// that chunk holds, and reports the records that do not decode as skipped.
func (rq *replayQueue) read(rep *Report) ([]sink.Item, int, error) {
	recs, err := rq.q.Peek(rq.chunk)
	if len(recs) == 0 {
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %s: %w", errInput, rq.dir, err)
		}
		return nil, 0, nil
	}
	var items []sink.Item
	rq.item = rq.item[:0]
	for _, r := range recs {
		it, err := durable.DecodeRecord(r.Data)
		if err != nil {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: record %d: %v", rq.dir, rep.Acked+len(rq.item)+1, err))
			rq.item = append(rq.item, -1)
			continue
		}
		rq.item = append(rq.item, len(items))
		items = append(items, it)
	}
	rep.Read += len(items)
	return items, len(recs), nil
}

// ackTaken acknowledges the records of the chunk, from the oldest, whose
// result every one of the sinks took (and those that did not decode), up
// to the first one a sink did not take, and returns how many.
func (rq *replayQueue) ackTaken(taken []int, sinks int) (int, error) {
	done := 0
	for _, i := range rq.item {
		if i >= 0 && taken[i] < sinks {
			break
		}
		done++
	}
	if done == 0 {
		return 0, nil
	}
	if err := rq.q.Ack(done); err != nil {
		return 0, fmt.Errorf("sink: replay: acknowledge in %s: %w", rq.dir, err)
	}
	return done, nil
}

// finish closes the queue, or removes it (directory and all) when nothing
// is left in it.
func (rq *replayQueue) finish(rep *Report) error {
	q := rq.q
	rq.q = nil
	if q.Stats().Records > 0 {
		if err := q.Close(); err != nil {
			return fmt.Errorf("sink: replay: %w", err)
		}
		return nil
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
