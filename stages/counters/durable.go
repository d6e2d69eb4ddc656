package counters

// DurableQueue is the state of one destination's durable disk queue
// (queue_directory) as the statistics and metrics report it.
type DurableQueue struct {
	// Results and Bytes are what waits on disk for the engine: gauges.
	Results, Bytes int64
	// OldestSeconds is how long the oldest queued result has waited: a
	// gauge, 0 when the queue is empty.
	OldestSeconds float64
	// Replayed counts results delivered out of the queue (after the engine
	// refused them or while older ones waited); Corrupt counts damaged
	// regions skipped (a torn tail after a crash, a record whose checksum
	// failed or that did not decode, a segment file removed or cut short).
	Replayed, Corrupt uint64
	// Lost counts the results those regions cost where that is known;
	// LostUnknown counts the regions whose cost no one can tell (damage
	// found when a queue opens, in files no process of it had read).
	Lost, LostUnknown uint64
}

// add sums o into q, for several worker processes: each has its own
// queue, so sizes and counters add up and the oldest is the oldest of all.
func (q *DurableQueue) add(o DurableQueue) {
	q.Results += o.Results
	q.Bytes += o.Bytes
	q.OldestSeconds = max(q.OldestSeconds, o.OldestSeconds)
	q.Replayed += o.Replayed
	q.Corrupt += o.Corrupt
	q.Lost += o.Lost
	q.LostUnknown += o.LostUnknown
}

// RegisterDurable makes Snapshot read the durable queue of destination
// name with read; a later registration under the same name replaces it.
func (s *Stats) RegisterDurable(name string, read func() DurableQueue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.durable == nil {
		s.durable = map[string]func() DurableQueue{}
	}
	s.durable[name] = read
}

// readDurable reads every registered durable queue; s.mu is held.
func (s *Stats) readDurable() map[string]DurableQueue {
	if len(s.durable) == 0 {
		return nil
	}
	out := make(map[string]DurableQueue, len(s.durable))
	for name, read := range s.durable {
		out[name] = read()
	}
	return out
}

// addDurable sums src into *dst by destination.
func addDurable(dst *map[string]DurableQueue, src map[string]DurableQueue) {
	if len(src) == 0 {
		return
	}
	if *dst == nil {
		*dst = map[string]DurableQueue{}
	}
	for k, v := range src {
		q := (*dst)[k]
		q.add(v)
		(*dst)[k] = q
	}
}

// retireDurable keeps the counters of queues whose pipeline ended and
// drops their gauges: the next pipeline reopens the same directory and
// reports what is on disk itself.
func retireDurable(m map[string]DurableQueue) {
	for k, v := range m {
		v.Results, v.Bytes, v.OldestSeconds = 0, 0, 0
		m[k] = v
	}
}
