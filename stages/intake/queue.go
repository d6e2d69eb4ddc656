package intake

import "sync/atomic"

// Queue is the validate stage's input, which every front end of a
// pipeline sends its submissions to. Each front end Joins before the
// pipeline starts and Leaves once it will send nothing more; the last to
// leave closes C, which starts the drain of the stages after it.
type Queue struct {
	C       chan Submission
	senders atomic.Int32
}

// NewQueue returns a queue holding up to depth submissions.
func NewQueue(depth int) *Queue { return &Queue{C: make(chan Submission, max(depth, 1))} }

// Join counts one more front end that will send.
func (q *Queue) Join() { q.senders.Add(1) }

// Leave says a front end sends no more; the last closes C.
func (q *Queue) Leave() {
	if q.senders.Add(-1) == 0 {
		close(q.C)
	}
}

// Full says whether a send would wait: the front ends' accept gates
// close while it is.
func (q *Queue) Full() bool { return len(q.C) == cap(q.C) }
