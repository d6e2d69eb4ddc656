package proc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/golang/glog"

	"nsca_fast/src/proc/board"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/diagnose"
)

// ErrSpawn wraps failures to start a worker process.
var ErrSpawn = errors.New("proc: starting a worker")

// Supervisor runs nsca_workers worker processes, each the same binary
// serving the whole pipeline on its own SO_REUSEPORT listener. It owns the
// listening sockets, as plain descriptors that no worker's exit closes, so
// a worker that dies or is replaced on reload leaves its socket, and the
// clients queued on it, to its successor. A reload that lowers
// nsca_workers retires the sockets it no longer needs (see Reload).
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
	// Sockets opens, steers and closes listening sockets as reloads change
	// nsca_workers, one socket per worker; nil (socket activation) keeps
	// Listeners as they are, the slots sharing them.
	Sockets Sockets
	// Spreader, if set with Sockets, has new connections go to the first
	// worker only while it keeps up (see spread.go); nil spreads them over
	// every worker.
	Spreader *Spreader
	// OnReload, if set, is told how each of Serve's reloads ended (nil:
	// the new workers serve); OnStop, if set, is called when Serve starts
	// stopping.
	OnReload func(err error)
	OnStop   func()

	// retry is the pending retry of a reload (see retryReload); retryDelay
	// replaces reloadRetryDelay in tests. Both are Serve's.
	retry      *reloadRetry
	retryDelay time.Duration

	mu       sync.Mutex
	gen      int
	procs    map[*workerProc]bool
	totals   counters.Totals // every worker's counters, exited ones included
	backoff  map[int]slotFailure
	now      func() time.Time // the clock back-off is measured on; nil is time.Now
	events   chan func()
	retiring *retirement // sockets a reload no longer needs, not yet closed
	// retiredSources is the last tables of sources of the workers that
	// ended, merged; under mu.
	retiredSources []diagnose.Source
}

// retirement is listening sockets that a reload no longer needs: new
// connections are steered away from them, and their old workers go on
// serving what is queued or still completing its handshake on them until
// they are closed.
type retirement struct {
	fds     []int // the last sockets of the group, in its order
	workers []*workerProc
	since   time.Time
}

// How a socket is retired: after retireGrace, time enough for handshakes
// under way when new connections were steered away to land in its queue,
// it is closed once its queue is empty, or at the latest after retireMax
// (its worker may be stuck or dead), resetting what still waits there.
// Its worker accepts meanwhile, so no client waits on it.
const (
	retireGrace = time.Second
	retireMax   = 3 * time.Second
	retirePoll  = 20 * time.Millisecond
)

// workerProc is one running worker as the supervisor sees it.
type workerProc struct {
	slot, gen int
	proc      Process
	exit      Exit // how it ended; set before exited is closed
	ready     chan struct{}
	readyOnce sync.Once
	drainOnce sync.Once
	replaced  atomic.Bool   // a reload, not a stop, told it to drain
	status    chan struct{} // closed when the status pipe reached EOF
	exited    chan struct{} // closed after the process and its status pipe ended

	mu      sync.Mutex
	board   *board.Board // where it publishes its counters; nil once retired
	clients *clientsLink // where it hands over its table of sources
	last    counters.Snapshot
	piped   bool // last came through the status pipe, which then has the newest
}

// snapshot is the worker's latest counters: its last report, with the
// counters it keeps on the board, if any, read as they are now.
func (p *workerProc) snapshot() counters.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.board == nil {
		return p.last
	}
	var s counters.Snapshot
	rec, ok := p.board.Read()
	if p.piped || !ok || json.Unmarshal(rec, &s) != nil {
		// A copy: reading the board's counters into p.last's own maps
		// would change the report they started from.
		s = counters.Snapshot{}
		s.Add(p.last)
	}
	counters.ReadArena(p.board.Counters(), &s)
	return s
}

// drain tells the worker to drain, once: a second SIGTERM would abort its
// drain, and a reload storm must not do that to the generations before.
func (p *workerProc) drain() { p.drainOnce.Do(func() { p.proc.Signal(syscall.SIGTERM) }) }

