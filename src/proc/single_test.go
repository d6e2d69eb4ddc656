package proc

import (
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"nsca_fast/conf"
	"nsca_fast/stages/counters"
)

// fakeServer is a pipeline whose Run ends when the test says its drain is
// over (or at once on Shutdown, when drainsAtOnce).
type fakeServer struct {
	id           int
	drainsAtOnce bool
	mu           sync.Mutex
	shutdown     int
	aborted      int
	done         chan struct{}
	once         sync.Once
	received     uint64
}

func (f *fakeServer) Run() error { <-f.done; return nil }
func (f *fakeServer) end()       { f.once.Do(func() { close(f.done) }) }
func (f *fakeServer) Shutdown() {
	f.mu.Lock()
	f.shutdown++
	f.mu.Unlock()
	if f.drainsAtOnce {
		f.end()
	}
}
func (f *fakeServer) Abort() {
	f.mu.Lock()
	f.aborted++
	f.mu.Unlock()
	f.end()
}
func (f *fakeServer) Snapshot() counters.Snapshot       { return counters.Snapshot{Received: f.received} }
func (f *fakeServer) SnapshotInto(s *counters.Snapshot) { *s = f.Snapshot() }
func (f *fakeServer) calls() (shutdown, aborted int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shutdown, f.aborted
}

func newSingle(t *testing.T, drainsAtOnce bool) (*single, *[]*fakeServer, *sync.Mutex) {
	var mu sync.Mutex
	servers := &[]*fakeServer{}
	newServer := func() *fakeServer {
		mu.Lock()
		defer mu.Unlock()
		f := &fakeServer{id: len(*servers), drainsAtOnce: drainsAtOnce, done: make(chan struct{}), received: 10}
		*servers = append(*servers, f)
		return f
	}
	app := &App{
		Load: func() (*conf.Config, error) { return conf.Default(), nil },
		New:  func(*conf.Config, []int) (Server, error) { return newServer(), nil },
	}
	s := &single{app: app, listeners: []int{3}}
	s.start(newServer())
	return s, servers, &mu
}

// SIGHUP starts a new server and drains the old; the counters of both
// carry on in the totals, each server's own stay apart.
func TestSingleReload(t *testing.T) {
	s, servers, mu := newSingle(t, true)
	sigs := make(chan os.Signal, 4)
	served := make(chan struct{})
	go func() { s.serve(sigs); close(served) }()
	sigs <- syscall.SIGHUP
	waitUntil(t, "a second server", func() bool { mu.Lock(); defer mu.Unlock(); return len(*servers) == 2 })
	first := (*servers)[0]
	waitUntil(t, "the first server drained", func() bool { sd, _ := first.calls(); return sd == 1 })
	if sd, _ := (*servers)[1].calls(); sd != 0 {
		t.Errorf("the new server was shut down %d times", sd)
	}
	waitUntil(t, "the totals carry both servers", func() bool { return s.totals.Sum().Received == 20 })
	sigs <- syscall.SIGTERM
	<-served
	if sd, ab := (*servers)[1].calls(); sd != 1 || ab != 0 {
		t.Errorf("after SIGTERM the server saw %d shutdowns, %d aborts; want 1, 0", sd, ab)
	}
}

// The first SIGTERM drains; a second aborts the drain; SIGHUP during the
// drain is ignored.
func TestSingleSecondSignalAborts(t *testing.T) {
	s, servers, _ := newSingle(t, false)
	sigs := make(chan os.Signal, 4)
	served := make(chan struct{})
	go func() { s.serve(sigs); close(served) }()
	sigs <- syscall.SIGTERM
	srv := (*servers)[0]
	waitUntil(t, "the drain started", func() bool { sd, _ := srv.calls(); return sd == 1 })
	sigs <- syscall.SIGHUP
	select {
	case <-served:
		t.Fatal("serve returned before the drain ended")
	case <-time.After(50 * time.Millisecond):
	}
	sigs <- syscall.SIGINT
	<-served
	if sd, ab := srv.calls(); sd != 1 || ab != 1 || len(*servers) != 1 {
		t.Errorf("shutdowns %d, aborts %d, servers %d; want 1, 1, 1", sd, ab, len(*servers))
	}
}
