package emit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/glog"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/sink"
	"nsca_fast/stages/stage"
)

// maxBatch bounds how many results one write to the sinks carries. Batching
// turns a burst into a few PIPE_BUF-sized writes instead of one per line.
const maxBatch = 256

// emitter is the emit stage: it batches validated results and hands every
// batch to every destination.
type emitter struct {
	dests    []*destRunner
	stats    *counters.Stats
	log      *counters.RateLog
	progress func() // stage.Env.Progress, or nil
}

// destRunner runs one destination.
type destRunner struct {
	Destination
	queue    chan *batch
	queued   atomic.Int64 // results in queue
	chain    *chainRunner // only its goroutine touches it
	overflow *chainRunner // only the dispatcher touches it
}

// batch is one destination's copy of results that every destination
// receives; the last destination to finish with its copy counts the
// results finished, for the statistics.
type batch struct {
	items   []sink.Item
	pending *atomic.Int32 // shared by the copies
}

// Config are the emit stage's settings and what it reports to.
type Config struct {
	// Destinations are where every result goes, each with its own queue
	// and goroutine; the stage owns and closes their sinks.
	Destinations []Destination
	// Health, when set, is made to report on these destinations.
	Health *Health
}

// Start runs the emit goroutines: one that batches and dispatches, one
// per destination; or, for the local destination alone, one goroutine
// that batches and writes. It has nothing to pass on: out is closed once
// in is closed and drained, and every destination has written (or
// dropped, counted) its queue and closed its sinks.
func Start(ctx context.Context, in <-chan sink.Item, out chan<- struct{}, cfg Config, env stage.Env) error {
	e := newEmitter(cfg.Destinations, env.Stats, env.Log)
	e.progress = env.Progress
	if cfg.Health != nil {
		cfg.Health.e.Store(e)
	}
	for name, depth := range e.queueDepths() {
		env.Register(name, depth)
	}
	e.start(ctx, in, out)
	return nil
}

// newEmitter returns an emit stage over the destinations.
func newEmitter(dests []Destination, stats *counters.Stats, log *counters.RateLog) *emitter {
	e := &emitter{stats: stats, log: log}
	ways := commandWays(dests)
	for i, d := range dests {
		r := &destRunner{Destination: d}
		r.chain = newChainRunner(d.Chain, "destination "+d.Name, ways[i], stats, log)
		// The queue's channel counts batches, Capacity results. An
		// overflowing destination checks the results queued before each
		// send, so its channel never fills and may have a slot per result.
		// A waiting one is bounded by the channel alone: a slot per full
		// batch keeps it at about Capacity results, as queue_size promises.
		slots := max(d.Capacity, 1)
		if len(dests) > 1 && !d.Blocking {
			way := ways[i]
			if way == deliverCommands && !takesCommands(d.Overflow) {
				way = dropCommands
			}
			r.overflow = newChainRunner(d.Overflow, "destination "+d.Name+"'s overflow", way, stats, log)
			r.overflow.overflow = true
		} else {
			slots = max(d.Capacity/maxBatch, 1)
		}
		r.queue = make(chan *batch, slots)
		e.dests = append(e.dests, r)
	}
	return e
}

// commandWays decides, per destination, what becomes of external
// commands: those whose chain has a sink that takes commands deliver them;
// the others skip them, unless no destination takes commands, when the
// first counts each dropped (no_command_sink), once and not once per
// destination, and says so.
func commandWays(dests []Destination) []commandWay {
	ways := make([]commandWay, len(dests))
	anyTaker := false
	for _, d := range dests {
		anyTaker = anyTaker || takesCommands(d.Chain)
	}
	for i, d := range dests {
		switch {
		case takesCommands(d.Chain):
			ways[i] = deliverCommands
		case anyTaker || i > 0:
			ways[i] = skipCommands
		default:
			ways[i] = dropCommands
		}
	}
	return ways
}

