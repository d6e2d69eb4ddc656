package proc

import (
	"slices"
	"testing"
	"time"
)

// TestNextProcs: one P while the load stays low, the ceiling as soon as it
// rises, and back to one P only after lowerAfter quiet intervals in a row.
func TestNextProcs(t *testing.T) {
	cases := []struct {
		name                 string
		cur, ceiling         int
		load                 float64
		quiet                int
		wantProcs, wantQuiet int
	}{
		{"a one-CPU share stays at one", 1, 1, 0.9, 0, 1, 0},
		{"a load between the thresholds at the ceiling stays", 2, 2, (raiseAt + lowerAt) / 2, 0, 2, 0},
		{"low load at one P stays", 1, 2, 0.3, 0, 1, 0},
		{"between the thresholds at one P stays", 1, 2, (raiseAt + lowerAt) / 2, 0, 1, 0},
		{"high load at one P raises", 1, 3, raiseAt + 0.05, 0, 3, 0},
		{"a lowered ceiling applies at once", 4, 2, 1.5, 0, 2, 0},
		{"a busy ceiling stays", 2, 2, 1.2, 3, 2, 0},
		{"one quiet interval counts", 2, 2, 0.1, 0, 2, 1},
		{"a load between the thresholds resets the count", 2, 2, (raiseAt + lowerAt) / 2, 3, 2, 0},
		{"the last quiet interval lowers", 2, 2, 0.1, lowerAfter - 1, 1, 0},
	}
	for _, c := range cases {
		p, q := nextProcs(c.cur, c.ceiling, c.load, c.quiet)
		if p != c.wantProcs || q != c.wantQuiet {
			t.Errorf("%s: nextProcs(%d, %d, %.2f, %d) = %d, %d; want %d, %d", c.name, c.cur, c.ceiling, c.load, c.quiet, p, q, c.wantProcs, c.wantQuiet)
		}
	}
}

// TestProcGovernorFollowsLoad drives a governor with a clock and a CPU
// meter of the test's: it starts at one P, raises to the ceiling at the
// first busy interval, lowers to one P after a second of little use,
// raises again, and a reload's lower ceiling takes the Ps down at once.
func TestProcGovernorFollowsLoad(t *testing.T) {
	var used time.Duration
	var sets []int
	start := time.Unix(1000, 0)
	g := newProcGovernor(2, func() time.Duration { return used }, func(n int) { sets = append(sets, n) }, start)
	now := start
	tick := func(load float64) {
		now = now.Add(governInterval)
		used += time.Duration(load * float64(governInterval))
		g.step(now)
	}
	if g.cur != 1 {
		t.Fatalf("started at %d Ps, want 1", g.cur)
	}
	tick(0.95)
	if g.cur != 2 {
		t.Fatalf("%d P after a load of 0.95, want the ceiling, 2", g.cur)
	}
	for range lowerAfter - 1 {
		tick(0.1)
	}
	if g.cur != 2 {
		t.Fatalf("lowered to %d P after %d quiet intervals, want it to wait for %d", g.cur, lowerAfter-1, lowerAfter)
	}
	tick(0.1)
	if g.cur != 1 {
		t.Fatalf("still %d Ps after %d quiet intervals", g.cur, lowerAfter)
	}
	tick(0.8)
	if g.cur != 1 {
		t.Fatalf("raised to %d Ps at a load of 0.8", g.cur)
	}
	tick(0.95)
	if g.cur != 2 {
		t.Fatalf("%d P at a load of 0.95, want the ceiling, 2", g.cur)
	}
	g.setCeiling(1)
	if g.cur != 1 {
		t.Fatalf("%d Ps after the ceiling went to 1", g.cur)
	}
	if want := []int{1, 2, 1, 2, 1}; !slices.Equal(sets, want) {
		t.Errorf("GOMAXPROCS set to %v, want %v", sets, want)
	}
}
