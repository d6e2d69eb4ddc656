package stages

import (
	"sync"
	"sync/atomic"
	"time"
)

// Read budgets: the read buffers taken off client sockets that the decrypt
// stage has not consumed yet. Past the per-connection one a connection is
// not read further; past the global one no connection is read or accepted
// (decrypt never waits for reading, so the budget always comes back), so a
// backlog stays in
// the kernel's socket buffers and listen queue, where the client waits (as
// with stock, which reads one connection at a time), instead of in our
// memory: memory under overload does not grow with the number of clients.
const (
	readBudgetBytes   = 8 << 20
	readBudgetPerConn = 64 << 10
	// acceptBudgetPoll is how often a paused accept looks at the budget again.
	acceptBudgetPoll = 2 * time.Millisecond
)

// readBudget is shared by the read stage (which takes), the decrypt stage
// (which releases) and the accept stage (which waits while it is spent).
type readBudget struct {
	limit, perConn int64
	inflight       atomic.Int64
	// saturatedReaders counts the readers whose last epoll_wait filled its
	// event array.
	saturatedReaders atomic.Int32

	mu      sync.Mutex
	readers []*reader
}

func newReadBudget() *readBudget {
	return &readBudget{limit: readBudgetBytes, perConn: readBudgetPerConn}
}

// spent reports whether no connection may be read now.
func (b *readBudget) spent() bool { return b.inflight.Load() >= b.limit }

// connSpent reports whether c may not be read now.
func (b *readBudget) connSpent(c *Conn) bool {
	return b.spent() || c.inflight.Load() >= b.perConn
}

// take counts a read buffer of n bytes' capacity taken off c.
func (b *readBudget) take(c *Conn, n int) { b.adjust(c, int64(n)) }

// release gives back a read buffer of c that decrypt consumed.
func (b *readBudget) release(c *Conn, n int) { b.adjust(c, -int64(n)) }

// adjust changes what c and the whole budget hold by delta, and wakes the
// readers that paused connections when budget came back.
func (b *readBudget) adjust(c *Conn, delta int64) {
	now := b.inflight.Add(delta)
	conn := c.inflight.Add(delta)
	if delta >= 0 {
		return
	}
	switch {
	case now < b.limit && now-delta >= b.limit:
		b.mu.Lock()
		readers := b.readers
		b.mu.Unlock()
		for _, r := range readers {
			r.wake()
		}
	case c.paused.Load() && conn < b.perConn && c.reader != nil:
		c.reader.wake()
	}
}

// saturated reports whether a reader has more ready connections than it
// serves in one round. The accept stage asks before every accept, so it
// reads one atomic rather than the readers.
func (b *readBudget) saturated() bool { return b.saturatedReaders.Load() > 0 }

func (b *readBudget) register(r *reader) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.readers = append(b.readers, r)
}
