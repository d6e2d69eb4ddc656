package proc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/src/proc/board"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/diagnose"
	"nsca_fast/stages/rawsys"
)

// Descriptors a worker inherits from its supervisor.
const (
	workerListenerFD = 3 // the SO_REUSEPORT listening socket of its slot
	workerStatusFD   = 4 // the pipe on which it reports readiness (and counters, without a board)
	workerBoardFD    = 5 // the shared memory on which it publishes its counters
	workerClientsFD  = 6 // the socket on which it hands over its table of sources
)

// Worker is the supervisor's side of the pipe, seen from inside a worker.
type Worker struct {
	Slot, Generation int
	// Syslog is set when the supervisor's standard error, which the worker
	// inherits, is a pipe to the supervisor's syslog forwarder: the worker
	// then forwards its own, so its drain is logged after the supervisor died.
	Syslog   bool
	status   *os.File
	board    *board.Board    // nil: counters go through the status pipe
	counters *counters.Arena // on the board, when the supervisor reads it; else nil
	clients  net.Conn        // nil: its sources are missing from the supervisor's /clients
	tables   *tableServer    // serves the table on clients, once ServeClients ran
	reported chan struct{}

	encMu sync.Mutex
	enc   []byte // report's buffer, under encMu
}

// WorkerFromEnv returns this process's worker identity when the supervisor
// started it, or nil for any other process.
func WorkerFromEnv() *Worker {
	v := os.Getenv(envWorker)
	if v == "" {
		return nil
	}
	os.Unsetenv(envWorker)
	fields := strings.Split(v, ":")
	flags := fields[min(2, len(fields)):]
	w := &Worker{Syslog: slices.Contains(flags, roleSyslog), reported: make(chan struct{})}
	fmt.Sscanf(v, "%d:%d", &w.Slot, &w.Generation)
	unix.CloseOnExec(workerListenerFD)
	unix.CloseOnExec(workerStatusFD)
	if slices.Contains(flags, roleBoard) {
		var err error
		if w.board, err = board.Open(workerBoardFD); err != nil {
			glog.Errorf("worker %d: %v: reporting counters through the status pipe", w.Slot, err)
		} else if slices.Contains(flags, countersRole()) {
			w.counters = counters.NewArena(w.board.Counters())
		}
	}
	if slices.Contains(flags, roleClients) {
		var err error
		if w.clients, err = fileConn(workerClientsFD, "clients"); err != nil {
			glog.Errorf("worker %d: %v: its sources are missing from /clients", w.Slot, err)
		}
	}
	// Non-blocking: the reports in between are written raw (report), and
	// os.File waits for room in Go's poller.
	unix.SetNonblock(workerStatusFD, true)
	w.status = os.NewFile(workerStatusFD, "status")
	return w
}

// Counters is where this worker keeps its counters for the supervisor to
// read as they count, or nil: on the heap, reported. Nil for a nil w, a
// process no supervisor started.
func (w *Worker) Counters() *counters.Arena {
	if w == nil {
		return nil
	}
	return w.counters
}

// Listener is the listening socket the supervisor passed.
func (w *Worker) Listener() int { return workerListenerFD }

// ServeClients hands table to the supervisor whenever its /clients page is
// asked for, until the process ends.
func (w *Worker) ServeClients(table *diagnose.Registry) {
	if w.clients != nil {
		w.tables = &tableServer{conn: w.clients, table: table}
		go w.tables.serve()
	}
}

// HandOverClients sends the table to the supervisor one last time, as the
// worker ends, for the supervisor's /clients to keep listing its sources.
func (w *Worker) HandOverClients() {
	if w.tables != nil {
		w.tables.handOver()
	}
}

// Ready tells the supervisor this worker serves; a reload retires the old
// workers only after the new ones said so.
func (w *Worker) Ready() { fmt.Fprintln(w.status, "ready") }

// Report sends the worker's counters, which the supervisor sums into the
// daemon's statistics line, waiting for room in the pipe if need be.
func (w *Worker) Report(s counters.Snapshot) { w.report(&s, false) }

// report publishes the counters on the board, or, without one, sends them
// through the status pipe. With mayDrop, a report that fits the pipe
// atomically is written raw and dropped if the pipe is full: reports are
// running totals, so the next one carries this one's and more, and a
// normal write (a system call that wakes the runtime's sysmon into 1 ms of
// 20 µs polling each time) under a report every few milliseconds cost the
// worker more than its checks' own work.
func (w *Worker) report(s *counters.Snapshot, mayDrop bool) {
	// The buffer is reused: after each batch at a trickle, a report's
	// encoding was a tenth of a check's cost (counters.AppendJSON).
	w.encMu.Lock()
	defer w.encMu.Unlock()
	w.enc = s.AppendJSON(w.enc[:0])
	b := w.enc
	if w.board != nil {
		err := w.board.Publish(b)
		if err == nil {
			return
		}
		// The supervisor reads the pipe's reports from the first one on.
		glog.Errorf("worker %d: %v: reporting counters through the status pipe", w.Slot, err)
		w.board = nil
	}
	line := make([]byte, 0, len(b)+7)
	line = append(append(append(line, "stats "...), b...), '\n')
	if mayDrop && len(line) <= rawsys.PipeBuf {
		rawsys.Write(workerStatusFD, line)
		return
	}
	w.status.Write(line)
}

