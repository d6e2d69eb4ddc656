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
// the first sink that takes it, an external command to the first that
// takes it of the sinks that can write commands, and whatever none takes
// is counted and logged as dropped. One goroutine owns a chainRunner.
type chainRunner struct {
	chain []sink.Sink
	stats *counters.Stats
	log   *counters.RateLog
	// dest names the chain in log lines: its destination, or its
	// destination's overflow.
	dest string
	// way is what becomes of the external commands given to it.
	way commandWay
	// results and cmds say whether it delivers each kind now (Health).
	results, cmds gate
	// overflow marks a destination's overflow, whose gates the dispatcher
	// opens once the queue has room again; lastCheck is when a closed
	// gate's sinks were last checked.
	overflow  bool
	lastCheck time.Time
	held      int // what this chain's holding sinks last reported, in counters.Stats.Held
	// failing holds, per sink name, the cause last logged for results
	// passing it by: a sink that keeps failing for the same reason (a
	// command file that does not exist) is reported once, not per batch,
	// and again when the reason changes or after it worked again.
	failing map[string]string
}

// commandWay is what a chain does with external commands.
type commandWay uint8

const (
	// deliverCommands passes them to its sinks that take commands.
	deliverCommands commandWay = iota
	// skipCommands ignores them: the chain has no sink that takes commands
	// and another destination's has, which delivers them (Icinga 2 and
	// Gearman beside the command file), so they are no loss here.
	skipCommands
	// dropCommands counts them dropped (no_command_sink): no destination
	// can write commands, and this one counts the loss once; or it is an
	// overflow without a sink for them while its destination has one.
	dropCommands
)

// newChainRunner returns the runner of chain for the destination dest.
func newChainRunner(chain []sink.Sink, dest string, way commandWay, stats *counters.Stats, log *counters.RateLog) *chainRunner {
	return &chainRunner{chain: chain, dest: dest, way: way, stats: stats, log: log,
		results: gate{kind: "results"}, cmds: gate{kind: "commands"}}
}

// takesCommands says whether a sink of chain can write commands.
func takesCommands(chain []sink.Sink) bool {
	for _, s := range chain {
		if sink.TakesCommands(s) {
			return true
		}
	}
	return false
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

// waiting reports whether the chain has what its goroutine's ticks are
// for: results a sink holds, or a gate closed until a sink checks healthy.
// Only that goroutine changes either.
func (r *chainRunner) waiting() bool {
	return r.holding() > 0 || r.results.p.Load() != nil || r.cmds.p.Load() != nil
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

// emitFrom writes items through the chain starting at sink first, in runs
// of one kind in the order they came: a run of check results through
// every sink, a run of commands past the sinks that cannot take them (the
// spool) to those that can. Routing per run rather than splitting a batch
// by kind keeps a command in its place among the results at the command
// file, which takes both (a client's result and then its command to
// reschedule the check reach the core in that order), while a failing
// command file still sends the results of a mixed batch to the spool.
func (r *chainRunner) emitFrom(first int, items []sink.Item) {
	for len(items) > 0 {
		n := sameKind(items)
		if items[0].IsCommand() {
			r.emitCommands(first, items[:n])
		} else {
			r.emitResults(first, items[:n])
		}
		items = items[n:]
	}
}

// sameKind is how many items from the first are of its kind.
func sameKind(items []sink.Item) int {
	cmd := items[0].IsCommand()
	for i := 1; i < len(items); i++ {
		if items[i].IsCommand() != cmd {
			return i
		}
	}
	return len(items)
}

// emitResults writes check results through the chain from sink first;
// what no sink takes is dropped, and the chain is down for results until
// a write (or a check) succeeds again.
func (r *chainRunner) emitResults(first int, items []sink.Item) {
	rest, cause := r.deliver(first, items, false)
	r.results.after(r, len(rest) == 0, cause)
	if len(rest) > 0 {
		r.stats.DroppedInSink(counters.DropSink, len(rest))
		for _, it := range rest {
			r.log.Warningf("sink:drop", "dropped check host=%q service=%q: no sink could take it: %s", it.Result.Host, it.Result.Service, cause)
		}
	}
}

// emitCommands writes external commands through the sinks of the chain,
// from sink first, that take them; see commandWay for the other ways.
func (r *chainRunner) emitCommands(first int, items []sink.Item) {
	switch r.way {
	case skipCommands:
		return
	case dropCommands:
		r.stats.DroppedInSink(counters.DropNoCommandSink, len(items))
		r.log.Warningf("nocommand:"+r.dest, "dropped %d external commands (the first: %q): %s has no sink that can write commands (a command_file or an alternate_dump_file)", len(items), items[0].Command, r.dest)
		if r.overflow {
			// Its destination takes commands, but not while its queue is
			// full: until then, commands are not accepted.
			r.cmds.after(r, false, "its queue is full and its overflow cannot write commands")
		}
		return
	}
	rest, cause := r.deliver(first, items, true)
	r.cmds.after(r, len(rest) == 0, cause)
	if len(rest) > 0 {
		r.stats.DroppedInSink(counters.DropSink, len(rest))
		for _, it := range rest {
			r.log.Warningf("sink:drop-command", "dropped command %q: no sink could take it: %s", it.Command, cause)
		}
	}
}

// deliver writes items through the sinks of the chain from first on (for
// commands, only those that take commands), each taking what it can and
// passing the rest on. A sink that holds some of them back (queues them)
// has taken them, but they are counted as emitted only once written. It
// returns what no sink took and why, for the drop lines.
func (r *chainRunner) deliver(first int, items []sink.Item, commands bool) (rest []sink.Item, cause string) {
	rest = items
	var causes []string // why each sink refused what reached it
	for i := r.next(first, commands); i >= 0 && len(rest) > 0; {
		s := r.chain[i]
		n, err := r.write(s, rest)
		rest = rest[n:]
		if err != nil {
			r.stats.SinkErrors(s.Name()).Add(1)
			r.stats.SinkDown(s.Name()).Store(1)
			if len(rest) > 0 {
				causes = append(causes, s.Name()+": "+err.Error())
			}
		}
		next := r.next(i+1, commands)
		if len(rest) > 0 && next >= 0 {
			r.stats.FellBack(s.Name()).Add(uint64(len(rest)))
			if err != nil && r.noteFailing(s, err) {
				r.log.Warningf("sink:"+s.Name(), "%d %s not written to %s, trying %s: %v", len(rest), kindOf(commands), s.Name(), target(r.chain[next]), err)
			}
		}
		i = next
	}
	if len(rest) == 0 {
		return nil, ""
	}
	cause = strings.Join(causes, "; ")
	if cause == "" {
		cause = "no sink is configured"
	}
	return rest, cause
}

// next is the index of the first sink from i on that takes items of the
// kind (commands or results), or -1.
func (r *chainRunner) next(i int, commands bool) int {
	for ; i < len(r.chain); i++ {
		if !commands || sink.TakesCommands(r.chain[i]) {
			return i
		}
	}
	return -1
}

// kindOf names what a delivery carries, for log lines.
func kindOf(commands bool) string {
	if commands {
		return "commands"
	}
	return "results"
}

// write gives items to s and counts what it wrote; it returns how many s
// took (wrote, held or refused for good) and its error.
func (r *chainRunner) write(s sink.Sink, items []sink.Item) (int, error) {
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
	n, err := s.Write(items)
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
	if written > 0 && err == nil {
		r.noteWorking(s)
		r.stats.SinkDown(s.Name()).Store(0)
	}
	return n, err
}
