package emit

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"nsca_fast/stages/emit/sink"
	"nsca_fast/stages/intake"
)

// Errors Health reports.
var (
	// ErrDown is a destination that cannot take what it is given now.
	ErrDown = errors.New("emit: cannot deliver now")
	// ErrNoCommandSink is a configuration where no destination can write
	// external commands other than check results (no command_file and no
	// alternate_dump_file).
	// It is intake's, so that every front end can tell it without
	// knowing emit.
	ErrNoCommandSink = intake.ErrNoCommandSink
)

// Pacing of the recovery of a destination that is down (see gate).
const (
	// checkEvery spaces the checks (sink.Checker) of a down chain's sinks.
	checkEvery = time.Second
	// A chain with no sink to check is given results again after
	// retryFirst, doubling up to retryMax while its writes keep failing:
	// those writes are its retries.
	retryFirst = time.Second
	retryMax   = 30 * time.Second
)

// Health tells the front ends that answer their clients (nsca-ng's OKAY
// or FAIL, NRDP's response) whether the emit stage can deliver what they
// would take now, so that they refuse rather than promise what would be
// dropped. It is read lock-free from any goroutine: a few atomic loads
// per question, and the clock only while something is down. Until Start
// has been given it (Config.Health), everything is accepted.
type Health struct {
	e atomic.Pointer[emitter]
}

// NewHealth returns a Health to hand to Start in Config.Health.
func NewHealth() *Health { return new(Health) }

// Accepting reports whether check results can be delivered now, else
// false and why: the first destination that is down, with the error its
// last write ended with.
//
// It answers false as soon as ANY destination is down, not only when all
// are: every result goes to every destination, and a client told OKAY
// takes it as delivered (it discards the result and sends no other); a
// result that one destination drops is lost there for good, whereas a
// client told FAIL keeps it and sends it again later, to every
// destination. An operator who wants one destination's outage not to
// hold the others up gives it a durable queue or a fallback: a
// destination is down only when its whole chain failed (every sink
// failed, none held the results, no durable queue or fallback took them).
func (h *Health) Accepting() (bool, error) {
	e := h.e.Load()
	if e == nil {
		return true, nil
	}
	var now int64
	for _, d := range e.dests {
		if err := d.chain.results.closed(&now); err != nil {
			return false, err
		}
		if d.overflow != nil {
			if err := d.overflow.results.closed(&now); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// AcceptingCommands is Accepting for external commands other than check
// results: false when no destination can write them at all
// (ErrNoCommandSink), or one that does (a command_file) is down for them.
func (h *Health) AcceptingCommands() (bool, error) {
	e := h.e.Load()
	if e == nil {
		return true, nil
	}
	var now int64
	takers := 0
	for _, d := range e.dests {
		if d.chain.way != deliverCommands {
			continue
		}
		takers++
		if err := d.chain.cmds.closed(&now); err != nil {
			return false, err
		}
		if d.overflow != nil {
			if err := d.overflow.cmds.closed(&now); err != nil {
				return false, err
			}
		}
	}
	if takers == 0 {
		return false, ErrNoCommandSink
	}
	return true, nil
}

// gate is whether a chain delivers one kind of item (results or
// commands): open while its last delivery of that kind lost nothing,
// closed, with the outage, once one dropped some. Only the goroutine that
// owns the chain changes it; anyone reads it.
type gate struct {
	kind string // "results" or "commands", for log lines
	p    atomic.Pointer[outage]
}

// outage is why a gate is closed and until when.
type outage struct {
	err error
	// retryAt (unix nanoseconds), when not 0, is when the chain, which has
	// no sink to check, is given items again to try it; wait is how long
	// that was after the failure.
	retryAt int64
	wait    time.Duration
}

// closed returns the outage's error while the gate is closed; *now is the
// clock, read at most once per question and only when needed.
func (g *gate) closed(now *int64) error {
	o := g.p.Load()
	if o == nil {
		return nil
	}
	if o.retryAt != 0 {
		if *now == 0 {
			*now = time.Now().UnixNano()
		}
		if *now >= o.retryAt {
			return nil
		}
	}
	return o.err
}

// after records the outcome of a delivery through r: ok (nothing was
// dropped) opens the gate, a drop closes it with cause.
func (g *gate) after(r *chainRunner, ok bool, cause string) {
	if ok {
		g.open(r)
		return
	}
	was := g.p.Load()
	o := &outage{err: fmt.Errorf("%w: %s cannot take %s: %s", ErrDown, r.dest, g.kind, cause)}
	if !r.overflow && !r.recoverable(g.kind == "commands") {
		o.wait = retryFirst
		if was != nil && was.wait > 0 {
			o.wait = min(2*was.wait, retryMax)
		}
		o.retryAt = time.Now().Add(o.wait).UnixNano()
	}
	g.p.Store(o)
	if was == nil {
		r.log.Warningf("down:"+r.dest+":"+g.kind, "%s is down for %s (every sink failed, the %s dropped): %s", r.dest, g.kind, g.kind, cause)
	}
}

// open opens the gate, logging the end of an outage.
func (g *gate) open(r *chainRunner) {
	if g.p.Load() == nil {
		return
	}
	g.p.Store(nil)
	r.log.Warningf("up:"+r.dest+":"+g.kind, "%s takes %s again", r.dest, g.kind)
}

// recoverable says whether a sink of r that takes the kind can be
// checked (sink.Checker), so that r.check can open its gate.
func (r *chainRunner) recoverable(commands bool) bool {
	for i := r.next(0, commands); i >= 0; i = r.next(i+1, commands) {
		if _, ok := r.chain[i].(sink.Checker); ok {
			return true
		}
	}
	return false
}

// check opens, at most every checkEvery, each closed gate of r that a
// sink taking its kind says it could take again (sink.Checker): a
// destination comes back up without a result to try it, since the front
// ends that answer their clients send none while it is down.
func (r *chainRunner) check(now time.Time) {
	if now.Sub(r.lastCheck) < checkEvery {
		return
	}
	r.lastCheck = now
	for _, g := range []*gate{&r.results, &r.cmds} {
		if g.p.Load() == nil {
			continue
		}
		commands := g == &r.cmds
		for i := r.next(0, commands); i >= 0; i = r.next(i+1, commands) {
			if c, ok := r.chain[i].(sink.Checker); ok && c.Check() == nil {
				g.open(r)
				break
			}
		}
	}
}
