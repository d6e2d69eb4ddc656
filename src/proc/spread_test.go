package proc

import (
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestNextSpread: the first worker alone while it keeps up, every worker as
// soon as it does not, and the first alone again only after lowerAfter
// quiet intervals in a row with nothing waiting for it.
func TestNextSpread(t *testing.T) {
	cases := []struct {
		name          string
		wide          bool
		first, total  float64
		queued, quiet int
		wantWide      bool
		wantQuiet     int
	}{
		{"a trickle stays on the first", false, 0.2, 0.2, 0, 0, false, 0},
		{"between the thresholds stays on the first", false, (raiseAt + lowerAt) / 2, (raiseAt + lowerAt) / 2, 1, 0, false, 0},
		{"a busy first worker spreads", false, raiseAt + 0.05, raiseAt + 0.05, 0, 0, true, 0},
		{"a queue spreads, busy or not (stuck, dead, a burst)", false, 0, 0, spreadQueued + 1, 0, true, 0},
		{"a queue of a few does not", false, 0.1, 0.1, spreadQueued, 0, false, 0},
		{"a busy spread stays", true, 0.6, 1.2, 0, 3, true, 0},
		{"one quiet interval counts", true, 0.1, 0.2, 0, 0, true, 1},
		{"a queue resets the count", true, 0, 0, 1, 3, true, 0},
		{"the last quiet interval narrows", true, 0.1, 0.2, 0, lowerAfter - 1, false, 0},
		{"a load between the thresholds resets the count", true, 0.4, (raiseAt + lowerAt) / 2, 0, 3, true, 0},
	}
	for _, c := range cases {
		w, q := nextSpread(c.wide, c.first, c.total, c.queued, c.quiet)
		if w != c.wantWide || q != c.wantQuiet {
			t.Errorf("%s: nextSpread(%v, %.2f, %.2f, %d, %d) = %v, %d; want %v, %d", c.name, c.wide, c.first, c.total, c.queued, c.quiet, w, q, c.wantWide, c.wantQuiet)
		}
	}
}

// fakeCPU is the workers' CPU use as the test sets it: each pid uses CPU
// at its rate (CPUs) from the moment the rate is set.
type fakeCPU struct {
	mu    sync.Mutex
	rate  map[int]float64
	used  map[int]time.Duration
	since map[int]time.Time
}

func (c *fakeCPU) cpu(pid int) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked(pid)
	return c.used[pid], true
}

func (c *fakeCPU) advanceLocked(pid int) {
	now := time.Now()
	if since, ok := c.since[pid]; ok {
		c.used[pid] += time.Duration(c.rate[pid] * float64(now.Sub(since)))
	}
	c.since[pid] = now
}

func (c *fakeCPU) set(pid int, rate float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanceLocked(pid)
	c.rate[pid] = rate
}

func newFakeCPU() *fakeCPU {
	return &fakeCPU{rate: map[int]float64{}, used: map[int]time.Duration{}, since: map[int]time.Time{}}
}

