package stage

import (
	"context"
	"runtime/pprof"
	"sync"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/diagnose"
)

// Send delivers v unless the pipeline is being torn down. Every send between
// stages goes through it, so a cancelled pipeline never blocks a goroutine.
//
// A send that need not wait (room in ch, or a receiver waiting) is tried
// alone first: a select with a default is a plain non-blocking send, where
// the select over ch and ctx.Done() locks both channels, and that on every
// hand-off of every check. When both are ready the select chose at random,
// so delivering then is one of the outcomes it had.
func Send[T any](ctx context.Context, ch chan<- T, v T) bool {
	select {
	case ch <- v:
		return true
	default:
	}
	select {
	case ch <- v:
		return true
	case <-ctx.Done():
		return false
	}
}

// Go starts fn in a goroutine labelled stage=name, so one CPU profile of the
// daemon splits by stage.
func Go(ctx context.Context, wg *sync.WaitGroup, name string, fn func(ctx context.Context)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		pprof.Do(ctx, pprof.Labels("stage", name), fn)
	}()
}

// shardDepth is the capacity of each shard's channel behind Sharded's
// dispatcher.
const shardDepth = 8

// Shards is the input of a stage whose goroutines each own a share of the
// items, by key: one bounded channel per goroutine, which the stage
// upstream sends to directly (Send). All items of one connection go to one
// goroutine in the order they were sent, which keeps one client's results
// in order through a stage that runs in parallel, with no dispatcher
// goroutine between the stages: at a trickle every goroutine an item
// passes through is woken for it, and a dispatcher was one wake-up more
// per item.
type Shards[T any] struct {
	// C are the shards' channels, one per goroutine of the stage.
	C   []chan T
	key func(T) uint64
}

// NewShards returns n shards keyed by key, depth items deep in all: each
// shard holds its share of depth, at least one.
func NewShards[T any](n, depth int, key func(T) uint64) *Shards[T] {
	n = max(n, 1)
	s := &Shards[T]{C: make([]chan T, n), key: key}
	for i := range s.C {
		s.C[i] = make(chan T, max((depth+n-1)/n, 1))
	}
	return s
}

// Send delivers v to its shard (see the package's Send).
func (s *Shards[T]) Send(ctx context.Context, v T) bool {
	return Send(ctx, s.C[s.key(v)%uint64(len(s.C))], v)
}

// Close closes every shard: what closing a stage's input channel is.
func (s *Shards[T]) Close() {
	for _, ch := range s.C {
		close(ch)
	}
}

// Len is how many items wait in the shards, for a queue gauge.
func (s *Shards[T]) Len() int {
	n := 0
	for _, ch := range s.C {
		n += len(ch)
	}
	return n
}

// Full reports whether a shard is full: its sender would wait.
func (s *Shards[T]) Full() bool {
	for _, ch := range s.C {
		if len(ch) == cap(ch) {
			return true
		}
	}
	return false
}

// Run runs the stage's workers, one per shard, each started with Go over
// its shard's channel; done runs once every worker has returned (stages
// close their outbound channel there).
func (s *Shards[T]) Run(ctx context.Context, name string, worker func(ctx context.Context, id int, in <-chan T), done func()) {
	runWorkers(ctx, name, len(s.C), func(i int) <-chan T { return s.C[i] }, worker, done)
}

// runWorkers runs n workers, worker i over the channel in(i), and done once
// they have all returned.
func runWorkers[T any](ctx context.Context, name string, n int, in func(i int) <-chan T, worker func(ctx context.Context, id int, in <-chan T), done func()) {
	var wg sync.WaitGroup
	for i := range n {
		ch := in(i)
		Go(ctx, &wg, name, func(ctx context.Context) { worker(ctx, i, ch) })
	}
	go func() {
		wg.Wait()
		done()
	}()
}

// Sharded runs n workers of one stage whose input is one channel, which
// other stages share (validation's, which every front end feeds). A
// dispatcher routes every item to the worker chosen by its shard key, as
// Shards does, so all items of one connection are handled by one worker
// in arrival order. done runs once every worker has returned (stages
// close their outbound channel there).
func Sharded[T any](ctx context.Context, name string, in <-chan T, n, depth int, key func(T) uint64, worker func(ctx context.Context, id int, in <-chan T), done func()) {
	if n <= 1 {
		// One worker keeps arrival order by itself: no dispatcher, and one
		// goroutine hand-off less per item.
		runWorkers(ctx, name, 1, func(int) <-chan T { return in }, worker, done)
		return
	}
	// The shards only smooth the hand-off from the dispatcher; the stage's
	// real queue is in, so they stay short and add little to what is
	// queued (and to a check's wait) under load.
	shards := NewShards(n, n*min(depth, shardDepth), key)
	var dispatch sync.WaitGroup
	Go(ctx, &dispatch, name, func(ctx context.Context) {
		defer shards.Close()
		for v := range in {
			if !shards.Send(ctx, v) {
				return
			}
		}
	})
	shards.Run(ctx, name, worker, func() {
		dispatch.Wait()
		done()
	})
}

// Env is what every stage is given besides its own settings: the counters
// it updates, the rate-limited log of what it refuses, and where it
// registers the depth of a queue it owns, for the metrics.
type Env struct {
	Stats *counters.Stats
	Log   *counters.RateLog
	// Gauge, when set, is told of each internal queue: its name and a
	// function returning how many items wait in it.
	Gauge func(name string, depth func() int)
	// Progress, when set, is called after each batch a destination is done
	// with; it must not block (a worker process uses it to report its
	// counters to the supervisor at once).
	Progress func()
	// Clients, when set, records each connection's source for /clients;
	// Diagnose, when set, is handed the connections no secret decrypted.
	Clients  *diagnose.Registry
	Diagnose *diagnose.Diagnoser
}

// Register tells Gauge, when set, of a queue and how to read its depth.
func (e Env) Register(name string, depth func() int) {
	if e.Gauge != nil {
		e.Gauge(name, depth)
	}
}
