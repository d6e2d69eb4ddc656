// Package validate is the validate stage: every front end's submissions
// (stages/intake) pass one ordered list of rules (rules.go), the same for
// send_nsca, nsca-ng and NRDP, before a check result goes on to the emit
// stage. A refused submission is counted under its rule's reason, logged
// (rate-limited, once per source and reason), and its front end is told
// through the source's Outcomes; nothing refused reaches a sink.
//
// The stage has the shape of stages/stage: a fixed number of goroutines,
// sharded by source so that one client's submissions keep their order,
// closing its output once its input is closed and drained.
package validate

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/golang/glog"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/diagnose"
	"nsca_fast/stages/emit/sink"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/stage"
)

// Config are the validate stage's settings.
type Config struct {
	// Goroutines is how many validators share the sources; Depth bounds
	// each one's queue.
	Goroutines, Depth int
	// MaxPacketAge, when not zero, refuses submissions whose client
	// timestamp (Submission.Sent) is further than this from now. Since
	// send_nsca echoes the server time of the init packet, for it this
	// measures time since the connection began, not client clocks.
	MaxPacketAge time.Duration
	// StrictSpoofing refuses results whose host name does not resolve to
	// the peer address, as stock's strict_mode_spoofing does.
	StrictSpoofing bool
	// Debug logs every accepted check, as stock's debug=1 does.
	Debug bool
	// Accepting and AcceptingCommands, when set, say whether the emit
	// stage can deliver a result, or a command, now (emit.Health):
	// sources that answer their clients are refused meanwhile.
	Accepting, AcceptingCommands func() (bool, error)
}

// Start runs the validate goroutines on in and sends what passes to out,
// which it closes once in is closed and drained.
func Start(ctx context.Context, in <-chan intake.Submission, out chan<- sink.Item, cfg Config, env stage.Env) error {
	v := &validator{cfg: cfg, stats: env.Stats, log: env.Log, clients: env.Clients, rules: rulesFor(cfg)}
	stage.Sharded(ctx, "validate", in, max(cfg.Goroutines, 1), cfg.Depth, func(s intake.Submission) uint64 { return s.Source.ID },
		func(ctx context.Context, _ int, in <-chan intake.Submission) {
			// One variable for every submission: its address goes to the
			// rules and the front end's Outcomes, so it lives on the heap,
			// once per goroutine rather than once per submission.
			var s intake.Submission
			var front frontCounters
			for s = range in {
				if !v.pass(ctx, &s, out, &front) {
					return
				}
			}
		},
		func() { close(out) })
	return nil
}

type validator struct {
	cfg     Config
	stats   *counters.Stats
	log     *counters.RateLog
	dns     dnsCache
	clients *diagnose.Registry // nil: not recorded
	rules   []rule
}

// frontCounters are one front end's counters, which each validate
// goroutine looks up by name only when the front end changes from one
// submission to the next, not per submission.
type frontCounters struct {
	front             intake.Front
	received, refused *atomic.Uint64
}

// of makes c the counters of src's front end.
func (c *frontCounters) of(v *validator, src *intake.Source) *frontCounters {
	if c.received == nil || c.front != src.Front {
		c.front = src.Front
		c.received, c.refused = v.stats.FrontReceived(string(src.Front)), v.stats.FrontRefused(string(src.Front))
	}
	return c
}

// pass takes one submission through the rules and hands what passes on.
// It returns false once the pipeline is torn down.
func (v *validator) pass(ctx context.Context, s *intake.Submission, out chan<- sink.Item, front *frontCounters) bool {
	src := s.Source
	if src.Closed() {
		// What a connection sent after a refusal closed it is part of
		// that refusal, as stock stops reading at the first bad packet.
		v.stats.Dropped(counters.DropAfterReject).Add(1)
		return true
	}
	if s.Kind == intake.KindIncomplete {
		v.incomplete(s)
		return true
	}
	front.of(v, src).received.Add(1)
	for _, r := range v.rules {
		if refusal := r.check(v, s); refusal != nil {
			v.refuse(s, r, *refusal)
			front.refused.Add(1)
			return true
		}
	}
	if s.Time == 0 {
		s.Time = time.Now().Unix()
	}
	it := sink.Item{Result: s.Result, Time: s.Time, ReadAt: s.ReadAt}
	if s.Kind == intake.KindCommand {
		// Commands travel as items of their own: the sinks that can
		// write them (command file, dump file) do.
		it = sink.Item{Command: s.Command, Time: s.Time, ReadAt: s.ReadAt}
	} else if v.cfg.Debug {
		v.debug(s)
	}
	// Commands too: emit finishes them, so what is queued balances.
	v.stats.Validated.Add(1)
	if !stage.Send(ctx, out, it) {
		v.stats.Dropped(counters.DropShutdown).Add(1)
		if src.Outcomes != nil {
			src.Outcomes.Refused(s, intake.Refusal{Reason: counters.DropShutdown, Err: intake.ErrShutdown})
		}
		return false
	}
	if src.Outcomes != nil {
		src.Outcomes.Taken(s)
	}
	return true
}

// refuse counts, logs and reports a refusal by rule r.
func (v *validator) refuse(s *intake.Submission, r rule, refusal intake.Refusal) {
	src := s.Source
	v.stats.Dropped(refusal.Reason).Add(1)
	if r.counted != nil {
		r.counted(v, s)
	}
	key := src.Peer.Addr().String()
	if refusal.Close && src.Stream {
		src.Close()
		v.clients.Failed(src.Peer.Addr().Unmap(), refusal.Err.Error())
		v.log.Eventf(r.summary, key, "%sclosing connection from %s: dropped packet %d: %v", prefix(src), src.Name(), src.Checks+1, refusal.Err)
	} else {
		v.log.Eventf(r.summary, key, "%srefused %s from %s: %v", prefix(src), what(s), src.Name(), refusal.Err)
	}
	if src.Outcomes != nil {
		src.Outcomes.Refused(s, refusal)
	}
}

// incomplete counts the incomplete submission a source ended with.
func (v *validator) incomplete(s *intake.Submission) {
	src, in := s.Source, s.Incomplete
	v.stats.Dropped(counters.DropShort).Add(1)
	v.log.Eventf("ended inside a packet", src.Peer.Addr().String(), "dropped short packet from %s: connection ended (%s) after %d of %d bytes of a packet",
		src.Name(), in.Why, in.Got, in.Want)
}

func (v *validator) debug(s *intake.Submission) {
	src, r := s.Source, s.Result
	via := ""
	if src.Via.IsValid() {
		via = " (via " + src.Via.String() + ")"
	}
	glog.Infof("%scheck from %s%s: host=%q service=%q return_code=%d output=%q", prefix(src), src.Name(), via, r.Host, r.Service, r.ReturnCode, r.Output)
}

// prefix starts the log lines about src as its front end's lines start.
func prefix(src *intake.Source) string { return src.LogPrefix }

// what names a submission in log lines.
func what(s *intake.Submission) string {
	if s.Kind == intake.KindCommand {
		return "command"
	}
	return "check"
}

// quoted is a name as log lines show it: quoted, with every byte a
// terminal or a log reader could take for something else escaped.
func quoted(name string) string { return strconv.Quote(name) }

// errorf is a refusal's error, with the package prefix.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
