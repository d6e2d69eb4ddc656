package tests

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Spreading connections over workers (issue 36): while the first worker
// keeps up, every new connection goes to it; once it does not (here: it
// is stopped and its queue builds), the others take connections too.
// Which worker serves a connection is read from the system: the worker
// whose descriptors hold the server's end of it.

// spreadFirstWorker is the pid of the daemon's worker of slot 0 in
// generation gen (the first is 1, each reload one more), from the
// supervisor's log.
func spreadFirstWorker(t *testing.T, d *lcDaemon, gen int) int {
	t.Helper()
	re := regexp.MustCompile(fmt.Sprintf(`started worker 0 \(generation %d\) pid (\d+)`, gen))
	var pid int
	waitFor(10*time.Second, func() bool {
		if m := re.FindStringSubmatch(d.Stderr()); m != nil {
			pid, _ = strconv.Atoi(m[1])
		}
		return pid > 0
	})
	if pid == 0 {
		t.Fatalf("no worker 0 in the log:\n%s", d.Stderr())
	}
	return pid
}

// spreadStart runs a daemon of two workers (nsca_workers_spread at its
// default) writing to the command file cmd, and returns its workers and
// the first of them.
func spreadStart(t *testing.T) (d *lcDaemon, cmd string, workers []int, first int) {
	t.Helper()
	cmd = commandFile(t, t.TempDir())
	d = lcStart(t, lcCfg(cmd, lcWorkers(2)), daemonOpts{})
	workers = d.waitWorkers(2, 30*time.Second)
	return d, cmd, workers, spreadFirstWorker(t, d, 1)
}

// spreadOwner is which of pids holds the daemon's end of the loopback
// connection from clientPort to serverPort, or 0.
func spreadOwner(serverPort, clientPort int, pids []int) int {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0
	}
	local := fmt.Sprintf("0100007F:%04X", serverPort)
	remote := fmt.Sprintf("0100007F:%04X", clientPort)
	var inode string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[2] == remote {
			inode = f[9]
		}
	}
	if inode == "" || inode == "0" {
		return 0
	}
	want := "socket:[" + inode + "]"
	for _, pid := range pids {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l == want {
				return pid
			}
		}
	}
	return 0
}

// spreadDialOwner connects, reads the init packet (so a worker accepted
// it) and returns the connection and the worker holding it.
func spreadDialOwner(t *testing.T, port int, workers []int, timeout time.Duration) (*rawConn, int) {
	t.Helper()
	r, err := dialInit(port, "", timeout)
	if err != nil {
		return nil, 0
	}
	clientPort := r.c.LocalAddr().(*net.TCPAddr).Port
	owner := 0
	waitFor(2*time.Second, func() bool {
		owner = spreadOwner(port, clientPort, workers)
		return owner != 0
	})
	return r, owner
}

// TestWorkersTrickleGoesToTheFirst: checks trickling in, one connection
// each, are all served by the first worker, and all arrive. Spread at
// random over two workers, twenty connections would all land on one with
// a chance of one in half a million.
func TestWorkersTrickleGoesToTheFirst(t *testing.T) {
	t.Parallel()
	d, cmd, workers, first := spreadStart(t)
	owners, want := spreadTrickle(t, d.Port, workers, "trickle")
	t.Logf("workers %v, the first %d; connections by worker: %v", workers, first, owners)
	if owners[first] != len(want) {
		t.Errorf("of %d trickling connections the first worker (%d) served %d; by worker: %v", len(want), first, owners[first], owners)
	}
	waitFileLines(t, cmd, len(want))
	lcAssertOnce(t, lcOutput(t, cmd), want)
}

// spreadTrickle sends 20 checks, one connection each, 20 ms apart, and
// returns how many connections each of workers served and the command
// file lines the checks make.
func spreadTrickle(t *testing.T, port int, workers []int, host string) (owners map[int]int, want []string) {
	t.Helper()
	owners = map[int]int{}
	for i := range 20 {
		r, owner := spreadDialOwner(t, port, workers, 5*time.Second)
		if r == nil {
			t.Fatalf("connection %d: no init packet", i)
		}
		owners[owner]++
		c := rawCheck{0, host, fmt.Sprintf("svc-%d", i), "ok"}
		r.write(t, r.packets(lcPassword, []rawCheck{c}), 0)
		r.c.Close()
		want = append(want, c.line())
		time.Sleep(20 * time.Millisecond)
	}
	return owners, want
}