// TestSpreaderStepMeasuresEachWorker drives a Spreader with a clock of the
// test's: the first worker's load, not another's, spreads; a worker seen
// for the first time (a restart) counts from then on, not with all it used
// before; and quiet narrows.
func TestSpreaderStepMeasuresEachWorker(t *testing.T) {
	used := map[int]time.Duration{}
	sp := &Spreader{CPU: func(pid int) (time.Duration, bool) { d, ok := used[pid]; return d, ok }}
	now := time.Unix(1000, 0)
	step := func(first, all []int, queued int) bool {
		now = now.Add(spreadInterval)
		return sp.step(now, first, all, queued)
	}
	used[1], used[2] = 0, 0
	if step([]int{1}, []int{1, 2}, 0) || sp.wide {
		t.Fatal("the first step, with nothing to measure against, changed the spreading")
	}
	first := &Spreader{CPU: sp.CPU}
	if !first.step(now, []int{1}, []int{1, 2}, spreadQueued+1) || !first.wide {
		t.Error("a queue at the first step did not spread the connections")
	}
	used[2] += spreadInterval // the second worker is busy, the first idle
	if step([]int{1}, []int{1, 2}, 0) || sp.wide {
		t.Error("a busy second worker spread the connections; only the first worker's load counts")
	}
	used[3] = time.Hour // a new first worker that used much before it was seen
	if step([]int{3}, []int{3, 2}, 0) || sp.wide {
		t.Error("a worker seen for the first time counted the CPU it used before")
	}
	used[3] += spreadInterval
	if !step([]int{3}, []int{3, 2}, 0) || !sp.wide {
		t.Error("a first worker using a whole CPU did not spread the connections")
	}
	for i := range lowerAfter {
		changed := step([]int{3}, []int{3, 2}, 0)
		if last := i == lowerAfter-1; changed != last || sp.wide == last {
			t.Fatalf("quiet interval %d: changed %v, wide %v", i+1, changed, sp.wide)
		}
	}
	delete(used, 2) // gone: not read, not counted
	if step([]int{3}, []int{3, 2}, spreadQueued+1) != true || !sp.wide {
		t.Error("a queue of more than spreadQueued did not spread the connections")
	}
}

// TestSupervisorSpreadsWithTheFirstWorkersLoad runs a supervisor of three
// fake workers with a Spreader: new connections go to the first socket
// only, to all three while the first worker is busy or its queue builds,
// and to the first only again once all are quiet.
func TestSupervisorSpreadsWithTheFirstWorkersLoad(t *testing.T) {
	f := &fakeSpawner{}
	cpu := newFakeCPU()
	s, sigs, served := startSupervisor(t, f, 3, func(n int) (int, error) { return n, nil }, func(s *Supervisor) {
		s.Spreader = &Spreader{CPU: cpu.cpu}
	})
	socks := s.Sockets.(*fakeSockets)
	first := []int{40}
	all := []int{40, 41, 42}
	if got := socks.served(); !slices.Equal(got, first) {
		t.Fatalf("sockets served at start %v, want %v", got, first)
	}
	firstPid := f.all()[0].pid
	cpu.set(firstPid, 1.0)
	waitUntil(t, "a busy first worker spreads the connections", func() bool { return slices.Equal(socks.served(), all) })
	cpu.set(firstPid, 0.1)
	waitUntil(t, "quiet workers take the connections back to the first", func() bool { return slices.Equal(socks.served(), first) })
	socks.setQueued(40, spreadQueued+1)
	waitUntil(t, "a queue on the first socket spreads the connections", func() bool { return slices.Equal(socks.served(), all) })
	time.Sleep(time.Duration(lowerAfter+2) * spreadInterval)
	if got := socks.served(); !slices.Equal(got, all) {
		t.Errorf("with connections still waiting on the first socket, %v are served; want all of %v", got, all)
	}
	socks.setQueued(40, 0)
	waitUntil(t, "the emptied queue takes the connections back to the first", func() bool { return slices.Equal(socks.served(), first) })
	// A reload's nsca_workers_spread=always, then load again.
	s.events <- func() { s.SpreadByLoad(false) }
	waitUntil(t, "nsca_workers_spread=always serves every socket", func() bool { return slices.Equal(socks.served(), all) })
	cpu.set(firstPid, 0)
	time.Sleep(time.Duration(lowerAfter+2) * spreadInterval)
	if got := socks.served(); !slices.Equal(got, all) {
		t.Errorf("with nsca_workers_spread=always and quiet workers, %v are served; want all of %v", got, all)
	}
	s.events <- func() { s.SpreadByLoad(true) }
	waitUntil(t, "nsca_workers_spread=load serves the first socket again", func() bool { return slices.Equal(socks.served(), first) })
	sigs <- syscall.SIGTERM
	<-served
}