// start runs the emit goroutines and closes done when they have finished.
//
// One destination whose queue would hold no more than in does (the local
// one alone, whose Capacity is queue_size, as in's) has no dispatcher: its
// goroutine takes the batches off in itself. The dispatcher is there for
// what several destinations need, each one's copy and queue, and its
// overflow while the queue is full, so that one slow destination does not
// hold up the others; with one, it was only a goroutine more to wake for
// every batch, which at a trickle is every check (issue 36). A remote
// destination alone keeps its queue, whose depth its own option sets.
func (e *emitter) start(ctx context.Context, in <-chan sink.Item, done chan<- struct{}) {
	var workers sync.WaitGroup
	for _, d := range e.dests {
		d.chain.announce() // before its goroutine owns the chain
	}
	if len(e.dests) == 1 && !e.dests[0].Remote && e.dests[0].Capacity <= cap(in) {
		d := e.dests[0]
		stage.Go(ctx, &workers, "emit:"+d.Name, func(ctx context.Context) { e.serveAlone(ctx, in, d) })
	} else {
		for _, d := range e.dests {
			stage.Go(ctx, &workers, "emit:"+d.Name, func(ctx context.Context) { e.serve(ctx, d) })
		}
		stage.Go(ctx, &workers, "emit", func(ctx context.Context) {
			e.dispatch(in)
			for _, d := range e.dests {
				close(d.queue)
			}
		})
	}
	go func() {
		workers.Wait()
		for _, d := range e.dests {
			for _, s := range append(d.Chain, d.Overflow...) {
				if err := s.Close(); err != nil {
					glog.Errorf("emit: closing %s: %v", s.Name(), err)
				}
			}
		}
		close(done)
	}()
}

// Timing of results held back by a sink.
const (
	flushInterval = 100 * time.Millisecond
	// holdOnExit bounds how long shutdown waits for held results to fit.
	holdOnExit = 5 * time.Second
)

// dispatch drains in completely, even after cancellation: every result
// that got this far was received from a client and must reach a sink or a
// drop counter.
func (e *emitter) dispatch(in <-chan sink.Item) {
	var tick lazyTicker
	defer tick.follow(false)
	items := make([]sink.Item, 0, maxBatch)
	for {
		var it sink.Item
		var ok bool
		select {
		case it, ok = <-in:
		case <-tick.C():
			e.flushOverflow()
			tick.follow(e.overflowWaiting())
			continue
		}
		if !ok {
			for _, d := range e.dests {
				if d.overflow != nil {
					d.overflow.finish()
				}
			}
			return
		}
		items = fillBatch(in, append(items[:0], it))
		e.hand(items)
		tick.follow(e.overflowWaiting())
	}
}

// fillBatch appends to items what in holds already, up to maxBatch
// results, without waiting.
func fillBatch(in <-chan sink.Item, items []sink.Item) []sink.Item {
	for len(items) < maxBatch {
		select {
		case it, ok := <-in:
			if !ok {
				return items
			}
			items = append(items, it)
		default:
			return items
		}
	}
	return items
}

// overflowWaiting reports whether a destination's overflow holds results
// or has a gate closed: what the dispatcher's ticks are for.
func (e *emitter) overflowWaiting() bool {
	for _, d := range e.dests {
		if d.overflow != nil && d.overflow.waiting() {
			return true
		}
	}
	return false
}

// hand gives a batch to every destination. Each gets its own copy of the
// slice, because a sink may reorder what it is given.
func (e *emitter) hand(items []sink.Item) {
	pending := new(atomic.Int32)
	pending.Store(int32(len(e.dests)))
	for _, d := range e.dests {
		b := &batch{items: append([]sink.Item(nil), items...), pending: pending}
		// A batch goes in while there is any room, so the queue holds at
		// most Capacity+maxBatch-1 results.
		if d.overflow != nil && d.queued.Load() >= int64(max(d.Capacity, 1)) {
			e.stats.FellBack(d.Name).Add(uint64(len(items)))
			e.log.Warningf("queue:"+d.Name, "%s queue full (%d results): %d results go to its fallback", d.Name, d.Capacity, len(items))
			d.overflow.emit(b.items)
			e.done(b)
			continue
		}
		// Without an overflow (the only destination) this waits for room,
		// so the pipeline, and the clients with it, wait.
		d.roomAgain()
		d.queued.Add(int64(len(items)))
		d.queue <- b
	}
}

