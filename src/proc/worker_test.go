package proc

import (
	"encoding/json"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"nsca_fast/src/proc/board"
	"nsca_fast/stages/counters"
)

// Under a steady stream of delivered batches, a worker's board, once a
// batch was delivered, holds every batch delivered more than progressGap
// before it (give or take the machine's noise): a batch delivered that
// long after the last report is reported by the goroutine that delivered
// it. A reporting goroutine woken at most every 5 ms left the board 6 to
// 24 ms behind, and a worker killed with SIGKILL took that much out of
// the supervisor's totals. The noise of a shared machine (or the race
// detector) can stretch one run, never the gap of every run: the best of
// three counts.
func TestWorkerReportsBatchesAtOnce(t *testing.T) {
	// A millisecond of progressGap, and noise.
	const bound = 4 * time.Millisecond
	var runs []time.Duration
	for range 3 {
		worst := reportLag(t)
		runs = append(runs, worst)
		if worst <= bound {
			break
		}
	}
	t.Logf("the board lagged the counters by at most %v (runs %v; progressGap %v)", runs[len(runs)-1], runs, progressGap)
	if runs[len(runs)-1] > bound {
		t.Errorf("the board lagged the counters by up to %v in each of %d runs, want at most %v", runs, len(runs), bound)
	}
}

// reportLag pokes a worker's reporter after each of a few thousand
// batches 50 µs apart and returns how long before a poke the oldest batch
// the board did not hold after it was delivered, at worst; it also checks
// the final report.
func reportLag(t *testing.T) time.Duration {
	t.Helper()
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
	read := func() uint64 {
		var s counters.Snapshot
		if rec, ok := view.Read(); ok {
			json.Unmarshal(rec, &s)
		}
		return s.Received
	}
	w := &Worker{board: b, reported: make(chan struct{})}
	var n atomic.Uint64
	stop := make(chan struct{})
	poke := w.ReportEvery(func(s *counters.Snapshot) { *s = counters.Snapshot{Received: n.Load()} }, time.Hour, stop)
	const batches = 4000
	at := make([]time.Time, batches+1) // when the counter reached i
	var worst time.Duration
	end := time.Now().Add(2 * time.Second)
	for i := 1; i <= batches && time.Now().Before(end); i++ {
		at[i] = time.Now()
		n.Store(uint64(i))
		poke()
		// This goroutine's own delays after the poke do not count.
		if got := read(); int(got) < i {
			worst = max(worst, at[i].Sub(at[got+1]))
		}
		for time.Since(at[i]) < 50*time.Microsecond {
		}
	}
	close(stop)
	<-w.Reported()
	if got := read(); got != n.Load() {
		t.Errorf("after stop the board says %d, want the final %d", got, n.Load())
	}
	return worst
}

// signalledServer records what a worker's signals made of its server.
type signalledServer struct {
	mu    sync.Mutex
	calls []string
}

func (s *signalledServer) record(c string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

func (s *signalledServer) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *signalledServer) Run() error                           { return nil }
func (s *signalledServer) Shutdown()                            { s.record("shutdown") }
func (s *signalledServer) Abort()                               { s.record("abort") }
func (s *signalledServer) Replaced()                            { s.record("replaced") }
func (s *signalledServer) Snapshot() counters.Snapshot          { return counters.Snapshot{} }
func (s *signalledServer) SnapshotInto(snap *counters.Snapshot) { *snap = s.Snapshot() }

// A worker told by ReplaceSignal drains as replaced (its last lines say a
// reload replaced it), a second ReplaceSignal changes nothing, a SIGTERM
// after it aborts the drain; a worker told by SIGTERM drains as stopped.
func TestWorkerSignals(t *testing.T) {
	for _, c := range []struct {
		name string
		sigs []os.Signal
		want []string
	}{
		{"replaced", []os.Signal{ReplaceSignal, ReplaceSignal, syscall.SIGTERM}, []string{"replaced", "shutdown", "abort"}},
		{"stopped", []os.Signal{syscall.SIGTERM, syscall.SIGTERM}, []string{"shutdown", "abort"}},
		{"supervisor gone", []os.Signal{ParentDeathSignal}, []string{"shutdown"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := &signalledServer{}
			sigs := make(chan os.Signal, len(c.sigs))
			go workerSignals(0, srv, sigs, nil)
			for _, sig := range c.sigs {
				sigs <- sig
			}
			deadline := time.Now().Add(5 * time.Second)
			for len(srv.got()) < len(c.want) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond) // nothing more comes
			if got := srv.got(); !slices.Equal(got, c.want) {
				t.Errorf("after %v the server got %v, want %v", c.sigs, got, c.want)
			}
		})
	}
}
