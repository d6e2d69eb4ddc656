package sink

import "time"

// backoff spaces out attempts at a destination that is down (a command
// file without a reader, job servers or an API that do not answer): after
// each failure the next attempt waits twice as long, from first up to max,
// so an outage costs one attempt per interval instead of one per batch.
type backoff struct {
	first, max time.Duration
	wait       time.Duration
	until      time.Time
}

// failed starts or lengthens the wait.
func (b *backoff) failed() {
	b.wait = min(max(2*b.wait, b.first), b.max)
	b.until = time.Now().Add(b.wait)
}

// succeeded ends the wait and starts the next outage from first again.
func (b *backoff) succeeded() { b.wait, b.until = 0, time.Time{} }

// left is how long attempts must still wait; 0 or less means try now.
func (b *backoff) left() time.Duration { return time.Until(b.until) }