// TestWorkersSpreadFollowsReload: with nsca_workers_spread=always a
// trickle goes to both workers; a SIGHUP to load has the new generation's
// first worker take all of it.
func TestWorkersSpreadFollowsReload(t *testing.T) {
	t.Parallel()
	cmd := commandFile(t, t.TempDir())
	cfg := lcCfg(cmd, merge(lcWorkers(2), Config{"nsca_workers_spread": "always"}))
	d := lcStart(t, cfg, daemonOpts{})
	old := d.waitWorkers(2, 30*time.Second)
	owners, want := spreadTrickle(t, d.Port, old, "always")
	t.Logf("always: workers %v; connections by worker: %v", old, owners)
	if len(owners) < 2 {
		t.Errorf("with nsca_workers_spread=always, all %d trickling connections went to one worker: %v", len(want), owners)
	}
	d.rewriteConfig(merge(cfg, Config{"nsca_workers_spread": "load"}))
	d.Signal(syscall.SIGHUP)
	d.waitLog(regexp.MustCompile(`SIGHUP: configuration reloaded`), 20*time.Second)
	workers := d.waitWorkers(2, 30*time.Second, old...)
	first := spreadFirstWorker(t, d, 2)
	owners, more := spreadTrickle(t, d.Port, workers, "load")
	t.Logf("load after SIGHUP: workers %v, the first %d; connections by worker: %v", workers, first, owners)
	if owners[first] != len(more) {
		t.Errorf("after a SIGHUP to nsca_workers_spread=load, the first worker (%d) served %d of %d trickling connections; by worker: %v", first, owners[first], len(more), owners)
	}
	want = append(want, more...)
	waitFileLines(t, cmd, len(want))
	lcAssertOnce(t, lcOutput(t, cmd), want)
}

// TestWorkersSpreadWhenTheFirstIsStuck: with the first worker stopped
// (SIGSTOP: a worker stuck on something), connections queue on its
// socket until the supervisor sees the queue and has the kernel spread
// new ones: the other worker serves them while the first is still
// stopped. Once it runs again, every connection is served and every check
// arrives.
func TestWorkersSpreadWhenTheFirstIsStuck(t *testing.T) {
	t.Parallel()
	d, cmd, workers, first := spreadStart(t)
	if err := syscall.Kill(first, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(first, syscall.SIGCONT)
		}
	}()
	// Clients keep coming, one every 10 ms, until the other worker has
	// served some (the queue passed 16 and the supervisor, which looks
	// every 200 ms, spread them) or 5 s have passed.
	var (
		mu     sync.Mutex
		owners = map[int]int{}
		served sync.WaitGroup
		want   []string
	)
	other := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for pid, k := range owners {
			if pid != first && pid != 0 {
				n += k
			}
		}
		return n
	}
	for i, end := 0, time.Now().Add(5*time.Second); other() == 0 && time.Now().Before(end); i++ {
		c := rawCheck{1, "stuck", fmt.Sprintf("svc-%d", i), "warn"}
		want = append(want, c.line())
		served.Add(1)
		go func() {
			defer served.Done()
			r, owner := spreadDialOwner(t, d.Port, workers, 20*time.Second)
			if r == nil {
				return
			}
			defer r.c.Close()
			mu.Lock()
			owners[owner]++
			mu.Unlock()
			r.c.Write(r.packets(lcPassword, []rawCheck{c}))
		}()
		time.Sleep(10 * time.Millisecond)
	}
	servedByOther := other()
	syscall.Kill(first, syscall.SIGCONT)
	stopped = false
	served.Wait()
	t.Logf("workers %v, the first %d stopped; connections by worker: %v", workers, first, owners)
	if servedByOther == 0 {
		t.Errorf("with the first worker stopped, no other worker served any of %d connections within 5 s", len(want))
	}
	if owners[0] > 0 {
		t.Errorf("%d connections had no owner among the workers %v", owners[0], workers)
	}
	waitFileLines(t, cmd, len(want))
	lcAssertOnce(t, lcOutput(t, cmd), want)
}
