package stages

import (
	"context"
	"sync"
	"time"

	"github.com/golang/glog"

	"nsca_fast/stages/sink"
)

// maxBatch bounds how many results one write to the sinks carries. Batching
// turns a burst into a few PIPE_BUF-sized writes instead of one per line.
const maxBatch = 256

// Emitter is the emit stage: it hands results to a chain of sinks, the
// first that takes a result wins, and whatever none takes is counted and
// logged as dropped.
type Emitter struct {
	chain []sink.Sink
	stats *Stats
	log   *rateLog
	batch []sink.Item
}

// NewEmitter returns an emit stage over the sinks in fallback order.
func NewEmitter(chain []sink.Sink, stats *Stats, log *rateLog) *Emitter {
	return &Emitter{chain: chain, stats: stats, log: log}
}

// Start runs the emit goroutine. Sinks are written by one goroutine because
// the command file must see whole lines in order; done is closed once in is
// closed and drained and the sinks are flushed and closed.
func (e *Emitter) Start(ctx context.Context, in <-chan sink.Item) (done <-chan struct{}) {
	ch := make(chan struct{})
	var wg sync.WaitGroup
	run(ctx, &wg, "emit", func(ctx context.Context) { e.loop(in) })
	go func() {
		wg.Wait()
		for _, s := range e.chain {
			if err := s.Close(); err != nil {
				glog.Errorf("emit: closing %s: %v", s.Name(), err)
			}
		}
		close(ch)
	}()
	return ch
}

// holdingSink is a sink that can hold results back for a while: the spool
// at check_result_path_max_files.
type holdingSink interface {
	sink.Sink
	Queued() int
	Flush() (int, error)
	Abandon() []sink.Item
}

// Timing of results held back by a sink.
const (
	flushInterval = 100 * time.Millisecond
	// holdOnExit bounds how long shutdown waits for held results to fit.
	holdOnExit = 5 * time.Second
)

// loop drains in completely, even after cancellation: every result that
// got this far was received from a client and must reach a sink or a drop
// counter.
func (e *Emitter) loop(in <-chan sink.Item) {
	tick := time.NewTicker(flushInterval)
	defer tick.Stop()
	for {
		var it sink.Item
		var ok bool
		select {
		case it, ok = <-in:
		case <-tick.C:
			e.flush()
			continue
		}
		if !ok {
			e.finish()
			return
		}
		e.batch = append(e.batch[:0], it)
	fill:
		for len(e.batch) < maxBatch {
			select {
			case it, ok := <-in:
				if !ok {
					break fill
				}
				e.batch = append(e.batch, it)
			default:
				break fill
			}
		}
		e.Emit(e.batch)
	}
}

// flush gives sinks that hold results a chance to write them.
func (e *Emitter) flush() {
	for _, s := range e.chain {
		if h, ok := s.(holdingSink); ok && h.Queued() > 0 {
			n, err := h.Flush()
			e.stats.Emitted(s.Name()).Add(uint64(n))
			if err != nil {
				e.stats.SinkErrors(s.Name()).Add(1)
				e.log.Warningf("sink:"+s.Name(), "writing held results to %s: %v", s.Name(), err)
			}
		}
	}
	e.countHeld()
}

// finish waits a bounded time for held results to be written, then passes
// what is still held to the sinks after the one holding it.
func (e *Emitter) finish() {
	deadline := time.Now().Add(holdOnExit)
	for e.held() > 0 && time.Now().Before(deadline) {
		e.flush()
		time.Sleep(flushInterval)
	}
	for i, s := range e.chain {
		if h, ok := s.(holdingSink); ok && h.Queued() > 0 {
			rest := h.Abandon()
			e.log.Warningf("sink:"+s.Name(), "%d results still waiting for room in %s at exit: trying the next sink", len(rest), s.Name())
			e.emitFrom(i+1, rest)
		}
	}
	e.countHeld()
}

func (e *Emitter) held() (n int) {
	for _, s := range e.chain {
		if h, ok := s.(holdingSink); ok {
			n += h.Queued()
		}
	}
	return n
}

func (e *Emitter) countHeld() { e.stats.Held.Store(int64(e.held())) }

// Emit writes items through the chain of sinks.
func (e *Emitter) Emit(items []sink.Item) { e.emitFrom(0, items) }

// emitFrom writes items through the chain starting at sink first. A sink
// that holds some of them back (queues them) has taken them, but they are
// counted as emitted only once written.
func (e *Emitter) emitFrom(first int, items []sink.Item) {
	rest := items
	for _, s := range e.chain[min(first, len(e.chain)):] {
		if len(rest) == 0 {
			break
		}
		h, holds := s.(holdingSink)
		before := 0
		if holds {
			before = h.Queued()
		}
		n, err := s.Write(rest)
		written := n
		if holds {
			written -= h.Queued() - before
			e.countHeld()
		}
		if written > 0 {
			e.stats.Emitted(s.Name()).Add(uint64(written))
		}
		rest = rest[n:]
		if err != nil {
			e.stats.SinkErrors(s.Name()).Add(1)
		}
		if err != nil && len(rest) > 0 {
			e.log.Warningf("sink:"+s.Name(), "%d results not written to %s, trying the next sink: %v", len(rest), s.Name(), err)
		}
	}
	if len(rest) > 0 {
		e.stats.Dropped(DropSink).Add(uint64(len(rest)))
		for _, it := range rest {
			e.log.Warningf("sink:drop", "dropped check host=%q service=%q: no sink could take it", it.Result.Host, it.Result.Service)
		}
	}
}
