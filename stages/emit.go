package stages

import (
	"context"
	"sync"

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

// loop drains in completely, even after cancellation: every result that
// got this far was received from a client and must reach a sink or a drop
// counter.
func (e *Emitter) loop(in <-chan sink.Item) {
	for it := range in {
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

// Emit writes items through the chain of sinks.
func (e *Emitter) Emit(items []sink.Item) {
	rest := items
	for _, s := range e.chain {
		if len(rest) == 0 {
			return
		}
		n, err := s.Write(rest)
		if n > 0 {
			e.stats.Emitted(s.Name()).Add(uint64(n))
		}
		rest = rest[n:]
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
