package counters

import (
	"time"

	"github.com/golang/glog"
)

// ReportEvery logs the statistics line from snapshot every interval
// until stop is closed, skipping a line when no counter changed since the
// last one logged, so an idle daemon does not fill syslog; the supervisor
// uses it with the sum over its workers. An interval of 0 logs nothing.
func ReportEvery(snapshot func() Snapshot, interval time.Duration, stop <-chan struct{}) {
	reportEvery(snapshot, interval, stop, func(line string) { glog.Info(line) })
}

// reportEvery is ReportEvery writing its lines with logf.
func reportEvery(snapshot func() Snapshot, interval time.Duration, stop <-chan struct{}, logf func(string)) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	prev, last := snapshot(), time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			snap := snapshot()
			if snap.Line(snap, 0) == prev.Line(prev, 0) {
				continue
			}
			logf("statistics: " + snap.Line(prev, now.Sub(last).Seconds()))
			prev, last = snap, now
		}
	}
}
