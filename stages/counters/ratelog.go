package counters

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang/glog"
)

// RateLog limits warning lines so that neither one misconfigured or hostile
// client nor a fleet of them floods the log: each key (a peer address) may
// log burst lines per window, and all keys together globalBursts times
// that. What it suppresses is still counted: the next line a key logs says
// how many of its lines were suppressed, and once a minute a summary line
// per kind of event says how many there were, from how many keys, and
// which keys had the most.
type RateLog struct {
	mu     sync.Mutex
	window time.Duration
	burst  int
	keys   map[string]*rateEntry
	// globalStart and globalLines are the window of the budget shared by
	// all keys.
	globalStart time.Time
	globalLines int
	// summary gathers the events of the current summary period, from its
	// first event; pending is set while a summary is due.
	summary   map[string]*eventSummary
	since     time.Time
	pending   bool
	period    int // counts summaries, so a timer outlived by Flush says nothing
	summaryIn time.Duration
	// warn writes a line (glog's warning log, but for tests).
	warn func(depth int, msg string)
}

type rateEntry struct {
	start      time.Time
	lines      int
	suppressed int
}

// eventSummary counts one kind of event for the summary line.
type eventSummary struct {
	what       string // how the summary says it; "" for a plain warning
	format     string // the warning's format, for a plain warning
	events     int
	suppressed int
	perKey     map[string]int
	otherKeys  int    // events whose keys did not fit in perKey
	lastFormat string // the last line suppressed, formatted only when summarised
	lastArgs   []any
}

// Bounds on the limiter's memory under a flood of distinct peers.
const (
	maxRateKeys    = 10000
	maxSummaryKeys = 1000
	// globalBursts is how many keys' bursts all keys together may log
	// per window.
	globalBursts = 4
	// summaryTop is how many keys a summary names.
	summaryTop = 3
)

// SummaryInterval is how often the summary of suppressed events is logged.
const SummaryInterval = time.Minute

// NewRateLog lets each key log burst lines per window.
func NewRateLog(window time.Duration, burst int) *RateLog {
	return &RateLog{window: window, burst: burst, keys: map[string]*rateEntry{}, summary: map[string]*eventSummary{},
		summaryIn: SummaryInterval, warn: func(depth int, msg string) { glog.WarningDepth(depth+1, msg) }}
}

// Warningf logs under key unless key, or all keys together, used their
// budget in this window; its summary line quotes format.
func (l *RateLog) Warningf(key, format string, args ...any) {
	l.eventf(1, "", key, format, args)
}

// Eventf is Warningf for an event the summary line counts as what
// happened to connections from clients (key being the client's address):
// "failed decryption" gives "62 connections from 41 clients failed
// decryption; most: 10.0.0.5 (12), ...".
func (l *RateLog) Eventf(what, key, format string, args ...any) {
	l.eventf(1, what, key, format, args)
}

func (l *RateLog) eventf(depth int, what, key, format string, args []any) {
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
	if now.Sub(l.globalStart) >= l.window {
		l.globalStart, l.globalLines = now, 0
	}
	s := l.count(what, key, format, now)
	if e.lines >= l.burst || l.globalLines >= globalBursts*l.burst {
		e.suppressed++
		s.suppressed++
		s.lastFormat, s.lastArgs = format, args
		if !l.pending {
			l.pending = true
			period := l.period
			time.AfterFunc(l.since.Add(l.summaryIn).Sub(now), func() { l.summarise(period) })
		}
		l.mu.Unlock()
		return
	}
	e.lines++
	l.globalLines++
	suppressed := e.suppressed
	e.suppressed = 0
	l.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if suppressed > 0 {
		msg += fmt.Sprintf(" (%d similar lines for %s suppressed)", suppressed, key)
	}
	l.warn(depth+1, msg)
}

// count adds one event to the summary period; l.mu is held.
func (l *RateLog) count(what, key, format string, now time.Time) *eventSummary {
	if !l.pending && now.Sub(l.since) >= l.summaryIn {
		// A period in which nothing was suppressed ends unreported: every
		// line of it was logged.
		clear(l.summary)
	}
	if len(l.summary) == 0 {
		l.since = now
	}
	kind := what
	if kind == "" {
		kind = "\x00" + format
	}
	s, ok := l.summary[kind]
	if !ok {
		s = &eventSummary{what: what, format: format, perKey: map[string]int{}}
		l.summary[kind] = s
	}
	s.events++
	if _, ok := s.perKey[key]; ok || len(s.perKey) < maxSummaryKeys {
		s.perKey[key]++
	} else {
		s.otherKeys++
	}
	return s
}

// summarise logs the summary of the period that just ended, unless a
// Flush has ended it already.
func (l *RateLog) summarise(period int) {
	l.mu.Lock()
	stale := period != l.period
	l.mu.Unlock()
	if stale {
		return
	}
	for _, line := range l.takeSummary(time.Now()) {
		l.warn(1, line)
	}
}

// takeSummary ends the summary period and returns its lines: one per kind
// of event of which some lines were suppressed.
func (l *RateLog) takeSummary(now time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = false
	l.period++
	kinds := make([]string, 0, len(l.summary))
	for k, s := range l.summary {
		if s.suppressed > 0 {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	lines := make([]string, 0, len(kinds))
	for _, k := range kinds {
		lines = append(lines, l.summary[k].line(now.Sub(l.since)))
	}
	clear(l.summary)
	return lines
}

// line is the summary line of s over a period that lasted d.
func (s *eventSummary) line(d time.Duration) string {
	keys := len(s.perKey)
	if s.otherKeys > 0 {
		keys = maxSummaryKeys // at least
	}
	var b strings.Builder
	atLeast := ""
	if s.otherKeys > 0 {
		atLeast = "at least "
	}
	if s.what != "" {
		fmt.Fprintf(&b, "in the last %v: %d connections from %s%d clients %s", d.Round(time.Second), s.events, atLeast, keys, s.what)
	} else {
		fmt.Fprintf(&b, "in the last %v: %d warnings %q from %s%d sources", d.Round(time.Second), s.events, s.format, atLeast, keys)
	}
	top := make([]string, 0, len(s.perKey))
	for k := range s.perKey {
		top = append(top, k)
	}
	slices.SortFunc(top, func(a, b string) int {
		return cmp.Or(cmp.Compare(s.perKey[b], s.perKey[a]), cmp.Compare(a, b))
	})
	if len(top) > 1 || s.what != "" {
		parts := make([]string, 0, summaryTop)
		for _, k := range top[:min(summaryTop, len(top))] {
			parts = append(parts, fmt.Sprintf("%s (%d)", k, s.perKey[k]))
		}
		b.WriteString("; most: " + strings.Join(parts, ", "))
		if len(top) > summaryTop {
			b.WriteString(" ...")
		}
	}
	fmt.Fprintf(&b, "; %d of these lines were suppressed by the rate limit, the last: %s", s.suppressed, fmt.Sprintf(s.lastFormat, s.lastArgs...))
	return b.String()
}

// Flush logs the summary of the period so far, for a pipeline that ends
// (at a reload or a stop) before the period does.
func (l *RateLog) Flush() {
	for _, line := range l.takeSummary(time.Now()) {
		l.warn(1, line)
	}
}
