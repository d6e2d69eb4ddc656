package stages

import (
	"fmt"
	"sync"
	"time"

	"github.com/golang/glog"
)

// rateLog limits log lines per key (a peer address), so one misconfigured
// or hostile client cannot flood the log, while each suppressed line is
// still counted and reported with the next one that gets through.
type rateLog struct {
	mu     sync.Mutex
	window time.Duration
	burst  int
	keys   map[string]*rateEntry
}

type rateEntry struct {
	start      time.Time
	lines      int
	suppressed int
}

// maxRateKeys bounds the limiter's memory under a flood of distinct peers.
const maxRateKeys = 10000

func newRateLog(window time.Duration, burst int) *rateLog {
	return &rateLog{window: window, burst: burst, keys: map[string]*rateEntry{}}
}

// Warningf logs under key unless key has used its burst in this window.
func (l *rateLog) Warningf(key, format string, args ...any) {
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
		l.mu.Unlock()
		return
	}
	e.lines++
	suppressed := e.suppressed
	e.suppressed = 0
	l.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if suppressed > 0 {
		msg += fmt.Sprintf(" (%d similar lines for %s suppressed)", suppressed, key)
	}
	glog.WarningDepth(1, msg)
}
