package sink

import "time"

// Backoff spaces out attempts at a destination that is down (a command
// file without a reader, job servers or an API that do not answer): after
// each failure the next attempt waits twice as long, from First up to Max,
// so an outage costs one attempt per interval instead of one per batch.
type Backoff struct {
	First, Max time.Duration
	wait       time.Duration
	until      time.Time
}

// Failed starts or lengthens the wait.
func (b *Backoff) Failed() {
	b.wait = min(max(2*b.wait, b.First), b.Max)
	b.until = time.Now().Add(b.wait)
}

// Succeeded ends the wait and starts the next outage from First again.
func (b *Backoff) Succeeded() { b.wait, b.until = 0, time.Time{} }

// Left is how long attempts must still wait; 0 or less means try now.
func (b *Backoff) Left() time.Duration { return time.Until(b.until) }
