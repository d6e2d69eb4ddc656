package proc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"nsca_fast/src/proc/board"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/diagnose"
)

// fakeWorker is a worker process as the supervisor sees it, played by the
// test: it says "ready" on its status pipe (unless told not to), ends on
// SIGKILL, and on SIGTERM (or ReplaceSignal, which drains as one) does
// what drainTerms says.
type fakeWorker struct {
	slot, gen, listener, pid int
	status                   *io.PipeWriter
	board                    *board.Board       // its end of the board, when the spawner makes boards
	table                    *diagnose.Registry // its sources, when the spawner makes tables
	tables                   *tableServer       // its end of the table's socket
	exit                     chan Exit
	// drainTerms is how many SIGTERMs it takes to end: 1 drains at once, 2
	// models a drain that only an abort (the second SIGTERM) ends.
	drainTerms int

	mu      sync.Mutex
	signals []os.Signal
	ended   bool
}

func (w *fakeWorker) Pid() int { return w.pid }

func (w *fakeWorker) Signal(sig os.Signal) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return os.ErrProcessDone
	}
	w.signals = append(w.signals, sig)
	switch {
	case sig == syscall.SIGKILL:
		w.endLocked(Exit{Code: -1, Signal: syscall.SIGKILL})
	case (sig == syscall.SIGTERM || sig == ReplaceSignal) && w.countLocked(syscall.SIGTERM)+w.countLocked(ReplaceSignal) >= w.drainTerms:
		w.endLocked(Exit{})
	}
	return nil
}

func (w *fakeWorker) countLocked(sig os.Signal) int {
	n := 0
	for _, s := range w.signals {
		if s == sig {
			n++
		}
	}
	return n
}

// crash ends the worker as if it died on its own.
func (w *fakeWorker) crash() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.endLocked(Exit{Code: -1, Signal: syscall.SIGSEGV})
}

func (w *fakeWorker) endLocked(e Exit) {
	if w.ended {
		return
	}
	w.ended = true
	w.status.Close()
	if w.tables != nil {
		if e.Signal == 0 {
			w.tables.handOver() // as a worker does once it has drained
		}
		w.tables.conn.Close() // as the process's exit closes it
	}
	w.exit <- e
}

func (w *fakeWorker) Wait() Exit { return <-w.exit }

func (w *fakeWorker) isEnded() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended
}

func (w *fakeWorker) got() []os.Signal {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.signals)
}

// fakeSpawner starts fakeWorkers and remembers them in order.
type fakeSpawner struct {
	mu         sync.Mutex
	workers    []*fakeWorker
	drainTerms int
	notReady   bool // new workers never say "ready"
	boards     bool // give each worker a board, as ExecSpawner does
	tables     bool // give each worker a table of sources it hands over, as workers do
}

func (f *fakeSpawner) Spawn(slot, gen, listener int) (Process, Link, error) {
	r, w := io.Pipe()
	f.mu.Lock()
	fw := &fakeWorker{slot: slot, gen: gen, listener: listener, pid: 1000 + len(f.workers), status: w, exit: make(chan Exit, 1), drainTerms: max(f.drainTerms, 1)}
	f.workers = append(f.workers, fw)
	notReady, boards, tables := f.notReady, f.boards, f.tables
	f.mu.Unlock()
	link := Link{Status: r}
	if tables {
		var worker net.Conn
		link.Clients, worker = net.Pipe()
		fw.table = diagnose.NewRegistry()
		fw.tables = &tableServer{conn: worker, table: fw.table}
		go fw.tables.serve()
	}
	if boards {
		b, fd, err := board.Create("fake-worker")
		if err != nil {
			return nil, Link{}, err
		}
		if fw.board, err = board.Open(fd); err != nil {
			return nil, Link{}, err
		}
		link.Board = b
	}
	if !notReady {
		go fmt.Fprintln(w, "ready")
	}
	return fw, link, nil
}

func (f *fakeSpawner) all() []*fakeWorker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.workers)
}

