package frontend

import (
	"context"
	"time"
)

// Recheck is how often a front end waiting at its gate looks at the
// queue it feeds again: that queue drains without telling anyone.
const Recheck = 2 * time.Millisecond

// WaitRoom waits while full reports that the queue a front end feeds has
// no room, so that new clients wait in the kernel's listen queue, as with
// stock, rather than in our memory. It reports false once ctx is done or
// stop is closed.
func WaitRoom(ctx context.Context, stop <-chan struct{}, full func() bool) bool {
	if !full() {
		return true
	}
	timer := time.NewTimer(Recheck)
	defer timer.Stop()
	for full() {
		select {
		case <-timer.C:
			timer.Reset(Recheck)
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}
