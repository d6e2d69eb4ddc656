package nsca

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Read budgets: the read buffers taken off client sockets that the decrypt
// stage has not consumed yet. Past the per-connection one a connection is
// not read further; past the global one no connection is read or accepted
// (decrypt never waits for reading, so the budget always comes back), so a
// backlog stays in the kernel's socket buffers and listen queue, where the
// client waits (as with stock, which reads one connection at a time),
// instead of in our memory: memory under overload does not grow with the
// number of clients.
const (
	readBudgetBytes   = 8 << 20
	readBudgetPerConn = 64 << 10
	// readBudgetWork bounds the global budget by time as well: no more
	// bytes than the decrypt stage gets through in this long. With a slow
	// cipher (3DES: about 1 ms per packet) 8 MiB would be two seconds of
	// work queued ahead of every new check; stock leaves that backlog in
	// the kernel, and so do we.
	readBudgetWork = 35 * time.Millisecond
	// readBudgetMin is the least the global budget shrinks to.
	readBudgetMin = 4 * readBudgetPerConn
	// flowRecheck bounds how long a waiting accept goes without looking at
	// the gate again. The queue ahead (queueFull) drains without telling
	// the flow (a chunk that only ends a connection gives nothing back), so
	// a wait for it alone ends at the latest after this long, as often as
	// accept looked when it polled.
	flowRecheck = 2 * time.Millisecond
)

// flow is the flow control of one front end (accept → read → decrypt, or
// the nsca-ng listener): the global and per-connection read budgets and
// the gate in front of accepting new clients. Front ends take what they
// read off a socket, the stage that consumes it gives it back, and accept
// waits at the gate while the stages after it cannot take more, so that
// new clients wait in the kernel's listen queue, as with stock.
//
// Its invariants, which every caller keeps by using only these methods
// (no other code touches its fields or a clientConn's flow fields):
//   - Every take is matched by one giveBack of the same size, once the
//     bytes are consumed; the consumer never waits for the taker, so the
//     budget always comes back.
//   - A connection is paused (pause) only by its reader's goroutine, and
//     unpaused (unpause) by it before the connection is forgotten; one
//     paused while the global budget was spent is held back, which closes
//     the gate, until release or unpause.
//   - A reader reports saturate(true) and saturate(false) only when its
//     state changes, so the count is the number of saturated readers.
//   - Whatever may open the gate (a giveBack, the last held-back
//     connection released, the last saturated reader relieved, a larger
//     limit) calls opened, which wakes waitRoom's callers only while there
//     are any: the per-chunk path costs a few atomic operations.
type flow struct {
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
	// queueFull, when set, reports that the queue the front end feeds is
	// full: no new client is accepted meanwhile either.
	queueFull func() bool
	// recheck is how long waitRoom sleeps at most: flowRecheck.
	recheck time.Duration

	// waiters counts the goroutines in waitRoom; room is closed to wake
	// them when the gate may have opened, and made anew by the next one.
	waiters atomic.Int32
	mu      sync.Mutex
	room    chan struct{}
	readers []*reader
}

// newFlow makes the flow control for a front end whose bytes parallel
// goroutines decrypt at once, in one of processes worker processes that
// share readBudgetBytes (with nsca_workers=2 each holds half, so that the
// daemon's memory under overload does not double with its workers).
// queueFull, when not nil, closes the gate while it reports true.
func newFlow(parallel, processes int, queueFull func() bool) *flow {
	f := &flow{perConn: readBudgetPerConn, parallel: int64(max(parallel, 1)), queueFull: queueFull, recheck: flowRecheck}
	f.maxBytes = max(readBudgetBytes/int64(max(processes, 1)), readBudgetMin)
	f.limit.Store(f.maxBytes)
	return f
}

// take counts a read buffer of n bytes' capacity taken off c.
func (f *flow) take(c *clientConn, n int) { f.adjust(c, int64(n)) }

// giveBack returns what take counted for c, once the bytes are consumed.
func (f *flow) giveBack(c *clientConn, n int) {
	f.adjust(c, -int64(n))
	f.opened()
}

// adjust changes what c and the whole budget hold by delta, and wakes the
// readers that paused connections when budget came back.
func (f *flow) adjust(c *clientConn, delta int64) {
	now := f.inflight.Add(delta)
	conn := c.flow.inflight.Add(delta)
	if delta >= 0 {
		return
	}
	switch limit := f.limit.Load(); {
	case now < limit && now-delta >= limit:
		f.mu.Lock()
		readers := f.readers
		f.mu.Unlock()
		for _, r := range readers {
			r.wake()
		}
	case c.flow.paused.Load() && conn < f.perConn && c.read.reader != nil:
		c.read.reader.wake()
	}
}