func (f *fakeSpawner) set(fn func(f *fakeSpawner)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// fakeSockets are listening sockets 40, 41, ... as the supervisor sees
// them: the group the kernel keeps of them, which the steering picks from,
// and what waits in their queues.
type fakeSockets struct {
	mu     sync.Mutex
	next   int
	group  []int       // open sockets, in the kernel's order
	steer  int         // how many of the first ones get new connections
	queued map[int]int // connections waiting, by socket
	closed []int
}

func (f *fakeSockets) Open() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.group = append(f.group, f.next-1)
	return f.next - 1, nil
}

func (f *fakeSockets) Steer(fd, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.group, fd) {
		return fmt.Errorf("steering through socket %d, not in the group %v", fd, f.group)
	}
	f.steer = n
	return nil
}

func (f *fakeSockets) Queued(fd int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queued[fd]
}

// Close removes fd from the group as the kernel does: the last socket
// takes its place.
func (f *fakeSockets) Close(fd int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.Index(f.group, fd)
	f.group[i] = f.group[len(f.group)-1]
	f.group = f.group[:len(f.group)-1]
	f.closed = append(f.closed, fd)
}

func (f *fakeSockets) setQueued(fd, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queued == nil {
		f.queued = map[int]int{}
	}
	f.queued[fd] = n
}

// served is the sockets that get new connections.
func (f *fakeSockets) served() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.group[:min(f.steer, len(f.group))])
}

func (f *fakeSockets) closedList() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.closed)
}

