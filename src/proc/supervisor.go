package proc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/golang/glog"

	"nsca_fast/src/proc/board"
	"nsca_fast/stages/counters"
)

// ErrSpawn wraps failures to start a worker process.
var ErrSpawn = errors.New("proc: starting a worker")

// Supervisor runs nsca_workers worker processes, each the same binary
// serving the whole pipeline on its own SO_REUSEPORT listener. It owns the
// listening sockets for its whole life, as plain descriptors that nothing
// closes, so a worker that dies or is replaced on reload leaves its socket,
// and the clients queued on it, to its successor.
type Supervisor struct {
	// Spawner starts the worker processes.
	Spawner Spawner
	// Listeners holds one listening socket per worker slot (or a single one
	// shared by all, under socket activation).
	Listeners []int
	// Workers is how many worker processes to run.
	Workers int
	// StopTimeout bounds how long workers may drain on SIGTERM before they
	// are killed.
	StopTimeout time.Duration
	// Listen opens one more listening socket when a reload raises nsca_workers.
	Listen func() (int, error)
	// OnReload, if set, is told how each of Serve's reloads ended (nil:
	// the new workers serve); OnStop, if set, is called when Serve starts
	// stopping.
	OnReload func(err error)
	OnStop   func()

	mu      sync.Mutex
	gen     int
	procs   map[*workerProc]bool
	totals  counters.Totals // every worker's counters, exited ones included
	backoff map[int]time.Duration
	events  chan func()
}

// workerProc is one running worker as the supervisor sees it.
type workerProc struct {
	slot, gen int
	proc      Process
	exit      Exit // how it ended; set before exited is closed
	started   time.Time
	ready     chan struct{}
	readyOnce sync.Once
	status    chan struct{} // closed when the status pipe reached EOF
	exited    chan struct{} // closed after the process and its status pipe ended

	mu    sync.Mutex
	board *board.Board // where it publishes its counters; nil once retired
	last  counters.Snapshot
	piped bool // last came through the status pipe, which then has the newest
}

// snapshot is the worker's latest counters.
func (p *workerProc) snapshot() counters.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.board != nil && !p.piped {
		if rec, ok := p.board.Read(); ok {
			var s counters.Snapshot
			if json.Unmarshal(rec, &s) == nil {
				return s
			}
		}
	}
	return p.last
}

// final is the exited worker's last counters, kept once its board is
// unmapped.
func (p *workerProc) final() counters.Snapshot {
	s := p.snapshot()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.board != nil {
		p.board.Close()
		p.board, p.last = nil, s
	}
	return s
}

// listener returns the socket for a slot.
func (s *Supervisor) listener(slot int) int {
	return s.Listeners[slot%len(s.Listeners)]
}

func (s *Supervisor) spawn(slot, gen int) (*workerProc, error) {
	proc, link, err := s.Spawner.Spawn(slot, gen, s.listener(slot))
	if err != nil {
		return nil, err
	}
	p := &workerProc{slot: slot, gen: gen, proc: proc, board: link.Board, started: time.Now(), ready: make(chan struct{}), status: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		p.readStatus(link.Status)
		close(p.status)
	}()
	go func() {
		p.exit = proc.Wait()
		// The worker's last words are in the pipe (and, from a worker
		// without a board, its last counters); read them before the
		// exit is accounted.
		select {
		case <-p.status:
		case <-time.After(2 * time.Second):
		}
		close(p.exited)
		s.events <- func() { s.exited(p) }
	}()
	s.mu.Lock()
	s.procs[p] = true
	s.mu.Unlock()
	s.totals.Add(p, p.snapshot)
	glog.Infof("supervisor: started worker %d (generation %d) pid %d", slot, gen, proc.Pid())
	return p, nil
}

// Start runs the first generation of workers and waits until all serve.
func (s *Supervisor) Start() error {
	s.procs = map[*workerProc]bool{}
	s.backoff = map[int]time.Duration{}
	s.events = make(chan func(), 64)
	s.gen = 1
	procs, err := s.startGeneration(s.gen, s.Workers)
	if err != nil {
		return err
	}
	if err := waitReady(procs, 15*time.Second); err != nil {
		s.stop(procs)
		return err
	}
	return nil
}

