package counters

import (
	"fmt"
	"sync"
	"time"

	"github.com/golang/glog"
)

// RateLog limits log lines per key (a peer address), so one misconfigured
// or hostile client cannot flood the log, while each suppressed line is
// still counted and reported with the next one that gets through.
type RateLog struct {
	mu     sync.Mutex
	window time.Duration
	burst  int
	keys   map[string]*rateEntry
}

type rateEntry struct {
	start      time.Time
	lines      int
	suppressed int
	// flushing is set while a timer is due to report the suppressed count
	// at the end of the window, for a burst that nothing follows.
	flushing bool
	// lastFormat and lastArgs are the last line suppressed.
	lastFormat string
	lastArgs   []any
}

// maxRateKeys bounds the limiter's memory under a flood of distinct peers.
const maxRateKeys = 10000

// NewRateLog lets each key log burst lines per window.
func NewRateLog(window time.Duration, burst int) *RateLog {
	return &RateLog{window: window, burst: burst, keys: map[string]*rateEntry{}}
}

// Warningf logs under key unless key has used its burst in this window.
func (l *RateLog) Warningf(key, format string, args ...any) {
	now := time.Now()
	l.mu.Lock()
	e, ok := l.keys[key]
	if !ok {
		if len(l.keys) >= maxRateKeys {
			l.keys = map[string]*rateEntry{}
		}
		e = &rateEntry{start: now}
		l.keys[key] = e
	}
	if now.Sub(e.start) >= l.window {
		e.start, e.lines = now, 0
	}
	if e.lines >= l.burst {
		e.suppressed++
		e.lastFormat, e.lastArgs = format, args
		if !e.flushing {
			e.flushing = true
			time.AfterFunc(e.start.Add(l.window).Sub(now), func() { l.flush(key, e) })
		}
		l.mu.Unlock()
		return
	}
	e.lines++
	suppressed := e.suppressed
	e.suppressed = 0
	l.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if suppressed > 0 {
		msg += suppressedNote(suppressed, key)
	}
	glog.WarningDepth(1, msg)
}

// lastNote is the last line e suppressed, so that a count reported on its
// own still says what was suppressed. It formats only when reporting:
// suppressing stays cheap under a flood.
func lastNote(e *rateEntry) string {
	if e.lastFormat == "" {
		return ""
	}
	return "; the last: " + fmt.Sprintf(e.lastFormat, e.lastArgs...)
}

func suppressedNote(n int, key string) string {
	return fmt.Sprintf(" (%d similar lines for %s suppressed)", n, key)
}

// flush reports what e suppressed in the window that just ended, unless a
// line that got through has reported it already.
func (l *RateLog) flush(key string, e *rateEntry) {
	l.mu.Lock()
	n, last := e.suppressed, lastNote(e)
	e.suppressed, e.flushing = 0, false
	l.mu.Unlock()
	if n > 0 {
		glog.Warningf("rate limit: the window ended%s", suppressedNote(n, key)+last)
	}
}

// Flush reports every count still suppressed, for a pipeline that ends
// before its windows do.
func (l *RateLog) Flush() {
	l.mu.Lock()
	type pending struct {
		key, last string
		n         int
	}
	var out []pending
	for k, e := range l.keys {
		if e.suppressed > 0 {
			out = append(out, pending{k, lastNote(e), e.suppressed})
			e.suppressed = 0
		}
	}
	l.mu.Unlock()
	for _, p := range out {
		glog.Warningf("rate limit: at exit%s", suppressedNote(p.n, p.key)+p.last)
	}
}