func (f *fakeSockets) open() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.group)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// startSupervisor runs a supervisor of n fake workers on fake listeners
// 40, 41, ... with Serve on its own goroutine; the returned channel takes
// signals and served is closed when Serve returns. Each of opts sets the
// supervisor up further before it starts.
func startSupervisor(t *testing.T, f *fakeSpawner, n int, reload func(int) (int, error), opts ...func(*Supervisor)) (s *Supervisor, sigs chan os.Signal, served chan struct{}) {
	t.Helper()
	s = &Supervisor{Spawner: f, Workers: n, StopTimeout: 5 * time.Second, Sockets: &fakeSockets{next: 40}}
	for _, o := range opts {
		o(s)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	sigs, served = make(chan os.Signal, 4), make(chan struct{})
	go func() {
		s.Serve(sigs, reload)
		close(served)
	}()
	t.Cleanup(func() {
		select {
		case <-served:
		default:
			sigs <- syscall.SIGTERM
			<-served
		}
	})
	return s, sigs, served
}

func sameN(n int) func(int) (int, error) { return func(int) (int, error) { return n, nil } }

// A SIGHUP starts a new generation on the same listening sockets, and only
// once it serves are the old workers told that it replaced them (one
// ReplaceSignal each, not the stop's SIGTERM).
func TestSupervisorReloadReplacesGenerationOnSameSockets(t *testing.T) {
	f := &fakeSpawner{}
	s, sigs, served := startSupervisor(t, f, 2, sameN(2))
	old := f.all()
	sigs <- syscall.SIGHUP
	waitUntil(t, "the old generation ended", func() bool { return len(s.Pids()) == 2 && len(f.all()) == 4 && old[0].ended && old[1].ended })
	for _, w := range old {
		if got := w.got(); !slices.Equal(got, []os.Signal{ReplaceSignal}) {
			t.Errorf("old worker %d got %v, want one ReplaceSignal", w.slot, got)
		}
	}
	for i, w := range f.all()[2:] {
		if w.gen != 2 || w.listener != old[i].listener || len(w.got()) != 0 {
			t.Errorf("new worker %d: generation %d, listener %d (old %d), signals %v", i, w.gen, w.listener, old[i].listener, w.got())
		}
	}
	sigs <- syscall.SIGTERM
	<-served
	if len(f.all()) != 4 {
		t.Errorf("%d workers were started, want 4: an old worker's exit must not be restarted", len(f.all()))
	}
}

// A worker that a reload replaces before it said it serves (a restart
// under way) may not listen to ReplaceSignal yet, which Go would drop:
// it is told to drain with SIGTERM, the ready ones with ReplaceSignal.
func TestSupervisorReloadStopsUnreadyWorkerWithSIGTERM(t *testing.T) {
	f := &fakeSpawner{}
	_, sigs, _ := startSupervisor(t, f, 2, sameN(2))
	f.set(func(f *fakeSpawner) { f.notReady = true })
	f.all()[1].crash()
	waitUntil(t, "the dead worker was restarted", func() bool { return len(f.all()) == 3 })
	f.set(func(f *fakeSpawner) { f.notReady = false })
	sigs <- syscall.SIGHUP
	waitUntil(t, "the reload told the old workers to drain", func() bool { return len(f.all()) == 5 && f.all()[0].isEnded() && f.all()[2].isEnded() })
	if got := f.all()[0].got(); !slices.Equal(got, []os.Signal{ReplaceSignal}) {
		t.Errorf("ready old worker got %v, want one ReplaceSignal", got)
	}
	if got := f.all()[2].got(); !slices.Equal(got, []os.Signal{syscall.SIGTERM}) {
		t.Errorf("old worker not yet ready got %v, want one SIGTERM", got)
	}
}

// A stop while workers a reload replaced still drain leaves them to it
// (they got their one drain signal); a second SIGTERM makes every worker,
// old and new, abort its drain.
func TestSupervisorStopAfterReloadAbortsReplacedDrain(t *testing.T) {
	f := &fakeSpawner{drainTerms: 2}
	_, sigs, served := startSupervisor(t, f, 2, sameN(2))
	old := f.all()
	sigs <- syscall.SIGHUP
	waitUntil(t, "the old workers were replaced", func() bool { return len(old[0].got()) > 0 && len(old[1].got()) > 0 })
	sigs <- syscall.SIGTERM
	waitUntil(t, "the new workers were told to drain", func() bool {
		ws := f.all()
		return len(ws) == 4 && len(ws[2].got()) > 0 && len(ws[3].got()) > 0
	})
	sigs <- syscall.SIGTERM
	<-served
	for i, w := range f.all() {
		want := []os.Signal{syscall.SIGTERM, syscall.SIGTERM}
		if i < 2 {
			want = []os.Signal{ReplaceSignal, syscall.SIGTERM}
		}
		if got := w.got(); !slices.Equal(got, want) {
			t.Errorf("worker %d of generation %d got %v, want %v", w.slot, w.gen, got, want)
		}
	}
}

// A reload whose workers never become ready keeps the running workers
// untouched.
func TestSupervisorFailedReloadKeepsWorkers(t *testing.T) {
	f := &fakeSpawner{}
	s, _, _ := startSupervisor(t, f, 2, sameN(2))
	old := f.all()
	f.set(func(f *fakeSpawner) { f.notReady = true })
	// Reload's wait for readiness is long; a new worker that exits during
	// start-up fails it at once.
	go func() {
		waitUntil(t, "the new generation was spawned", func() bool { return len(f.all()) >= 3 })
		f.all()[2].crash()
	}()
	if err := s.Reload(2); err == nil {
		t.Fatal("Reload succeeded with a worker that died during start-up")
	}
	for _, w := range old {
		if len(w.got()) != 0 || w.ended {
			t.Errorf("running worker %d was signalled %v after a failed reload", w.slot, w.got())
		}
	}
}

// The first SIGTERM drains (one SIGTERM to each worker); a second one
// while they drain makes them abort (a second SIGTERM each).
func TestSupervisorSecondSignalAbortsDrain(t *testing.T) {
	f := &fakeSpawner{drainTerms: 2}
	_, sigs, served := startSupervisor(t, f, 2, sameN(2))
	sigs <- syscall.SIGTERM
	waitUntil(t, "every worker was told to drain", func() bool {
		for _, w := range f.all() {
			if len(w.got()) == 0 {
				return false
			}
		}
		return true
	})
	select {
	case <-served:
		t.Fatal("the supervisor returned while its workers still drained")
	case <-time.After(50 * time.Millisecond):
	}
	sigs <- syscall.SIGINT
	<-served
	for _, w := range f.all() {
		if got := w.got(); !slices.Equal(got, []os.Signal{syscall.SIGTERM, syscall.SIGTERM}) {
			t.Errorf("worker %d got %v, want SIGTERM to drain and SIGTERM to abort", w.slot, got)
		}
	}
}

// A worker that dies during the drain is not restarted, and the drain
// ends once the others have finished.
func TestSupervisorWorkerDyingDuringDrainIsNotRestarted(t *testing.T) {
	f := &fakeSpawner{drainTerms: 2}
	_, sigs, served := startSupervisor(t, f, 2, sameN(2))
	sigs <- syscall.SIGTERM
	ws := f.all()
	waitUntil(t, "the drain started", func() bool { return len(ws[0].got()) > 0 && len(ws[1].got()) > 0 })
	ws[0].crash()
	time.Sleep(300 * time.Millisecond) // longer than the first restart back-off
	if n := len(f.all()); n != 2 {
		t.Errorf("%d workers started, want 2: nothing is restarted during a drain", n)
	}
	sigs <- syscall.SIGTERM // abort the other one's drain
	<-served
}

// A worker of the current generation that dies is restarted on its slot's
// listening socket.
func TestSupervisorRestartsDeadWorker(t *testing.T) {
	f := &fakeSpawner{}
	_, _, _ = startSupervisor(t, f, 2, sameN(2))
	dead := f.all()[1]
	dead.crash()
	waitUntil(t, "the dead worker was replaced", func() bool { return len(f.all()) == 3 })
	if w := f.all()[2]; w.slot != dead.slot || w.listener != dead.listener || w.gen != dead.gen {
		t.Errorf("replacement: slot %d listener %d generation %d; want %d, %d, %d", w.slot, w.listener, w.gen, dead.slot, dead.listener, dead.gen)
	}
}

// A reload that fails to read the configuration keeps the workers.
func TestSupervisorReloadErrorKeepsWorkers(t *testing.T) {
	f := &fakeSpawner{}
	_, sigs, _ := startSupervisor(t, f, 2, func(int) (int, error) { return 0, errors.New("bad config") })
	sigs <- syscall.SIGHUP
	time.Sleep(100 * time.Millisecond)
	for _, w := range f.all() {
		if len(w.got()) != 0 {
			t.Errorf("worker %d was signalled %v after a refused reload", w.slot, w.got())
		}
	}
	if len(f.all()) != 2 {
		t.Errorf("%d workers started, want 2", len(f.all()))
	}
}

// A worker's environment keeps nothing meant for the supervisor alone.
func TestWorkerEnv(t *testing.T) {
	got := workerEnv([]string{"PATH=/bin", envDetached + "=3", "LISTEN_FDS=1", "LISTEN_PID=7", "NOTIFY_SOCKET=/run/x", envWorker + "=0:1", "GOGC=1"})
	if !slices.Equal(got, []string{"PATH=/bin", "GOGC=1"}) {
		t.Errorf("workerEnv = %q", got)
	}
}

// received publishes a worker's counters saying it received n results,
// on its board or, with piped, through its status pipe.
func (w *fakeWorker) received(t *testing.T, n uint64, piped bool) {
	t.Helper()
	b, err := json.Marshal(counters.Snapshot{Received: n})
	if err != nil {
		t.Fatal(err)
	}
	if piped {
		if _, err := fmt.Fprintf(w.status, "stats %s\n", b); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := w.board.Publish(b); err != nil {
		t.Fatal(err)
	}
}

// The supervisor reads its workers' counters from their boards when it
// needs them, keeps a dead worker's last ones, and from a worker that
// reports through its status pipe takes the pipe's.
func TestSupervisorCountsFromBoards(t *testing.T) {
	f := &fakeSpawner{boards: true}
	s, _, _ := startSupervisor(t, f, 2, sameN(2))
	received := func() uint64 { return s.Stats().Received }
	w := f.all()
	w[0].received(t, 5, false)
	w[1].received(t, 7, false)
	if got := received(); got != 12 {
		t.Fatalf("received %d, want 12 from the two boards", got)
	}
	w[0].received(t, 6, false)
	if got := received(); got != 13 {
		t.Fatalf("received %d, want 13 after a newer record", got)
	}
	w[1].crash()
	waitUntil(t, "the dead worker was replaced", func() bool { return len(f.all()) == 3 && len(s.Pids()) == 2 })
	if got := received(); got != 13 {
		t.Fatalf("received %d after a worker died, want its last 7 kept", got)
	}
	f.all()[2].received(t, 1, false)
	w[0].received(t, 9, true)
	waitUntil(t, "the piped report was read", func() bool { return received() == 17 })
	w[0].received(t, 100, false)
	if got := received(); got != 17 {
		t.Fatalf("received %d: a worker that reported through its pipe is read from the pipe, want 17", got)
	}
}

// A worker that keeps its counters on its board is read as it counts:
// what it counted after its last report is in the totals, and stays there
// after it was killed; the report's gauges (the queues) are kept beside.
func TestSupervisorCountsFromBoardCounters(t *testing.T) {
	f := &fakeSpawner{boards: true}
	s, _, _ := startSupervisor(t, f, 1, sameN(1))
	w := f.all()[0]
	stats := counters.NewStatsIn(counters.NewArena(w.board.Counters()))
	stats.Received.Add(5)
	stats.Emitted("fifo").Add(5)
	report := stats.Snapshot()
	report.Queues = map[string]int64{"emit": 3}
	b, err := json.Marshal(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.board.Publish(b); err != nil {
		t.Fatal(err)
	}
	stats.Received.Add(15)
	stats.Emitted("fifo").Add(15)
	if got := s.Stats(); got.Received != 20 || got.Emitted["fifo"] != 20 || got.Queues["emit"] != 3 {
		t.Fatalf("received %d, emitted %v, queues %v; want 20, fifo=20 from the board's counters and emit=3 from the report", got.Received, got.Emitted, got.Queues)
	}
	stats.Received.Add(1)
	stats.Emitted("fifo").Add(1)
	w.crash()
	waitUntil(t, "the dead worker was replaced", func() bool { return len(f.all()) == 2 && len(s.Pids()) == 1 })
	if got := s.Stats(); got.Received != 21 || got.Emitted["fifo"] != 21 {
		t.Fatalf("after the worker died: received %d, emitted %v; want its last count, 21", got.Received, got.Emitted)
	}
}

// A reload from 3 workers to 1 steers new connections to the one socket
// kept at once, lets the old workers of the two slots gone serve their
// sockets' queues until they are empty, and then closes those sockets,
// the last of the group first, so that the kernel's group is exactly the
// sockets served.
func TestSupervisorReloadFewerWorkersRetiresSockets(t *testing.T) {
	f := &fakeSpawner{}
	workers := 3
	s, sigs, _ := startSupervisor(t, f, 3, func(int) (int, error) { return workers, nil })
	socks := s.Sockets.(*fakeSockets)
	if got := socks.served(); !slices.Equal(got, []int{40, 41, 42}) {
		t.Fatalf("sockets served at start %v, want [40 41 42]", got)
	}
	old := f.all()
	socks.setQueued(42, 2)
	workers = 1
	sigs <- syscall.SIGHUP
	hup := time.Now()
	waitUntil(t, "the new worker serves", func() bool { return len(f.all()) == 4 && old[0].isEnded() })
	waitUntil(t, "new connections go to socket 40 only", func() bool { return slices.Equal(socks.served(), []int{40}) })
	time.Sleep(retireGrace + 200*time.Millisecond)
	if got := socks.open(); !slices.Equal(got, []int{40, 41, 42}) {
		t.Errorf("sockets open while 42 still has connections queued: %v, want all three", got)
	}
	for _, w := range old[1:] {
		if len(w.got()) != 0 {
			t.Errorf("old worker %d was signalled %v while its socket was still being served", w.slot, w.got())
		}
	}
	socks.setQueued(42, 0)
	waitUntil(t, "the surplus sockets were closed", func() bool { return len(socks.open()) == 1 })
	if waited := time.Since(hup); waited < retireGrace {
		t.Errorf("the surplus sockets were closed %v after the reload, before the grace of %v", waited, retireGrace)
	}
	if closed := socks.closedList(); !slices.Equal(closed, []int{42, 41}) || socks.open()[0] != 40 {
		t.Errorf("closed %v (want 42, then 41), open %v (want 40)", closed, socks.open())
	}
	for _, w := range old {
		if got := w.got(); !slices.Equal(got, []os.Signal{ReplaceSignal}) {
			t.Errorf("old worker %d got %v, want one ReplaceSignal", w.slot, got)
		}
	}
	if got := f.all()[3]; got.listener != 40 || len(s.Listeners) != 1 {
		t.Errorf("the new worker listens on %d, the supervisor holds %v; want 40 and [40]", got.listener, s.Listeners)
	}
}

// A reload that raises nsca_workers opens sockets that get new connections
// only once their workers serve; one that follows a lowering before its
// sockets were retired retires them first (each old worker still gets a
// single ReplaceSignal: a SIGTERM after it would abort its drain), so the
// group never holds a socket out of its place.
func TestSupervisorReloadStormResizes(t *testing.T) {
	f := &fakeSpawner{}
	workers := 3
	s, sigs, _ := startSupervisor(t, f, 3, func(int) (int, error) { return workers, nil })
	socks := s.Sockets.(*fakeSockets)
	first := f.all()
	workers = 1
	sigs <- syscall.SIGHUP
	waitUntil(t, "the 3→1 reload", func() bool { return slices.Equal(socks.served(), []int{40}) })
	workers = 2
	sigs <- syscall.SIGHUP
	waitUntil(t, "the 1→2 reload", func() bool { return len(f.all()) == 6 && slices.Equal(socks.served(), []int{40, 43}) })
	if got := socks.open(); !slices.Equal(got, []int{40, 43}) {
		t.Errorf("open sockets %v, want [40 43]", got)
	}
	if closed := socks.closedList(); !slices.Equal(closed, []int{42, 41}) {
		t.Errorf("closed %v, want [42 41]", closed)
	}
	for _, w := range f.all()[:4] {
		if got := w.got(); !slices.Equal(got, []os.Signal{ReplaceSignal}) {
			t.Errorf("worker %d of generation %d got %v, want one ReplaceSignal", w.slot, w.gen, got)
		}
	}
	if first[1].listener != 41 || f.all()[5].listener != 43 {
		t.Errorf("listeners: old slot 1 on %d, new slot 1 on %d", first[1].listener, f.all()[5].listener)
	}
}

// A reload raising nsca_workers whose workers fail closes the sockets it
// opened, and the running workers keep theirs.
func TestSupervisorFailedGrowClosesNewSockets(t *testing.T) {
	f := &fakeSpawner{}
	s, _, _ := startSupervisor(t, f, 2, sameN(2))
	socks := s.Sockets.(*fakeSockets)
	f.set(func(f *fakeSpawner) { f.notReady = true })
	go func() {
		waitUntil(t, "the new generation was spawned", func() bool { return len(f.all()) >= 3 })
		f.all()[2].crash()
	}()
	if err := s.Reload(3); err == nil {
		t.Fatal("Reload succeeded with a worker that died during start-up")
	}
	if got := socks.open(); !slices.Equal(got, []int{40, 41}) || !slices.Equal(socks.served(), []int{40, 41}) {
		t.Errorf("after a failed 2→3 reload, open sockets %v, served %v; want [40 41] both", got, socks.served())
	}
}

// onLoop runs fn on the supervisor's goroutine, which owns its back-off.
func onLoop(s *Supervisor, fn func()) {
	done := make(chan struct{})
	s.events <- func() { fn(); close(done) }
	<-done
}

// A slot's restart back-off grows while its workers die within 30 s of the
// slot's previous death and resets once a death comes later than that,
// however young the dying process is: every reload starts new processes,
// so reloads less than 30 s apart used to keep a process age of 30 s from
// ever coming, and the back-off from ever resetting.
func TestSupervisorBackoffResetsFromLastFailure(t *testing.T) {
	f := &fakeSpawner{}
	s, sigs, _ := startSupervisor(t, f, 2, sameN(2))
	var mu sync.Mutex
	clock := time.Unix(1_000_000, 0)
	advance := func(d time.Duration) {
		mu.Lock()
		clock = clock.Add(d)
		mu.Unlock()
	}
	onLoop(s, func() { s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock } })
	// kill crashes slot 1's live worker and returns the delay its restart got.
	kill := func() time.Duration {
		t.Helper()
		var victim *fakeWorker
		for _, w := range f.all() {
			if w.slot == 1 && !w.isEnded() {
				victim = w
			}
		}
		n := len(f.all())
		victim.crash()
		waitUntil(t, "slot 1 was restarted", func() bool { return len(f.all()) == n+1 })
		var d time.Duration
		onLoop(s, func() { d = s.backoff[1].delay })
		return d
	}
	var got []time.Duration
	for _, gap := range []time.Duration{0, time.Second, time.Second} {
		advance(gap)
		got = append(got, kill())
	}
	// A reload every 20 s, and a death 40 s after the last one: the dying
	// process is 20 s old, but the slot has been well for 40 s.
	for range 2 {
		advance(20 * time.Second)
		n := len(f.all())
		sigs <- syscall.SIGHUP
		// Until the old generation is gone the new one is not yet the
		// current one, whose workers are restarted.
		waitUntil(t, "the reload", func() bool { return len(f.all()) == n+2 && len(s.Pids()) == 2 })
	}
	got = append(got, kill())
	advance(5 * time.Second)
	got = append(got, kill())
	want := []time.Duration{0, backoffFirst, 2 * backoffFirst, 0, backoffFirst}
	if !slices.Equal(got, want) {
		t.Errorf("restart delays %v, want %v", got, want)
	}
}

// restartDelay doubles up to its bound.
func TestRestartDelayBound(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	d := restartDelay(slotFailure{}, false, now)
	var seen []time.Duration
	for range 10 {
		now = now.Add(time.Second)
		d = restartDelay(slotFailure{at: now.Add(-time.Second), delay: d}, true, now)
		seen = append(seen, d)
	}
	if seen[0] != backoffFirst || seen[len(seen)-1] != backoffMax {
		t.Errorf("delays %v: want %v first and %v at the end", seen, backoffFirst, backoffMax)
	}
	if d := restartDelay(slotFailure{at: now, delay: backoffMax}, true, now.Add(backoffReset+time.Second)); d != 0 {
		t.Errorf("a death %v after the last one waits %v, want 0", backoffReset+time.Second, d)
	}
}

// A socket being retired whose old worker dies is closed at once: what is
// queued on it has nobody to wait for.
func TestSupervisorRetiringSocketWithoutWorkerCloses(t *testing.T) {
	f := &fakeSpawner{}
	workers := 2
	s, sigs, _ := startSupervisor(t, f, 2, func(int) (int, error) { return workers, nil })
	socks := s.Sockets.(*fakeSockets)
	old := f.all()
	workers = 1
	sigs <- syscall.SIGHUP
	waitUntil(t, "the 2→1 reload", func() bool { return slices.Equal(socks.served(), []int{40}) })
	socks.setQueued(41, 3)
	start := time.Now()
	old[1].crash()
	waitUntil(t, "socket 41 was closed", func() bool { return slices.Equal(socks.closedList(), []int{41}) })
	if waited := time.Since(start); waited >= retireGrace {
		t.Errorf("socket 41 was closed %v after its worker died, want at once", waited)
	}
}

// reloadOutcomes records what OnReload is told, and sets a short retry
// delay.
type reloadOutcomes struct {
	mu   sync.Mutex
	errs []error
}

func (r *reloadOutcomes) setup(s *Supervisor) {
	s.retryDelay = 20 * time.Millisecond
	s.OnReload = func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.errs = append(r.errs, err)
	}
}

func (r *reloadOutcomes) get() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// killNewWorkers kills with SIGKILL, before they serve, the workers that
// the spawner starts from now on, until it is told to stop.
func killNewWorkers(t *testing.T, f *fakeSpawner) (stop func()) {
	f.set(func(f *fakeSpawner) { f.notReady = true })
	seen := len(f.all())
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			ws := f.all()
			for _, w := range ws[seen:] {
				w.Signal(syscall.SIGKILL)
			}
			seen = len(ws)
		}
	}()
	return func() {
		close(done)
		<-stopped
		f.set(func(f *fakeSpawner) { f.notReady = false })
	}
}

