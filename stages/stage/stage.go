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

// shardDepth is the capacity of each shard's channel.
const shardDepth = 8

// Sharded runs n workers of one stage. A dispatcher routes every item
// to the worker chosen by its shard key, so all items of one connection are
// handled by one worker in arrival order; that is how results from one
// client keep their order through stages that run in parallel. done runs
// once every worker has returned (stages close their outbound channel there).
func Sharded[T any](ctx context.Context, name string, in <-chan T, n, depth int, key func(T) uint64, worker func(ctx context.Context, id int, in <-chan T), done func()) {
	if n <= 1 {
		// One worker keeps arrival order by itself: no dispatcher, and one
		// goroutine hand-off less per item.
		var wg sync.WaitGroup
		Go(ctx, &wg, name, func(ctx context.Context) { worker(ctx, 0, in) })
		go func() {
			wg.Wait()
			done()
		}()
		return
	}
	var wg sync.WaitGroup
	shards := make([]chan T, n)
	for i := range shards {
		// The shards only smooth the hand-off from the dispatcher; the
		// stage's real queue is in, so they stay short and add little to
		// what is queued (and to a check's wait) under load.
		shards[i] = make(chan T, min(depth, shardDepth))
		id, ch := i, shards[i]
		Go(ctx, &wg, name, func(ctx context.Context) { worker(ctx, id, ch) })
	}
	var dispatch sync.WaitGroup
	Go(ctx, &dispatch, name, func(ctx context.Context) {
		defer func() {
			for _, ch := range shards {
				close(ch)
			}
		}()
		for v := range in {
			if !Send(ctx, shards[key(v)%uint64(n)], v) {
				return
			}
		}
	})
	go func() {
		dispatch.Wait()
		wg.Wait()
		done()
	}()
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