// progressGap is the least time between two reports that batches ask for.
// Batches are delivered, under load of one check per connection, every few
// tens of microseconds, and a report (a snapshot and its JSON, about 5 µs)
// per batch would add a tenth or more to what a check costs; one every
// millisecond costs at most 0.5 % of a CPU.
const progressGap = time.Millisecond

// ReportEvery sends counters every interval and after the batches the
// pipeline delivers, which call the returned function (it never blocks),
// until stop is closed, then once more, so the supervisor's totals include
// everything this worker did. A batch delivered progressGap or more after
// the last report is reported at once, by the goroutine that delivered it:
// woken to do it, a reporting goroutine of a busy worker ran milliseconds
// later, and a worker killed with SIGKILL in between took those results
// out of the totals. Batches within progressGap of a report are reported
// by the first batch after that, or, if none comes, by a goroutine two
// gaps after the report; a kill loses at most those. A worker whose
// counters are on the board (Counters) loses none and needs no report
// after a batch: its reports every interval carry the gauges and the
// queues, which the board's counters do not hold.
func (w *Worker) ReportEvery(snapshot func(*counters.Snapshot), interval time.Duration, stop <-chan struct{}) (poke func()) {
	r := &reporter{w: w, snapshot: snapshot, wake: make(chan struct{}, 1)}
	go r.run(interval, stop)
	return r.poke
}

// reporter sends one worker's reports, one at a time: its board has a
// single writer.
type reporter struct {
	w        *Worker
	snapshot func(*counters.Snapshot) // fills a snapshot, reusing its maps
	mu       sync.Mutex
	snap     counters.Snapshot // the last report's; under mu
	last     time.Time         // when the last report was sent; under mu
	due      atomic.Bool       // a batch was delivered since the last snapshot
	wake     chan struct{}
}

// poke reports a delivered batch at once if the last report is
// progressGap old and no report is being sent, and otherwise leaves it to
// run.
func (r *reporter) poke() {
	r.due.Store(true)
	if r.mu.TryLock() {
		sent := time.Since(r.last) >= progressGap
		if sent {
			r.reportLocked(true)
		}
		r.mu.Unlock()
		if sent {
			return
		}
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// reportLocked sends a report; a batch delivered from here on is in it or
// makes another one due.
func (r *reporter) reportLocked(mayDrop bool) {
	r.due.Store(false)
	r.snapshot(&r.snap)
	r.w.report(&r.snap, mayDrop)
	r.last = time.Now()
}

// report sends a report from run's goroutine, with ifDue only if a batch
// is waiting for one (a poke may have sent it meanwhile).
func (r *reporter) report(mayDrop, ifDue bool) {
	if ifDue && !r.due.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ifDue || r.due.Load() {
		r.reportLocked(mayDrop)
	}
}

// run reports every interval and what poke left, and once more at stop.
func (r *reporter) run(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	gap := time.NewTimer(time.Hour)
	defer gap.Stop()
	final := func() {
		r.report(false, false)
		close(r.w.reported)
	}
	for {
		select {
		case <-stop:
			final()
			return
		case <-t.C:
			r.report(true, false)
			continue
		case <-r.wake:
		}
		// A batch within the gap: the next batch after it reports it, and
		// if none comes, this goroutine does, a gap later. It must not be
		// the one to report under a steady stream of batches: a poke that
		// finds it reporting leaves the report to it, and a goroutine (or
		// its thread) descheduled in the middle of one kept the board
		// tens of milliseconds behind.
		r.mu.Lock()
		wait := 2*progressGap - time.Since(r.last)
		r.mu.Unlock()
		gap.Reset(max(wait, 0))
		select {
		case <-stop:
			final()
			return
		case <-gap.C:
			r.report(true, true)
		}
	}
}

// Reported is closed once the last report after stop was sent.
func (w *Worker) Reported() <-chan struct{} { return w.reported }

// OrphanWatch calls orphaned once the supervisor is gone (the parent pid
// changes), so that no worker outlives the main process even if the
// parent-death signal was missed.
func OrphanWatch(orphaned func()) {
	parent := os.Getppid()
	go func() {
		for range time.Tick(time.Second) {
			if os.Getppid() != parent {
				orphaned()
				return
			}
		}
	}()
}

// readStatus follows one worker's status pipe until the worker exits.
func (p *workerProc) readStatus(f io.ReadCloser) {
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "ready":
			p.readyOnce.Do(func() { close(p.ready) })
		case strings.HasPrefix(line, "stats "):
			var s counters.Snapshot
			if json.Unmarshal([]byte(line[len("stats "):]), &s) == nil {
				p.mu.Lock()
				p.last, p.piped = s, true
				p.mu.Unlock()
			}
		}
	}
}