// A reload whose new worker is killed before it serves (a kill -9 in the
// same second as the SIGHUP) is tried again, and the configuration then
// loaded serves; OnReload hears of the reload once, when it succeeded.
func TestSupervisorRetriesReloadAfterKilledWorker(t *testing.T) {
	f := &fakeSpawner{}
	var outcomes reloadOutcomes
	reads := 0
	var readsMu sync.Mutex
	reload := func(int) (int, error) {
		readsMu.Lock()
		defer readsMu.Unlock()
		reads++
		return 2, nil
	}
	// Time enough for the test to stop the killing before the retry.
	s, sigs, _ := startSupervisor(t, f, 2, reload, outcomes.setup, func(s *Supervisor) { s.retryDelay = 200 * time.Millisecond })
	old := f.all()
	stop := killNewWorkers(t, f)
	sigs <- syscall.SIGHUP
	waitUntil(t, "a new worker was killed", func() bool { return len(f.all()) >= 3 && f.all()[2].isEnded() })
	stop()
	waitUntil(t, "the retried reload succeeded", func() bool { return len(outcomes.get()) > 0 })
	if errs := outcomes.get(); len(errs) != 1 || errs[0] != nil {
		t.Fatalf("OnReload was told %v, want one success", errs)
	}
	readsMu.Lock()
	if reads < 2 {
		t.Errorf("the configuration was read %d times, want once for each attempt", reads)
	}
	readsMu.Unlock()
	waitUntil(t, "the old generation was replaced", func() bool { return old[0].isEnded() && old[1].isEnded() })
	for _, w := range old {
		if got := w.got(); !slices.Equal(got, []os.Signal{ReplaceSignal}) {
			t.Errorf("old worker %d got %v, want one ReplaceSignal", w.slot, got)
		}
	}
	if pids := s.Pids(); len(pids) != 2 {
		t.Errorf("%d workers run after the reload, want 2", len(pids))
	}
}

