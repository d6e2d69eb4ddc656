package counters

import "sync"

// Totals sums the counters of pipelines that come and go over a daemon's
// life: servers replaced by a reload, worker processes that exit and are
// restarted. The counters of one that ended carry on in the totals; its
// gauges (open connections, held results, queue depths) do not.
type Totals struct {
	mu      sync.Mutex
	retired Snapshot
	live    map[any]func() Snapshot
}

// Add counts a running pipeline under key; snapshot reads its counters.
func (t *Totals) Add(key any, snapshot func() Snapshot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live == nil {
		t.live = map[any]func() Snapshot{}
	}
	t.live[key] = snapshot
}

// Retire moves key's final counters into the totals and reports whether
// key was running; a second Retire of the same key does nothing.
func (t *Totals) Retire(key any, final Snapshot) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.live[key]; !ok {
		return false
	}
	delete(t.live, key)
	for _, r := range rows {
		if r.shape != derived && r.kind == gauge {
			r.in(&final).SetZero()
		}
	}
	retireDurable(final.Durable)
	t.retired.Add(final)
	return true
}

// Sum is the counters of every pipeline, ended and running.
func (t *Totals) Sum() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	var sum Snapshot
	sum.Add(t.retired)
	for _, snapshot := range t.live {
		sum.Add(snapshot())
	}
	return sum
}
