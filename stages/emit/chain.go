package emit

import (
	"errors"
	"strings"
	"time"

	"github.com/golang/glog"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/sink"
)

// chainRunner writes results through a chain of sinks: a result goes to
// the first sink that takes it, and whatever none takes is counted and
// logged as dropped. One goroutine owns a chainRunner.
type chainRunner struct {
	chain []sink.Sink
	stats *counters.Stats
	log   *counters.RateLog
	held  int // what this chain's holding sinks last reported, in counters.Stats.Held
	// failing holds, per sink name, the cause last logged for results
	// passing it by: a sink that keeps failing for the same reason (a
	// command file that does not exist) is reported once, not per batch,
	// and again when the reason changes or after it worked again.
	failing map[string]string
}

// announce tells the operator at start where results go while a sink
// cannot take them, and remembers it as logged.
func (r *chainRunner) announce() {
	for i, s := range r.chain {
		p, ok := s.(sink.Prober)
		if !ok || i+1 >= len(r.chain) {
			continue
		}
		if err := p.Probe(); err != nil {
			r.stats.SinkDown(s.Name()).Store(1)
			glog.Infof("%v: results go to %s until it can be used", err, target(r.chain[i+1]))
			r.noteFailing(s, err)
		}
	}
}

// target names where a sink puts results, for log lines.
func target(s sink.Sink) string {
	if l, ok := s.(sink.Located); ok {
		return l.Location()
	}
	return s.Name()
}

// causeOf is the reason behind err: while a sink backs off, the failure
// that started the back-off.
func causeOf(err error) string {
	var b *sink.BackoffError
	if errors.As(err, &b) && b.Cause != nil {
		return b.Cause.Error()
	}
	return err.Error()
}

// noteFailing records that s fails for err and reports whether that cause
// is new, so worth a log line.
func (r *chainRunner) noteFailing(s sink.Sink, err error) bool {
	if r.failing == nil {
		r.failing = map[string]string{}
	}
	cause := causeOf(err)
	if r.failing[s.Name()] == cause {
		return false
	}
	r.failing[s.Name()] = cause
	return true
}

// noteWorking records that s took results, reporting the end of a failure.
func (r *chainRunner) noteWorking(s sink.Sink) {
	if cause, ok := r.failing[s.Name()]; ok {
		delete(r.failing, s.Name())
		glog.Infof("%s takes results again (it failed with: %s)", target(s), cause)
	}
}

// flush gives sinks that hold results a chance to write them.
func (r *chainRunner) flush() {
	for _, s := range r.chain {
		if h, ok := s.(sink.Holder); ok && h.Queued() > 0 {
			n, err := h.Flush()
			r.stats.Emitted(s.Name()).Add(uint64(n))
			if err != nil {
				r.stats.SinkErrors(s.Name()).Add(1)
				r.log.Warningf("sink:"+s.Name(), "writing held results to %s: %v", s.Name(), err)
			}
		}
	}
	r.countHeld()
}

// finish waits a bounded time for held results to be written, then passes
// what is still held to the sinks after the one holding it.
func (r *chainRunner) finish() {
	deadline := time.Now().Add(holdOnExit)
	for r.holding() > 0 && time.Now().Before(deadline) {
		r.flush()
		time.Sleep(flushInterval)
	}
	for i, s := range r.chain {
		if h, ok := s.(sink.Holder); ok && h.Queued() > 0 {
			rest := h.Abandon()
			r.log.Warningf("sink:"+s.Name(), "%d results still waiting for room in %s as the pipeline ends (stop or reload): trying the next sink", len(rest), s.Name())
			r.emitFrom(i+1, rest)
		}
	}
	r.countHeld()
}

func (r *chainRunner) holding() (n int) {
	for _, s := range r.chain {
		if h, ok := s.(sink.Holder); ok {
			n += h.Queued()
		}
	}
	return n
}

// countHeld adds the change in what this chain holds to counters.Stats.Held, which
// sums every chain's.
func (r *chainRunner) countHeld() {
	now := r.holding()
	r.stats.Held.Add(int64(now - r.held))
	r.held = now
}

// emit writes items through the chain.
func (r *chainRunner) emit(items []sink.Item) { r.emitFrom(0, items) }

// emitFrom writes items through the chain starting at sink first. A sink
// that holds some of them back (queues them) has taken them, but they are
// counted as emitted only once written.
func (r *chainRunner) emitFrom(first int, items []sink.Item) {
	rest := items
	var causes []string // why each sink refused what reached it, for the drop lines
	for i := min(first, len(r.chain)); i < len(r.chain); i++ {
		s := r.chain[i]
		if len(rest) == 0 {
			break
		}
		h, holds := s.(sink.Holder)
		heldBefore := 0
		if holds {
			heldBefore = h.Queued()
		}
		f, refuses := s.(sink.Refuser)
		var refusedBefore uint64
		if refuses {
			refusedBefore = f.Refused()
		}
		n, err := s.Write(rest)
		written := n
		if holds {
			written -= h.Queued() - heldBefore
			r.countHeld()
		}
		if refuses {
			written -= int(f.Refused() - refusedBefore)
		}
		if written > 0 {
			r.stats.Emitted(s.Name()).Add(uint64(written))
		}
		rest = rest[n:]
		if written > 0 && err == nil {
			r.noteWorking(s)
			r.stats.SinkDown(s.Name()).Store(0)
		}
		if err != nil {
			r.stats.SinkErrors(s.Name()).Add(1)
			r.stats.SinkDown(s.Name()).Store(1)
			if len(rest) > 0 {
				causes = append(causes, s.Name()+": "+err.Error())
			}
		}
		if len(rest) > 0 && i+1 < len(r.chain) {
			r.stats.FellBack(s.Name()).Add(uint64(len(rest)))
			if err != nil && r.noteFailing(s, err) {
				r.log.Warningf("sink:"+s.Name(), "%d results not written to %s, trying %s: %v", len(rest), s.Name(), target(r.chain[i+1]), err)
			}
		}
	}
	if len(rest) > 0 {
		r.stats.DroppedInSink(counters.DropSink, len(rest))
		cause := strings.Join(causes, "; ")
		if cause == "" {
			cause = "no sink is configured"
		}
		for _, it := range rest {
			r.log.Warningf("sink:drop", "dropped check host=%q service=%q: no sink could take it: %s", it.Result.Host, it.Result.Service, cause)
		}
	}
}
