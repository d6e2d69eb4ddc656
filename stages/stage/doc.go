// Package stage is the shape every pipeline stage has, written once, and
// the helpers that give it: the stages of package stages (accept, read,
// decrypt, validate) and the emit stage of stages/emit are all built on it.
//
// Every stage has one shape:
//
//		func startX(ctx context.Context, in <-chan I, out chan<- O, cfg xConfig, env stage.Env) error
//
//	  - It starts a fixed number of goroutines, set by cfg (xConfig.Goroutines,
//	    Readers, or one per listening socket and destination), each started
//	    with Go so that a CPU profile splits by stage, each running the
//	    stage's one function over in, and returns at once.
//	  - It returns an error only when it cannot start, and then has started
//	    nothing.
//	  - Its goroutines end when in is closed and drained (for accept: closing
//	    in stops accepting, which is how a drain begins), and the stage then
//	    closes out. The emit stage has nothing to pass on: closing its out
//	    says every destination has written its queue and closed its sinks.
//	  - Every send on out also watches ctx (Send): cancelling ctx tears the
//	    pipeline down without blocking any goroutine. Only emit keeps draining
//	    in after cancellation, because what reached it was received from a
//	    client and must end in a sink or a drop counter.
//	  - A connection's items are handled by one goroutine of each stage,
//	    which keeps one client's results in order without locks. A stage
//	    of several goroutines is sharded by connection: its in is then a
//	    Shards (one bounded channel per goroutine, which the stage upstream
//	    sends each item to directly, and closes as it would close in), or,
//	    when other stages share its in, Sharded routes from in to them.
package stage