// replace tells the worker, once, to drain because a reload replaced it,
// so that its last lines do not read as the daemon's stop. A worker that
// has not said it is ready may not listen to ReplaceSignal yet (Go drops
// a signal nobody asked for, and the worker would serve on), so it is
// told to drain with SIGTERM instead.
func (p *workerProc) replace() {
	p.drainOnce.Do(func() {
		p.replaced.Store(true)
		select {
		case <-p.ready:
			p.proc.Signal(ReplaceSignal)
		default:
			p.proc.Signal(syscall.SIGTERM)
		}
	})
}

// final is the exited worker's last counters, kept once its board is
// unmapped.
func (p *workerProc) final() counters.Snapshot {
	p.clients.close()
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
	p := &workerProc{slot: slot, gen: gen, proc: proc, board: link.Board, clients: newClientsLink(link.Clients), ready: make(chan struct{}), status: make(chan struct{}), exited: make(chan struct{})}
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
	s.backoff = map[int]slotFailure{}
	s.events = make(chan func(), 64)
	s.gen = 1
	procs, err := s.startGeneration(s.gen, s.Workers)
	if err != nil {
		return err
	}
	// Steered before the workers serve: until then the kernel would hash
	// the first clients over every socket, where the Spreader wants the
	// first one only; a socket whose worker is not ready yet holds them in
	// its queue.
	s.steer()
	if err := waitReady(procs, 15*time.Second); err != nil {
		s.stop(procs)
		return err
	}
	return nil
}

// steer has the kernel hand new connections to the sockets in Listeners
// only (the first of them only, while the Spreader says so); sockets
// opened by a reload get none before their workers serve, and retiring
// ones none at all.
func (s *Supervisor) steer() {
	if s.Sockets == nil || len(s.Listeners) == 0 {
		return
	}
	n := len(s.Listeners)
	if s.Spreader != nil && !s.Spreader.wide {
		n = 1
	}
	if err := s.Sockets.Steer(s.Listeners[0], n); err != nil {
		glog.Warningf("supervisor: %v: a socket a reload opens or retires may take connections it does not serve", err)
	}
}

// closeSockets closes listening sockets at the end of the group, the last
// one first, so that the others keep their places in it (see Steer).
func (s *Supervisor) closeSockets(fds []int) {
	for i := len(fds) - 1; i >= 0; i-- {
		s.Sockets.Close(fds[i])
	}
}