// spent reports whether no connection may be read now.
func (f *flow) spent() bool { return f.inflight.Load() >= f.limit.Load() }

// connSpent reports whether c may not be read now.
func (f *flow) connSpent(c *clientConn) bool {
	return f.spent() || c.flow.inflight.Load() >= f.perConn
}

// waiting reports whether c waits for the pipeline rather than the other
// way round: its bytes are in the pipeline, or in its socket while it is
// paused.
func (f *flow) waiting(c *clientConn) bool {
	return c.flow.paused.Load() || c.flow.inflight.Load() > 0
}

// observe takes the cost of one decrypt call of n bytes into the running
// average, and sizes the global budget to readBudgetWork of decrypting.
// Concurrent calls may lose a sample; the average does not need them all.
func (f *flow) observe(n int, took time.Duration) {
	if n < 1024 {
		return // too short to time
	}
	sample := max(int64(took)*1024/int64(n), 1)
	avg := f.nsPerKiB.Load()
	if avg == 0 {
		avg = sample
	} else {
		avg += (sample - avg) / 8
	}
	f.nsPerKiB.Store(avg)
	limit := int64(readBudgetWork) * f.parallel / avg * 1024
	f.limit.Store(min(max(limit, readBudgetMin), f.maxBytes))
	f.opened()
}

// pause records that c's reader stopped polling it for want of budget;
// while the global budget is spent that holds back the accept stage too.
func (f *flow) pause(c *clientConn) {
	c.flow.paused.Store(true)
	if f.spent() {
		c.flow.heldBack = true
		f.heldBack.Add(1)
	}
}

// unpause records that c's reader polls it again, or forgets it.
func (f *flow) unpause(c *clientConn) {
	c.flow.paused.Store(false)
	f.release(c)
}

// release stops counting c as held back by the global budget, though it
// may stay paused for its own.
func (f *flow) release(c *clientConn) {
	if !c.flow.heldBack {
		return
	}
	c.flow.heldBack = false
	if f.heldBack.Add(-1) == 0 {
		f.opened()
	}
}

// saturate reports that a reader's epoll_wait began (full) or stopped
// filling its event array: more ready connections than it serves in one
// round, while it lasts, hold back the accept stage.
func (f *flow) saturate(full bool) {
	if full {
		f.saturatedReaders.Add(1)
	} else if f.saturatedReaders.Add(-1) == 0 {
		f.opened()
	}
}

// saturated reports whether a reader has more ready connections than it
// serves in one round.
func (f *flow) saturated() bool { return f.saturatedReaders.Load() > 0 }

// behind reports whether the front end should greet no new clients: the
// budget is spent, or connections wait for it, or a reader has more ready
// connections than it serves in one round, or the queue it feeds is full.
func (f *flow) behind() bool {
	return f.spent() || f.heldBack.Load() > 0 || f.saturated() || (f.queueFull != nil && f.queueFull())
}

// waitRoom returns once the front end may accept again (true), or when
// ctx is done or stop is closed (false). It sleeps until opened says the
// gate may have opened, or recheck has passed.
func (f *flow) waitRoom(ctx context.Context, stop <-chan struct{}) bool {
	if !f.behind() {
		return true
	}
	timer := time.NewTimer(f.recheck)
	defer timer.Stop()
	for {
		f.mu.Lock()
		if f.room == nil {
			f.room = make(chan struct{})
		}
		room := f.room
		f.mu.Unlock()
		// Counted before looking again: opened either sees the waiter or
		// changed the state before that look.
		f.waiters.Add(1)
		open := !f.behind()
		if !open {
			select {
			case <-room:
			case <-timer.C:
				timer.Reset(f.recheck)
			case <-stop:
				f.waiters.Add(-1)
				return false
			case <-ctx.Done():
				f.waiters.Add(-1)
				return false
			}
			open = !f.behind()
		}
		f.waiters.Add(-1)
		if open {
			return true
		}
	}
}

// opened wakes the goroutines in waitRoom, if any, when the gate is open.
func (f *flow) opened() {
	if f.waiters.Load() == 0 || f.behind() {
		return
	}
	f.mu.Lock()
	if f.room != nil {
		close(f.room)
		f.room = nil
	}
	f.mu.Unlock()
}

// register has r woken when the global budget comes back.
func (f *flow) register(r *reader) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readers = append(f.readers, r)
}