// done counts a destination's copy finished; the last copy of a batch
// counts its results finished for the statistics.
func (e *emitter) done(b *batch) {
	if b.pending.Add(-1) == 0 {
		e.stats.Finished.Add(uint64(len(b.items)))
		observeLatency(&e.stats.Latency, b.items)
	}
	if e.progress != nil {
		e.progress()
	}
}

// serve is a destination's goroutine: it writes queued batches through its
// chain and gives held results a chance on a timer.
func (e *emitter) serve(ctx context.Context, d *destRunner) {
	var tick lazyTicker
	defer tick.follow(false)
	for {
		select {
		case b, ok := <-d.queue:
			if !ok {
				d.chain.finish()
				return
			}
			e.write(ctx, d, b)
		case <-tick.C():
			d.tick()
		}
		tick.follow(d.chain.waiting())
	}
}

// serveAlone is the goroutine of the local destination alone: it batches
// what comes in, as dispatch does, and writes each batch through the chain
// itself, as serve does. While a write waits, in fills up and validation
// waits, as it would for a full queue. The destination's queue depth
// counts the batch being written.
//
// Its one batch is reused, with no copy of the results: the batch is done
// with when write returns, and the local sinks keep no slice they were
// given (the spool copies the results it holds back).
func (e *emitter) serveAlone(ctx context.Context, in <-chan sink.Item, d *destRunner) {
	var tick lazyTicker
	defer tick.follow(false)
	b := &batch{items: make([]sink.Item, 0, maxBatch), pending: new(atomic.Int32)}
	for {
		select {
		case it, ok := <-in:
			if !ok {
				d.chain.finish()
				return
			}
			b.items = fillBatch(in, append(b.items[:0], it))
			b.pending.Store(1)
			d.queued.Add(int64(len(b.items)))
			e.write(ctx, d, b)
			clear(b.items) // what the results reference is garbage now
		case <-tick.C():
			d.tick()
		}
		tick.follow(d.chain.waiting())
	}
}

// write writes a batch of d's queue through its chain, or, once an
// aborted drain has cancelled ctx, a remote destination's batch to its
// fallback, and counts it done.
func (e *emitter) write(ctx context.Context, d *destRunner, b *batch) {
	if d.Remote && ctx.Err() != nil {
		e.stats.FellBack(d.Chain[0].Name()).Add(uint64(len(b.items)))
		e.log.Warningf("abort:"+d.Name, "drain aborted: %d results queued for %s go to its fallback", len(b.items), d.Name)
		d.chain.emitFrom(1, b.items)
	} else {
		d.chain.emit(b.items)
	}
	d.queued.Add(-int64(len(b.items)))
	e.done(b)
}

// tick gives the results d's chain holds a chance, and checks its sinks
// while a gate is closed: what a destination's goroutine does on a tick.
func (d *destRunner) tick() {
	d.chain.flush()
	d.chain.check(time.Now())
}

// observeLatency adds the latency of every result of a finished batch that
// came from a client: one clock read and a few atomic adds per batch.
func observeLatency(l *counters.Latency, items []sink.Item) {
	var lb counters.LatencyBatch
	now := time.Now().UnixNano()
	for i := range items {
		if at := items[i].ReadAt; at != 0 {
			lb.Observe(now - at)
		}
	}
	l.Add(&lb)
}

func (e *emitter) flushOverflow() {
	for _, d := range e.dests {
		if d.overflow != nil {
			d.overflow.flush()
			if d.queued.Load() < int64(max(d.Capacity, 1)) {
				d.roomAgain()
			}
		}
	}
}

// roomAgain opens the gates of the destination's overflow once its queue
// takes batches again: a failing overflow stops mattering then, and
// whether the destination delivers is its chain's to say. Only the
// dispatcher calls it.
func (d *destRunner) roomAgain() {
	if d.overflow != nil {
		d.overflow.results.open(d.overflow)
		d.overflow.cmds.open(d.overflow)
	}
}

// queueDepths reports, per destination, how many results wait in its queue.
func (e *emitter) queueDepths() map[string]func() int {
	m := map[string]func() int{}
	for _, d := range e.dests {
		m["destination_"+d.Name] = func() int { return int(d.queued.Load()) }
	}
	return m
}