// The retries are bounded: a reload whose new workers are killed every
// time is given up after reloadRetries more attempts, the old workers
// serving on.
func TestSupervisorReloadRetriesAreBounded(t *testing.T) {
	f := &fakeSpawner{}
	var outcomes reloadOutcomes
	_, sigs, _ := startSupervisor(t, f, 2, sameN(2), outcomes.setup)
	old := f.all()
	stop := killNewWorkers(t, f)
	defer stop()
	sigs <- syscall.SIGHUP
	waitUntil(t, "the reload was given up", func() bool { return len(outcomes.get()) > 0 })
	if errs := outcomes.get(); len(errs) != 1 || !errors.Is(errs[0], errKilledStarting) {
		t.Fatalf("OnReload was told %v, want one failure of a killed worker", errs)
	}
	if n, want := len(f.all()), 2+2*(1+reloadRetries); n != want {
		t.Errorf("%d workers were started, want %d: the first attempt and %d retries of 2", n, want, reloadRetries)
	}
	for _, w := range old {
		if len(w.got()) != 0 || w.isEnded() {
			t.Errorf("running worker %d was signalled %v after a failed reload", w.slot, w.got())
		}
	}
}

// A reload that fails on the configuration is not retried.
func TestSupervisorReloadErrorIsNotRetried(t *testing.T) {
	f := &fakeSpawner{}
	var outcomes reloadOutcomes
	var reads atomic.Int32
	_, sigs, _ := startSupervisor(t, f, 2, func(int) (int, error) {
		reads.Add(1)
		return 0, errors.New("bad config")
	}, outcomes.setup)
	sigs <- syscall.SIGHUP
	waitUntil(t, "the reload failed", func() bool { return len(outcomes.get()) > 0 })
	time.Sleep(100 * time.Millisecond) // five retry delays
	if n := reads.Load(); n != 1 || len(outcomes.get()) != 1 {
		t.Errorf("the configuration was read %d times and OnReload told %v, want once", n, outcomes.get())
	}
}

// A SIGHUP while a retry waits replaces it: the retry does not run as
// well, and the newer SIGHUP's reload is the one told.
func TestSupervisorNewerSIGHUPReplacesRetry(t *testing.T) {
	f := &fakeSpawner{}
	var outcomes reloadOutcomes
	s, sigs, _ := startSupervisor(t, f, 2, sameN(2), outcomes.setup, func(s *Supervisor) { s.retryDelay = time.Hour })
	stop := killNewWorkers(t, f)
	sigs <- syscall.SIGHUP
	waitUntil(t, "a retry waits", func() bool {
		var waiting bool
		onLoop(s, func() { waiting = s.retry != nil })
		return waiting
	})
	stop()
	sigs <- syscall.SIGHUP
	waitUntil(t, "the newer SIGHUP's reload succeeded", func() bool { return len(outcomes.get()) > 0 })
	var pending *reloadRetry
	onLoop(s, func() { pending = s.retry })
	if errs := outcomes.get(); len(errs) != 1 || errs[0] != nil || pending != nil {
		t.Errorf("OnReload was told %v, a retry pending: %v; want one success and none pending", errs, pending != nil)
	}
}
