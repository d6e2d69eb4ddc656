package proc

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/conf"
)

func TestResolveIdentity(t *testing.T) {
	id, err := ResolveIdentity("", "")
	if err != nil || id.Set {
		t.Fatalf("empty user and group: %+v, %v; want no change", id, err)
	}
	id, err = ResolveIdentity("nobody", "")
	if err != nil {
		t.Fatal(err)
	}
	if !id.Set || id.UID != 65534 {
		t.Errorf("nobody: %+v; want uid 65534", id)
	}
	id, err = ResolveIdentity("1234", "4321")
	if err != nil || id.UID != 1234 || id.GID != 4321 {
		t.Errorf("numeric ids: %+v, %v", id, err)
	}
	if _, err := ResolveIdentity("no-such-user-nsca", ""); !errors.Is(err, ErrPrivileges) || !strings.Contains(err.Error(), "no-such-user-nsca") {
		t.Errorf("missing user: %v; want ErrPrivileges naming the user", err)
	}
	if _, err := ResolveIdentity("", "no-such-group-nsca"); !errors.Is(err, ErrPrivileges) || !strings.Contains(err.Error(), "nsca_group") {
		t.Errorf("missing group: %v; want ErrPrivileges naming nsca_group", err)
	}
}

func TestPidFileRefusesSecondHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nsca.pid")
	p, err := AcquirePidFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("pid file holds %q, want our pid", b)
	}
	if _, err := AcquirePidFile(path); !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Errorf("second acquire: %v; want ErrRunning naming pid %d", err, os.Getpid())
	}
	p.Remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("pid file still there after Remove: %v", err)
	}
	// A stale file without a lock (a crashed daemon) is taken over.
	os.WriteFile(path, []byte("999999\n"), 0o644)
	p, err = AcquirePidFile(path)
	if err != nil {
		t.Fatalf("stale pid file: %v", err)
	}
	p.Remove()
}

func TestActivatedListeners(t *testing.T) {
	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()+1))
	t.Setenv("LISTEN_FDS", "2")
	if fds := ActivatedListeners(); fds != nil {
		t.Errorf("LISTEN_PID of another process: %v; want none", fds)
	}
	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	t.Setenv("LISTEN_FDS", "2")
	fds := ActivatedListeners()
	if len(fds) != 2 || fds[0] != 3 || fds[1] != 4 {
		t.Errorf("got %v, want [3 4]", fds)
	}
	if os.Getenv("LISTEN_FDS") != "" {
		t.Error("LISTEN_FDS left in the environment for children")
	}
}

func TestNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	if err := Notify("READY=1"); err != nil {
		t.Fatal(err)
	}
	if err := Notify(Reloading()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _, err := conn.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("first message %q, %v", buf[:n], err)
	}
	n, _, err = conn.ReadFrom(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "RELOADING=1\nMONOTONIC_USEC=") {
		t.Fatalf("second message %q, %v", buf[:n], err)
	}
	t.Setenv("NOTIFY_SOCKET", "")
	if err := Notify("READY=1"); err != nil {
		t.Errorf("without NOTIFY_SOCKET: %v; want nothing done", err)
	}
}

// TestSetProcs: a process runs Go code on at most its share of the CPUs,
// plus a P for each goroutine that spends its time in C calls, up to one
// per CPU (the governor's ceiling; it starts at one P and lowers to a
// lower ceiling at once); GOMAXPROCS in the environment wins.
func TestSetProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	inC := 0
	a := &App{CgoGoroutines: func(*conf.Config) int { return inC }}
	t.Setenv("GOMAXPROCS", "")
	for _, c := range []struct{ workers, inC int }{{0, 0}, {0, 1}, {2, 1}, {4 * runtime.NumCPU(), 1}, {0, 1000}} {
		inC = c.inC
		cfg := &conf.Config{Workers: c.workers}
		a.setProcs(cfg)
		want := cfg.CPUShare() + min(c.inC, runtime.NumCPU())
		governor.mu.Lock()
		g := governor.g
		governor.mu.Unlock()
		g.mu.Lock()
		ceiling := g.ceiling
		g.mu.Unlock()
		if got := runtime.GOMAXPROCS(0); ceiling != want || got > want {
			t.Errorf("nsca_workers=%d, %d in C calls: GOMAXPROCS %d, ceiling %d, want a ceiling of %d", c.workers, c.inC, got, ceiling, want)
		}
	}
	runtime.GOMAXPROCS(1)
	t.Setenv("GOMAXPROCS", "1")
	a.setProcs(&conf.Config{})
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("with GOMAXPROCS=1 in the environment: %d", got)
	}
}

