package counters

import (
	"time"

	"github.com/golang/glog"
)

// The statistics line's cadence: steady traffic writes it once per
// interval (stats_interval), and what an operator should see soon is
// written within checkEvery of happening.
const (
	// checkEvery is how often the counters are looked at.
	checkEvery = 5 * time.Second
	// noteworthyGap is the least time between two lines written for
	// noteworthy changes: a failure that goes on is a line a minute, not
	// one per check (the per-event logs say more, rate-limited).
	noteworthyGap = time.Minute
)

// ReportEvery logs the statistics line from snapshot until stop is
// closed: within checkEvery of a noteworthy change (see noteworthy), at most
// once per noteworthyGap for those, and otherwise once per interval; never
// while no counter changes, so an idle daemon does not fill syslog. The
// supervisor uses it with the sum over its workers. An interval of 0 logs
// nothing.
func ReportEvery(snapshot func() Snapshot, interval time.Duration, stop <-chan struct{}) {
	reportEvery(snapshot, interval, checkEvery, stop, func(line string) { glog.Info(line) })
}

// reportEvery is ReportEvery looking at the counters every check (or
// interval, if shorter) and writing its lines with logf.
func reportEvery(snapshot func() Snapshot, interval, check time.Duration, stop <-chan struct{}, logf func(string)) {
	if interval <= 0 {
		return
	}
	// last is taken before the ticker starts, so that the tick an interval
	// later finds the line an interval old, not a hair less.
	last := time.Now()
	t := time.NewTicker(min(interval, check))
	defer t.Stop()
	prev := snapshot()
	var lastNoteworthy time.Time // long ago: the first is written at once
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			snap := snapshot()
			write, note := due(prev, snap, now.Sub(last), now.Sub(lastNoteworthy), interval)
			if !write {
				continue
			}
			logf("statistics: " + snap.Line(prev, now.Sub(last).Seconds()))
			prev, last = snap, now
			if note {
				lastNoteworthy = now
			}
		}
	}
}

// due decides whether the statistics line is written now, given the
// counters of the last line written (prev) and now, the time since that
// line and since the last one written for a noteworthy change: never
// when no counter changed; for a noteworthy change (note), unless one was
// written less than noteworthyGap ago; otherwise once the last line is
// interval old.
func due(prev, now Snapshot, sinceLine, sinceNoteworthy, interval time.Duration) (write, note bool) {
	if now.Line(now, 0) == prev.Line(prev, 0) {
		return false, false
	}
	if noteworthy(prev, now) && sinceNoteworthy >= noteworthyGap {
		return true, true
	}
	return sinceLine >= interval, false
}

// noteworthy says whether something an operator should hear of soon
// happened between two snapshots: results dropped (any reason: a wrong
// password, a full sink) or refused to an identity, connections refused,
// a sink failing (a write error, a result passed to the fallback, a sink
// newly down) or damage found in a durable queue.
func noteworthy(prev, now Snapshot) bool {
	return now.TotalDropped() > prev.TotalDropped() || now.Refused > prev.Refused ||
		sum(now.IdentityRefused) > sum(prev.IdentityRefused) ||
		sum(now.SinkErrors) > sum(prev.SinkErrors) || sum(now.FellBack) > sum(prev.FellBack) ||
		sum(now.SinkDown) > sum(prev.SinkDown) || now.queueDamage() != prev.queueDamage()
}
