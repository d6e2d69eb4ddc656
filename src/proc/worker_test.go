package proc

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"nsca_fast/src/proc/board"
	"nsca_fast/stages/counters"
)

// Under a steady stream of delivered batches, a worker's board, once a
// batch was delivered, holds every batch delivered more than progressGap
// before it (give or take the machine's noise):
// a batch delivered that long after the last report is reported by the
// goroutine that delivered it. A reporting goroutine woken at most every
// 5 ms left the board up to 5 ms (and its wake-up) behind, and a worker
// killed with SIGKILL took that much out of the supervisor's totals.
func TestWorkerReportsBatchesAtOnce(t *testing.T) {
	b, fd, err := board.Create("test-worker")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	view, err := board.Open(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	w := &Worker{board: b, reported: make(chan struct{})}
	var n atomic.Uint64
	stop := make(chan struct{})
	poke := w.ReportEvery(func() counters.Snapshot { return counters.Snapshot{Received: n.Load()} }, time.Hour, stop)
	const batches = 4000
	at := make([]time.Time, batches+1) // when the counter reached i
	var worst time.Duration
	end := time.Now().Add(2 * time.Second)
	for i := 1; i <= batches && time.Now().Before(end); i++ {
		at[i] = time.Now()
		n.Store(uint64(i))
		poke()
		rec, ok := view.Read()
		var s counters.Snapshot
		if ok {
			json.Unmarshal(rec, &s)
		}
		// How long before this batch the oldest one not on the board was
		// delivered (this goroutine's own delays after the poke do not
		// count).
		if int(s.Received) < i {
			worst = max(worst, at[i].Sub(at[s.Received+1]))
		}
		for time.Since(at[i]) < 50*time.Microsecond {
		}
	}
	close(stop)
	<-w.Reported()
	t.Logf("the board lagged the counters by at most %v (progressGap %v)", worst, progressGap)
	// A millisecond of progressGap, and the machine's noise; with reports
	// at most every 5 ms the lag was above 5 ms every time.
	const bound = 4 * time.Millisecond
	if worst > bound {
		t.Errorf("the board lagged the counters by up to %v, want at most %v", worst, bound)
	}
	rec, _ := view.Read()
	var s counters.Snapshot
	json.Unmarshal(rec, &s)
	if s.Received != n.Load() {
		t.Errorf("after stop the board says %d, want the final %d", s.Received, n.Load())
	}
}
