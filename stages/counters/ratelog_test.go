package counters

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// captured is a RateLog's output.
type captured struct {
	mu    sync.Mutex
	lines []string
}

func (c *captured) warn(_ int, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, msg)
}

func (c *captured) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

func testRateLog(summaryIn time.Duration) (*RateLog, *captured) {
	l := NewRateLog(10*time.Second, 5)
	c := &captured{}
	l.warn, l.summaryIn = c.warn, summaryIn
	return l, c
}

// 400 clients failing 3 times each log no more than the global budget
// (4 bursts of 5), and the summary counts every event, every client and
// names those with the most.
func TestRateLogGlobalBudgetAndSummary(t *testing.T) {
	l, c := testRateLog(time.Hour)
	for i := range 400 {
		peer := fmt.Sprintf("10.0.%d.%d", i/256, i%256)
		n := 3
		if i == 7 {
			n = 12
		}
		for range n {
			l.Eventf("failed decryption", peer, "closing connection from %s: bad crc", peer)
		}
	}
	if got := len(c.all()); got != 20 {
		t.Errorf("%d lines logged, want the global budget of 20", got)
	}
	l.Flush()
	lines := c.all()
	summary := lines[len(lines)-1]
	want := regexp.MustCompile(`^in the last 0s: 1209 connections from 400 clients failed decryption; most: 10\.0\.0\.7 \(12\), 10\.0\.0\.0 \(3\), 10\.0\.0\.1 \(3\) \.\.\.; 1189 of these lines were suppressed by the rate limit, the last: closing connection from 10\.0\.1\.143: bad crc$`)
	if !want.MatchString(summary) {
		t.Errorf("summary %q does not match %s", summary, want)
	}
	if len(lines) != 21 {
		t.Errorf("%d lines after the flush, want 20 and one summary", len(lines))
	}
	// The flushed period is over: a second flush says nothing.
	l.Flush()
	if n := len(c.all()); n != 21 {
		t.Errorf("a second flush logged %d more lines", n-21)
	}
}

// The summary comes by itself once the period ends, and a key's next line
// after its window says how many of its lines were suppressed.
func TestRateLogSummaryTimer(t *testing.T) {
	l, c := testRateLog(50 * time.Millisecond)
	l.window = 100 * time.Millisecond
	for range 8 {
		l.Warningf("sink:fifo", "write to %s failed", "fifo")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(c.all()) < 6 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	lines := c.all()
	if len(lines) != 6 || !strings.HasPrefix(lines[5], `in the last 0s: 8 warnings "write to %s failed" from 1 sources; 3 of these lines were suppressed`) {
		t.Fatalf("lines %q, want 5 and a summary", lines)
	}
	time.Sleep(100 * time.Millisecond)
	l.Warningf("sink:fifo", "write to %s failed", "fifo")
	if last := c.all()[6]; !strings.HasSuffix(last, "(3 similar lines for sink:fifo suppressed)") {
		t.Errorf("the next line is %q, want the suppressed count", last)
	}
}

// Memory stays bounded under a flood of distinct keys.
func TestRateLogBounded(t *testing.T) {
	l, _ := testRateLog(time.Hour)
	for i := range 3 * maxSummaryKeys {
		l.Eventf("failed decryption", fmt.Sprint(i), "x")
	}
	s := l.summary["failed decryption"]
	if len(s.perKey) != maxSummaryKeys || s.otherKeys != 2*maxSummaryKeys {
		t.Errorf("%d keys kept, %d others, want %d and %d", len(s.perKey), s.otherKeys, maxSummaryKeys, 2*maxSummaryKeys)
	}
	if line := s.line(time.Minute); !strings.Contains(line, "3000 connections from at least 1000 clients") {
		t.Errorf("summary %q", line)
	}
}

// A period in which nothing was suppressed is not carried into the next
// one's summary.
func TestRateLogQuietPeriodForgotten(t *testing.T) {
	l, c := testRateLog(50 * time.Millisecond)
	l.Eventf("failed decryption", "10.0.0.1", "old %d", 1)
	time.Sleep(80 * time.Millisecond)
	for i := range 30 {
		l.Eventf("failed decryption", fmt.Sprintf("10.0.1.%d", i), "new %d", i)
	}
	l.Flush()
	lines := c.all()
	if last := lines[len(lines)-1]; !strings.Contains(last, ": 30 connections from 30 clients failed decryption") {
		t.Errorf("summary %q, want only the 30 events of its own period", last)
	}
}

// Kinds of event are summarised apart, each with its own counts: a
// client's failed decryptions do not swell a sink's warnings.
func TestRateLogKindsApart(t *testing.T) {
	l, c := testRateLog(time.Hour)
	for range 8 {
		l.Eventf("failed decryption", "10.0.0.1", "bad crc from %s", "10.0.0.1")
	}
	for range 7 {
		l.Warningf("sink:fifo", "write to %s failed", "fifo")
	}
	before := len(c.all())
	l.Flush()
	lines := c.all()[before:]
	want := []string{
		`in the last 0s: 7 warnings "write to %s failed" from 1 sources; 2 of these lines were suppressed by the rate limit, the last: write to fifo failed`,
		`in the last 0s: 8 connections from 1 clients failed decryption; most: 10.0.0.1 (8); 3 of these lines were suppressed by the rate limit, the last: bad crc from 10.0.0.1`,
	}
	if !slices.Equal(lines, want) {
		t.Errorf("summary lines\n%q\nwant\n%q", lines, want)
	}
}

// What was logged in full needs no summary: a flush after a period
// without suppression logs nothing.
func TestRateLogFlushQuiet(t *testing.T) {
	l, c := testRateLog(time.Hour)
	for i := range 5 {
		l.Eventf("failed decryption", fmt.Sprint(i), "x")
	}
	l.Flush()
	if n := len(c.all()); n != 5 {
		t.Errorf("%d lines, want the 5 events and no summary: %q", n, c.all())
	}
}

// The per-key table stays bounded under a flood of distinct peers, and
// the global budget holds for all of them together.
func TestRateLogKeysBounded(t *testing.T) {
	l, c := testRateLog(time.Hour)
	for i := range 2*maxRateKeys + 5 {
		l.Warningf(fmt.Sprint(i), "closing connection from %d", i)
		if len(l.keys) > maxRateKeys {
			t.Fatalf("%d keys after %d peers, want at most %d", len(l.keys), i+1, maxRateKeys)
		}
	}
	if n := len(c.all()); n != globalBursts*5 {
		t.Errorf("%d lines, want the global budget of %d", n, globalBursts*5)
	}
}