// TestSetGCPercent: the GC target is ours unless GOGC in the environment
// set one.
func TestSetGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	setGCPercent(workerGCPercent)
	if got := debug.SetGCPercent(100); got != workerGCPercent {
		t.Errorf("GC percent %d, want %d", got, workerGCPercent)
	}
	t.Setenv("GOGC", "100")
	setGCPercent(supervisorGCPercent)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC=100 in the environment: GC percent %d", got)
	}
}

// CheckPortFree fails on a port that SO_REUSEPORT sockets listen on,
// which another SO_REUSEPORT socket could share, with the message binding
// there without SO_REUSEPORT gives.
func TestCheckPortFree(t *testing.T) {
	fd, err := Listen("127.0.0.1", 0, true)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*unix.SockaddrInet4).Port
	_, single := Listen("127.0.0.1", port, false)
	err = CheckPortFree("127.0.0.1", port)
	if !errors.Is(err, unix.EADDRINUSE) || single == nil || err.Error() != single.Error() {
		t.Errorf("CheckPortFree on a served port: %v; want %v", err, single)
	}
	unix.Close(fd)
	if err := CheckPortFree("127.0.0.1", port); err != nil {
		t.Errorf("CheckPortFree on a free port: %v", err)
	}
}

// lockPort makes a second start on the same port wait until the first has
// bound its sockets.
func TestLockPort(t *testing.T) {
	unlock := lockPort(1)
	got := make(chan func())
	go func() { got <- lockPort(1) }()
	select {
	case <-got:
		t.Fatal("a second lockPort of the same port did not wait")
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case unlock2 := <-got:
		unlock2()
	case <-time.After(time.Second):
		t.Fatal("the second lockPort did not get the lock once it was released")
	}
}

// The kernel does what the supervisor's retiring of sockets relies on:
// Steer sends every new connection to the first n sockets of the group,
// Queued counts what waits on each, and closing the last sockets keeps
// the others in their places, so that sockets opened later are steered
// to in the order they were opened.
func TestPortSocketsSteer(t *testing.T) {
	first, err := Listen("127.0.0.1", 0, true)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(first)
	if err != nil {
		t.Fatal(err)
	}
	ps := PortSockets{Address: "127.0.0.1", Port: sa.(*unix.SockaddrInet4).Port}
	fds := []int{first}
	for range 2 {
		fd, err := ps.Open()
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	dial := func(n int) {
		t.Helper()
		for range n {
			c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ps.Port)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
		}
	}
	queued := func() []int {
		var q []int
		for _, fd := range fds {
			q = append(q, ps.Queued(fd))
		}
		return q
	}
	if err := ps.Steer(first, 1); err != nil {
		t.Fatal(err)
	}
	dial(30)
	if q := queued(); q[0] != 30 || q[1] != 0 || q[2] != 0 {
		t.Fatalf("steered to the first socket, the queues hold %v; want [30 0 0]", q)
	}
	// The last two go, two new ones come: steered to the first two, the
	// group is the first and the first new one.
	ps.Close(fds[2])
	ps.Close(fds[1])
	fds = fds[:1]
	for range 2 {
		fd, err := ps.Open()
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
	}
	if err := ps.Steer(first, 2); err != nil {
		t.Fatal(err)
	}
	dial(60)
	if q := queued(); q[1] == 0 || q[2] != 0 || q[0]+q[1] != 90 {
		t.Errorf("steered to two of three, the queues hold %v; want 90 on the first two, some on the second, none on the third", q)
	}
}
