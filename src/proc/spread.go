package proc

import (
	"slices"
	"time"

	"github.com/golang/glog"
)

// Spreading new connections over the workers.
//
// Each worker is a whole pipeline, idle until a packet wakes it. Clients
// of a fleet trickle in, and a trickle spread over two workers wakes each
// of them for more of its own packets than one worker taking them all:
// at 1,000 paced checks a second, two workers cost 1.33 to 1.47 times the
// CPU per check of one process (2.2 context switches per check against
// 1.2). So while the first worker keeps up, the kernel hands every new
// connection to it; the others take their share once it does not (its
// load went over raiseAt, or its accept queue holds more than
// spreadQueued connections: a burst, or a worker stuck or dead), and the
// first worker alone again after lowerAfter intervals in a row in which
// all workers together used less than lowerAt CPUs and nothing waited in
// its queue. A worker's share of the CPUs is at least one CPU
// (conf.Config.CPUShare), the unit of raiseAt and lowerAt; the governor of
// each worker's Ps uses the same thresholds for the same reasons
// (procs.go).
const (
	spreadInterval = governInterval
	// spreadQueued: a worker keeping up accepts each connection as it
	// lands, so its queue holds a few at most; more than this and it is
	// behind.
	spreadQueued = 16
)

// nextSpread is the spreading rule: whether the workers are to be wide
// (all served) in the next interval, given whether they are now, the
// first worker's load and all workers' load over the last interval in
// CPUs, the first worker's accept queue, and how many intervals in a row
// were quiet before; it returns that count updated.
func nextSpread(wide bool, first, total float64, queued, quiet int) (wideNext bool, quietAfter int) {
	switch {
	case !wide && (first > raiseAt || queued > spreadQueued):
		return true, 0
	case wide && total < lowerAt && queued == 0:
		lower, quietAfter := quietInterval(quiet)
		return !lower, quietAfter
	}
	return wide, 0
}

// Spreader decides, for a Supervisor, whether new connections go to its
// first worker only or to all of them (nextSpread). Its side effect, the
// CPU a process used, is a field, so a test drives it with its own.
type Spreader struct {
	// CPU is the CPU time (user and system) the process pid has used so
	// far; false when it cannot be read (the process is gone).
	CPU func(pid int) (time.Duration, bool)

	wide   bool
	quiet  int
	last   map[int]time.Duration // each worker's CPU at lastAt
	lastAt time.Time
}

// NewSpreader returns a Spreader that reads the workers' CPU from /proc.
func NewSpreader() *Spreader { return &Spreader{CPU: processCPUOf} }

// step measures the workers' load since the last step, first being the
// first worker's processes (a reload's old and new one) and all every
// worker's, and applies nextSpread; it reports whether the spreading
// changed.
func (sp *Spreader) step(now time.Time, first, all []int, queued int) bool {
	used := make(map[int]time.Duration, len(all))
	var firstCPU, totalCPU time.Duration
	for _, pid := range all {
		cpu, ok := sp.CPU(pid)
		if !ok {
			continue
		}
		used[pid] = cpu
		// A worker not seen before (just started) counts from now on.
		before, seen := sp.last[pid]
		if !seen {
			continue
		}
		totalCPU += cpu - before
		if slices.Contains(first, pid) {
			firstCPU += cpu - before
		}
	}
	wall := now.Sub(sp.lastAt)
	measured := !sp.lastAt.IsZero() && wall > 0
	sp.last, sp.lastAt = used, now
	// A queue needs no measurement: clients that wait from the first
	// interval on (a burst at start, a worker stuck at once) are spread.
	if !measured && queued <= spreadQueued {
		return false
	}
	var firstLoad, totalLoad float64
	if measured {
		firstLoad, totalLoad = float64(firstCPU)/float64(wall), float64(totalCPU)/float64(wall)
	}
	wide, quiet := nextSpread(sp.wide, firstLoad, totalLoad, queued, sp.quiet)
	sp.quiet = quiet
	if wide == sp.wide {
		return false
	}
	sp.wide = wide
	if wide {
		glog.V(1).Infof("supervisor: new connections go to every worker: the first one's load is %.2f CPUs, %d connections wait for it", firstLoad, queued)
	} else {
		glog.V(1).Infof("supervisor: new connections go to the first worker only: all workers' load is %.2f CPUs", totalLoad)
	}
	return true
}

// processCPUOf is the CPU time process pid has used, from /proc/PID/stat.
func processCPUOf(pid int) (time.Duration, bool) {
	f := procStat(pid)
	if f == nil {
		return 0, false
	}
	return time.Duration(statCPU(f) * float64(time.Second)), true
}
