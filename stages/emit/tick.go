package emit

import "time"

// lazyTicker ticks every flushInterval only while its goroutine has
// something a tick is for: results held by a sink, or a gate closed until
// a sink checks healthy again. An idle daemon's emit goroutines woke ten
// times a second each for nothing, and a worker of nsca_workers that the
// kernel hands no connections (see nsca_workers_spread) cost a trickle's
// checks a few microseconds each that way.
type lazyTicker struct{ t *time.Ticker }

// C is the ticker's channel, or nil (never ready) while it is stopped.
func (l *lazyTicker) C() <-chan time.Time {
	if l.t == nil {
		return nil
	}
	return l.t.C
}

// follow runs the ticker while need holds, and stops it otherwise.
func (l *lazyTicker) follow(need bool) {
	switch {
	case need && l.t == nil:
		l.t = time.NewTicker(flushInterval)
	case !need && l.t != nil:
		l.t.Stop()
		l.t = nil
	}
}