func (s *Supervisor) startGeneration(gen, n int) ([]*workerProc, error) {
	for len(s.Listeners) < n && s.Sockets != nil {
		fd, err := s.Sockets.Open()
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
			if p.exit.Signal != 0 {
				return fmt.Errorf("%w: worker %d (pid %d) exited during start-up: %v", errKilledStarting, p.slot, p.proc.Pid(), p.exit)
			}
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
		p.drain()
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
		how := ""
		if p.replaced.Load() {
			how = ", replaced by a reload,"
		}
		glog.Infof("supervisor: worker %d of generation %d (pid %d)%s finished: %v", p.slot, p.gen, p.proc.Pid(), how, p.exit)
		return
	}
	now := s.clock()
	last, failedBefore := s.backoff[p.slot]
	delay := restartDelay(last, failedBefore, now)
	s.backoff[p.slot] = slotFailure{at: now, delay: delay}
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

// retire moves an exited worker's counters into the totals, and its last
// table of sources into the supervisor's, once.
func (s *Supervisor) retire(p *workerProc) bool {
	s.mu.Lock()
	delete(s.procs, p)
	s.mu.Unlock()
	table := p.clients.lastWords(lastWordsTimeout) // before final closes the socket
	if !s.totals.Retire(p, p.final()) {
		return false
	}
	s.keepSources(table)
	return true
}

// Reload starts a new generation of n workers (which read the configuration
// again) and retires the old one once the new one serves. The listening
// sockets stay open throughout, so no connection is refused. When n is
// lower than before, the sockets of the slots gone are retired: new
// connections are steered to the others at once, and each is closed once
// its old worker has served its queue (see retirement). Closing one
// outright would reset the clients queued on it, and keeping it would
// leave it a share of new clients that nobody accepts.
func (s *Supervisor) Reload(n int) error {
	// The sockets of an earlier reload go first, so that the group holds
	// exactly Listeners before it changes again.
	s.finishRetiring()
	s.mu.Lock()
	var old []*workerProc
	for p := range s.procs {
		if p.gen == s.gen {
			old = append(old, p)
		}
	}
	s.mu.Unlock()
	had := len(s.Listeners)
	gen := s.gen + 1
	procs, err := s.startGeneration(gen, n)
	if err == nil {
		if err = waitReady(procs, 15*time.Second); err != nil {
			s.stop(procs)
			err = fmt.Errorf("%w; keeping the running workers", err)
		}
	}
	if err != nil {
		if len(s.Listeners) > had {
			s.closeSockets(s.Listeners[had:])
			s.Listeners = s.Listeners[:had]
		}
		return err
	}
	s.mu.Lock()
	s.gen = gen
	s.mu.Unlock()
	s.Workers = n
	r := &retirement{since: time.Now()}
	if s.Sockets != nil && len(s.Listeners) > n {
		r.fds = slices.Clone(s.Listeners[n:])
		s.Listeners = s.Listeners[:n]
	}
	s.steer()
	for _, p := range old {
		if len(r.fds) > 0 && p.slot >= n {
			r.workers = append(r.workers, p)
			continue
		}
		p.replace()
	}
	if len(r.fds) > 0 {
		s.retiring = r
		s.retireLater(r)
	}
	return nil
}

// retireLater looks at r again in a moment, on the supervisor's goroutine.
func (s *Supervisor) retireLater(r *retirement) {
	time.AfterFunc(retirePoll, func() {
		s.events <- func() {
			if s.retiring != r {
				return // a reload finished it
			}
			// With no worker left to serve them, what is queued there has
			// nothing to wait for.
			waited := time.Since(r.since)
			if r.serving() && (waited < retireGrace || waited < retireMax && s.queued(r) > 0) {
				s.retireLater(r)
				return
			}
			s.finishRetiring()
		}
	})
}

// serving reports whether any of the retiring sockets' workers still runs.
func (r *retirement) serving() bool {
	for _, p := range r.workers {
		select {
		case <-p.exited:
		default:
			return true
		}
	}
	return false
}

// queued is how many connections wait on the retiring sockets.
func (s *Supervisor) queued(r *retirement) int {
	n := 0
	for _, fd := range r.fds {
		n += s.Sockets.Queued(fd)
	}
	return n
}

// finishRetiring lets the retiring sockets' workers drain and closes the
// sockets.
func (s *Supervisor) finishRetiring() {
	r := s.retiring
	if r == nil {
		return
	}
	s.retiring = nil
	for _, p := range r.workers {
		p.replace()
	}
	if q := s.queued(r); q > 0 {
		glog.Warningf("supervisor: %d connections still queued on the %d listening sockets nsca_workers=%d no longer needs are reset", q, len(r.fds), s.Workers)
	}
	s.closeSockets(r.fds)
	glog.Infof("supervisor: closed %d listening sockets nsca_workers=%d no longer needs, after %v", len(r.fds), s.Workers, time.Since(r.since).Round(time.Millisecond))
}

// SpreadByLoad gives the supervisor a Spreader (on) or none (off: every
// worker served), as a reload's nsca_workers_spread says, and steers
// anew; a Spreader already there keeps what it measured. It runs on
// Serve's goroutine.
func (s *Supervisor) SpreadByLoad(on bool) {
	switch {
	case on && s.Spreader == nil:
		s.Spreader = NewSpreader()
	case !on:
		s.Spreader = nil
	}
	s.steer()
}

// spread steps the Spreader on the supervisor's goroutine and steers anew
// when it changed.
func (s *Supervisor) spread(now time.Time) {
	if s.Spreader == nil || s.Sockets == nil || len(s.Listeners) == 0 {
		return
	}
	var first, all []int
	s.mu.Lock()
	for p := range s.procs {
		all = append(all, p.proc.Pid())
		if p.slot == 0 {
			first = append(first, p.proc.Pid())
		}
	}
	s.mu.Unlock()
	if s.Spreader.step(now, first, all, s.Sockets.Queued(s.Listeners[0])) {
		s.steer()
	}
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
