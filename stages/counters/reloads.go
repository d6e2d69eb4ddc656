package counters

import (
	"sync/atomic"
	"time"
)

// Reloads counts the daemon's reloads for the metrics: how many were
// tried, how many failed, and when the last one was and how it went.
type Reloads struct {
	total, failures atomic.Uint64
	last            atomic.Int64 // unix nanoseconds
	lastFailed      atomic.Bool
}

// Started records the start as the first successful load.
func (r *Reloads) Started(at time.Time) { r.last.Store(at.UnixNano()) }

// Record counts one reload that ended with err (nil: it succeeded); on a
// nil Reloads it does nothing.
func (r *Reloads) Record(err error) {
	if r == nil {
		return
	}
	r.total.Add(1)
	if err != nil {
		r.failures.Add(1)
	}
	r.lastFailed.Store(err != nil)
	r.last.Store(time.Now().UnixNano())
}
