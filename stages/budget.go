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
	// readBudgetWork bounds the global budget by time as well: no more
	// bytes than the decrypt stage gets through in this long. With a slow
	// cipher (3DES: about 1 ms per packet) 8 MiB would be two seconds of
	// work queued ahead of every new check; stock leaves that backlog in
	// the kernel, and so do we.
	readBudgetWork = 35 * time.Millisecond
	// readBudgetMin is the least the global budget shrinks to.
	readBudgetMin = 4 * readBudgetPerConn
)

// readBudget is shared by the read stage (which takes), the decrypt stage
// (which releases, and says what decrypting costs) and the accept stage
// (which waits while it is spent).
type readBudget struct {
	perConn  int64
	maxBytes int64 // the most limit grows to
	limit    atomic.Int64
	inflight atomic.Int64
	// parallel is how many decrypt goroutines run at once; nsPerKiB is
	// their running average cost, 0 until a cipher reports one (XOR does
	// not: it is too cheap to matter).
	parallel int64
	nsPerKiB atomic.Int64
	// saturatedReaders counts the readers whose last epoll_wait filled its
	// event array.
	saturatedReaders atomic.Int32
	// heldBack counts the connections paused because the global budget
	// was spent: while there are any, clients we already greeted wait for
	// us, so the accept stage greets no more (a greeted client sends at
	// once, and its checks' wait starts then; one not yet accepted waits
	// in the listen queue before it sends, as with stock).
	heldBack atomic.Int32

	mu      sync.Mutex
	readers []*reader
}

// newReadBudget makes the budget for a pipeline that decrypts with
// parallel goroutines at once, in one of processes worker processes that
// share readBudgetBytes (with nsca_workers=2 each holds half, so that the
// daemon's memory under overload does not double with its workers).
func newReadBudget(parallel, processes int) *readBudget {
	b := &readBudget{perConn: readBudgetPerConn, parallel: int64(max(parallel, 1))}
	b.maxBytes = max(readBudgetBytes/int64(max(processes, 1)), readBudgetMin)
	b.limit.Store(b.maxBytes)
	return b
}

// spent reports whether no connection may be read now.
func (b *readBudget) spent() bool { return b.inflight.Load() >= b.limit.Load() }

// observe takes the cost of one decrypt call of n bytes into the running
// average, and sizes the global budget to readBudgetWork of decrypting.
// Concurrent calls may lose a sample; the average does not need them all.
func (b *readBudget) observe(n int, took time.Duration) {
	if b == nil || n < 1024 {
		return // too short to time
	}
	sample := max(int64(took)*1024/int64(n), 1)
	avg := b.nsPerKiB.Load()
	if avg == 0 {
		avg = sample
	} else {
		avg += (sample - avg) / 8
	}
	b.nsPerKiB.Store(avg)
	limit := int64(readBudgetWork) * b.parallel / avg * 1024
	b.limit.Store(min(max(limit, readBudgetMin), b.maxBytes))
}

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
	switch limit := b.limit.Load(); {
	case now < limit && now-delta >= limit:
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

// behind reports whether the accept stage should greet no new clients:
// the budget is spent, or connections wait for it, or a reader has more
// ready connections than it serves in one round.
func (b *readBudget) behind() bool {
	return b.spent() || b.heldBack.Load() > 0 || b.saturated()
}

func (b *readBudget) register(r *reader) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.readers = append(b.readers, r)
}
