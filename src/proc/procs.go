package proc

import (
	"runtime"
	"sync"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"
)

// The governor's thresholds, in CPUs of load over one governInterval.
//
// Clients of a fleet trickle in: a packet at a time, each one handed from
// stage to stage. With a second P idle, every hand-off to a parked
// goroutine wakes a thread to run it (the runtime's wakep), which spins,
// finds the goroutine already taken or steals it, and sleeps again: on a
// 2-CPU machine that cost more than the packet's own work (a paced XOR
// check: 130 µs at 2 Ps against 70 µs at 1). One P runs the same
// hand-offs as goroutine switches on one thread. Under load that needs
// more than one CPU the Ps come back, so saturation keeps every CPU.
const (
	governInterval = 200 * time.Millisecond
	// raiseAt: at one P, a load above this means the P is nearly always
	// busy and work may queue for it; the Ps are raised at once. Below
	// it one P keeps up: nsca-ng sessions sending all they have cost
	// 0.62 CPUs at 9,800 results/s at one P, and 0.68 at 7,000/s at two,
	// where more of the work was waking threads.
	raiseAt = 0.9
	// lowerAt and lowerAfter: a load below lowerAt for lowerAfter
	// intervals in a row lowers to one P. The same work costs the same or
	// more CPU at two Ps than at one (up to 1.6 times with the hand-offs'
	// wake-ups), so whatever lowers stays under raiseAt at one P, and
	// whatever raises stays above lowerAt at two: no switching back and
	// forth (each switch stops the world for a few microseconds).
	lowerAt    = 0.75
	lowerAfter = 5
)

// nextProcs is the governor's rule: the number of Ps for the next
// interval, given the current number, the ceiling (the process's CPU
// share plus its C-calling goroutines, setProcs), the load of the last
// interval in CPUs, and how many intervals in a row were below lowerAt
// before it; it returns that count updated.
func nextProcs(cur, ceiling int, load float64, quiet int) (procs, quietAfter int) {
	switch {
	case ceiling <= 1:
		return 1, 0
	case cur > ceiling:
		return ceiling, 0
	case cur < ceiling && load > raiseAt:
		return ceiling, 0
	case cur > 1 && load < lowerAt:
		lower, quietAfter := quietInterval(quiet)
		if lower {
			return 1, 0
		}
		return cur, quietAfter
	}
	return cur, 0
}

// quietInterval counts one more interval below lowerAt after quiet in a
// row: it reports whether that makes lowerAfter, time to come down (the
// count starts again), or else the count.
func quietInterval(quiet int) (lower bool, quietAfter int) {
	if quiet+1 >= lowerAfter {
		return true, 0
	}
	return false, quiet + 1
}

// procGovernor moves GOMAXPROCS between 1 and its ceiling with the
// process's CPU use. Its side effects are fields, so a test drives it
// with a clock and a CPU meter of its own.
type procGovernor struct {
	cpu func() time.Duration // CPU used by the process so far
	set func(n int)          // sets GOMAXPROCS

	mu      sync.Mutex
	ceiling int
	cur     int
	quiet   int
	lastCPU time.Duration
	lastAt  time.Time
}

// governor is the process's one governor, set up by the first setProcs.
var governor struct {
	mu      sync.Mutex
	g       *procGovernor
	running bool
}

// newProcGovernor returns a governor that starts at one P: a daemon starts
// with nothing to do, and its first busy interval raises it.
func newProcGovernor(ceiling int, cpu func() time.Duration, set func(int), now time.Time) *procGovernor {
	g := &procGovernor{cpu: cpu, set: set, ceiling: ceiling, cur: 1, lastCPU: cpu(), lastAt: now}
	set(1)
	return g
}

// setCeiling changes the ceiling (a reload's new share); the Ps follow at
// the next step, or at once when they are above it.
func (g *procGovernor) setCeiling(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ceiling = n
	if g.cur > n {
		g.cur = n
		g.set(n)
	}
}

// step measures the load since the last step and applies nextProcs.
func (g *procGovernor) step(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	used := g.cpu()
	wall := now.Sub(g.lastAt)
	if wall <= 0 {
		return
	}
	load := float64(used-g.lastCPU) / float64(wall)
	g.lastCPU, g.lastAt = used, now
	procs, quiet := nextProcs(g.cur, g.ceiling, load, g.quiet)
	g.quiet = quiet
	if procs != g.cur {
		glog.V(1).Infof("procs: GOMAXPROCS %d -> %d at a load of %.2f CPUs", g.cur, procs, load)
		g.cur = procs
		g.set(procs)
	}
}

// run steps the governor every governInterval, for the process's life.
func (g *procGovernor) run() {
	t := time.NewTicker(governInterval)
	for now := range t.C {
		g.step(now)
	}
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// governProcs has GOMAXPROCS follow the load between 1 and ceiling: the
// first call sets up the governor, later ones (reloads) move its ceiling.
// It steps only while the ceiling is above one P: a worker with one CPU of
// its share has nothing to choose.
func governProcs(ceiling int) {
	governor.mu.Lock()
	defer governor.mu.Unlock()
	if governor.g == nil {
		governor.g = newProcGovernor(ceiling, processCPU, func(n int) { runtime.GOMAXPROCS(n) }, time.Now())
	} else {
		governor.g.setCeiling(ceiling)
	}
	if ceiling > 1 && !governor.running {
		governor.running = true
		go governor.g.run()
	}
}