func (s *Supervisor) startGeneration(gen, n int) ([]*workerProc, error) {
	for len(s.Listeners) < n && s.Listen != nil {
		fd, err := s.Listen()
		if err != nil {
			return nil, err
		}
		s.Listeners = append(s.Listeners, fd)
	}
	var procs []*workerProc
	for slot := range n {
		p, err := s.spawn(slot, gen)
		if err != nil {
			s.stop(procs)
			return nil, fmt.Errorf("proc: starting worker %d: %w", slot, err)
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// waitReady waits until every worker of procs said it serves.
func waitReady(procs []*workerProc, timeout time.Duration) error {
	deadline := time.After(timeout)
	for _, p := range procs {
		select {
		case <-p.ready:
		case <-p.exited:
			return fmt.Errorf("proc: worker %d (pid %d) exited during start-up: %v", p.slot, p.proc.Pid(), p.exit)
		case <-deadline:
			return fmt.Errorf("proc: worker %d (pid %d) not ready after %v", p.slot, p.proc.Pid(), timeout)
		}
	}
	return nil
}

// stop sends SIGTERM to procs and waits for them, killing any still running
// after StopTimeout.
func (s *Supervisor) stop(procs []*workerProc) {
	for _, p := range procs {
		p.proc.Signal(syscall.SIGTERM)
	}
	deadline := time.After(s.StopTimeout)
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-deadline:
			glog.Errorf("supervisor: worker %d (pid %d) still draining after %v: killing it", p.slot, p.proc.Pid(), s.StopTimeout)
			p.proc.Signal(syscall.SIGKILL)
			<-p.exited
		}
	}
}

// exited handles a worker's exit on the supervisor's goroutine: its last
// counters are kept, and a worker of the current generation is restarted,
// with back-off if it keeps dying.
func (s *Supervisor) exited(p *workerProc) {
	if !s.retire(p) {
		return
	}
	s.mu.Lock()
	current := p.gen == s.gen
	s.mu.Unlock()
	if !current {
		glog.Infof("supervisor: worker %d of generation %d (pid %d) finished: %v", p.slot, p.gen, p.proc.Pid(), p.exit)
		return
	}
	delay := s.backoff[p.slot]
	switch {
	case time.Since(p.started) > 30*time.Second:
		delay = 0
	case delay == 0:
		delay = 100 * time.Millisecond
	default:
		delay = min(delay*2, 10*time.Second)
	}
	s.backoff[p.slot] = delay
	glog.Errorf("supervisor: worker %d (pid %d) died (%v); restarting it in %v", p.slot, p.proc.Pid(), p.exit, delay)
	slot, gen := p.slot, p.gen
	time.AfterFunc(delay, func() {
		s.events <- func() {
			if gen != s.gen {
				return
			}
			if _, err := s.spawn(slot, gen); err != nil {
				glog.Errorf("supervisor: restarting worker %d: %v", slot, err)
			}
		}
	})
}

// retire moves an exited worker's counters into the totals, once.
func (s *Supervisor) retire(p *workerProc) bool {
	s.mu.Lock()
	delete(s.procs, p)
	s.mu.Unlock()
	return s.totals.Retire(p, p.final())
}

// Reload starts a new generation of n workers (which read the configuration
// again) and retires the old one once the new one serves. The listening
// sockets stay open throughout, so no connection is refused.
func (s *Supervisor) Reload(n int) error {
	s.mu.Lock()
	var old []*workerProc
	for p := range s.procs {
		old = append(old, p)
	}
	s.mu.Unlock()
	gen := s.gen + 1
	procs, err := s.startGeneration(gen, n)
	if err != nil {
		return err
	}
	if err := waitReady(procs, 15*time.Second); err != nil {
		s.stop(procs)
		return fmt.Errorf("%w; keeping the running workers", err)
	}
	s.mu.Lock()
	s.gen = gen
	s.mu.Unlock()
	s.Workers = n
	for _, p := range old {
		p.proc.Signal(syscall.SIGTERM)
	}
	return nil
}

// Stop drains and ends every worker.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	s.gen = -1 // nothing is restarted from now on
	var all []*workerProc
	for p := range s.procs {
		all = append(all, p)
	}
	s.mu.Unlock()
	s.stop(all)
	for _, p := range all {
		s.retire(p)
	}
}

// Signal sends sig to every running worker.
func (s *Supervisor) Signal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.procs {
		p.proc.Signal(sig)
	}
}

// Events delivers work that must run on the supervisor's goroutine (worker
// exits and restarts); the caller runs each function it receives.
func (s *Supervisor) Events() <-chan func() { return s.events }

// Stats sums the counters of every worker, running and exited.
func (s *Supervisor) Stats() counters.Snapshot { return s.totals.Sum() }

// Pids lists the running workers' process ids.
func (s *Supervisor) Pids() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pids []int
	for p := range s.procs {
		pids = append(pids, p.proc.Pid())
	}
	return pids
}
