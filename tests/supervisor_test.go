package tests

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// supFDs counts the open descriptors of pid.
func supFDs(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("descriptors of %d: %v", pid, err)
	}
	return len(entries)
}

// supSettledFDs is the supervisor's descriptor count once it has exactly n
// workers and the count holds still for a moment (status pipes of exited
// workers close a little after the exit).
func supSettledFDs(t *testing.T, d *lcDaemon, n int) int {
	t.Helper()
	d.waitWorkers(n, 30*time.Second)
	last, same := -1, 0
	waitFor(10*time.Second, func() bool {
		cur := supFDs(t, d.Pid())
		if cur == last {
			same++
		} else {
			last, same = cur, 0
		}
		return same >= 5
	})
	return last
}

// supBadLog are log lines that mean a worker lost its socket or died.
var supBadLog = regexp.MustCompile(`non-socket|bad file descriptor|died|exited during start-up|keeping the running`)

// supBurstReport splits a burst's connections into refused ones and the
// lines of those fully sent.
func supBurstReport(conns []*lcConn) (refused []string, notFull int, want []string) {
	for _, c := range conns {
		switch r := c.res; {
		case r.dialErr != nil || r.initErr != nil:
			refused = append(refused, fmt.Sprintf("client %d conn %d: connect %v, init %v", c.client, c.seq, r.dialErr, r.initErr))
		case !r.full:
			notFull++
		default:
			want = append(want, lcLines(c.checks)...)
		}
	}
	return refused, notFull, want
}

// TestSupervisorReloadStorm: 25 SIGHUPs 200 ms apart to a supervisor with
// two workers while clients send, with the daemon collecting garbage all
// the time (GOGC=1, see lifecycleGOGC): no connection is refused or cut,
// every check arrives exactly once, and afterwards the same two workers'
// worth of processes and the same number of descriptors remain. The
// listening sockets once lived in *os.File wrappers whose finalizers
// closed them in the supervisor after a GC; every later worker then got a
// descriptor that was no socket.
func TestSupervisorReloadStorm(t *testing.T) {
	t.Parallel()
	cmd := commandFile(t, t.TempDir())
	d := lcStart(t, lcCfg(cmd, lcWorkers(2)), daemonOpts{})
	fdsBefore := supSettledFDs(t, d, 2)
	b := lcStartBurst(d.Port, 6, 5, lcPassword, "storm")
	b.waitGoing(t, 20)
	const hups = 25
	for range hups {
		d.workers()
		d.Signal(syscall.SIGHUP)
		time.Sleep(200 * time.Millisecond)
	}
	reloaded := regexp.MustCompile(`SIGHUP: configuration reloaded`)
	// Signals sent while a reload is under way may be merged by the kernel.
	waitLines(d.Stderr, reloaded, hups/2, 20*time.Second)
	time.Sleep(time.Second)
	conns := b.finish()
	fdsAfter := supSettledFDs(t, d, 2)
	after := lcSendAll(t, d.Port, lcPassword, "after", 10, 3)

	refused, notFull, want := supBurstReport(conns)
	want = append(want, after...)
	waitFileLines(t, cmd, len(want))
	t.Logf("%d reloads logged for %d SIGHUPs; %d connections (%d checks) during the storm, %d refused, %d not fully sent; descriptors %d before, %d after",
		len(grepLines(d.Stderr(), reloaded)), hups, len(conns), len(want)-len(after), len(refused), notFull, fdsBefore, fdsAfter)
	if n := len(grepLines(d.Stderr(), reloaded)); n < hups/2 {
		t.Errorf("only %d reloads were logged for %d SIGHUPs", n, hups)
	}
	if len(refused) > 0 {
		t.Errorf("%d connections refused during the storm, e.g. %q", len(refused), refused[:min(3, len(refused))])
	}
	if notFull > 0 {
		t.Errorf("%d connections were cut before the server read everything", notFull)
	}
	lcAssertOnce(t, lcOutput(t, cmd), want)
	if fdsAfter != fdsBefore {
		t.Errorf("the supervisor holds %d descriptors after the storm, %d before", fdsAfter, fdsBefore)
	}
	if bad := grepLines(d.Stderr(), supBadLog); len(bad) > 0 {
		t.Errorf("%d log lines of lost sockets or dead workers, e.g. %q", len(bad), bad[:min(3, len(bad))])
	}
	d.stop()
}

// TestSupervisorKillStorm: a worker killed with SIGKILL every 300 ms, ten
// times, while clients send. What a killed worker had accepted may be lost
// (it was in its memory), but no connection is refused at connect, no
// check arrives twice, the supervisor ends with two workers serving and
// the same descriptors, and a batch sent afterwards arrives in full.
func TestSupervisorKillStorm(t *testing.T) {
	t.Parallel()
	cmd := commandFile(t, t.TempDir())
	d := lcStart(t, lcCfg(cmd, lcWorkers(2)), daemonOpts{})
	fdsBefore := supSettledFDs(t, d, 2)
	began := time.Now()
	b := lcStartBurst(d.Port, 6, 5, lcPassword, "kill")
	b.waitGoing(t, 20)
	killed := 0
	for i := range 10 {
		// Each kill takes a live worker: the supervisor restarts a slot
		// with growing back-off, so wait for both.
		kids := d.waitWorkers(2, 10*time.Second)
		if syscall.Kill(kids[i%len(kids)], syscall.SIGKILL) == nil {
			killed++
		}
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	conns := b.finish()
	storm := time.Since(began)
	fdsAfter := supSettledFDs(t, d, 2)
	after := lcSendAll(t, d.Port, lcPassword, "after", 10, 3)
	waitFileLines(t, cmd, len(after))

	var dialErrs []string
	sent := map[string]bool{}
	for _, c := range conns {
		if c.res.dialErr != nil {
			dialErrs = append(dialErrs, c.res.dialErr.Error())
		}
		for _, l := range lcLines(c.checks) {
			sent[l] = true
		}
	}
	counts := lcOutput(t, cmd)
	var dups, unknown int
	for l, n := range counts {
		if n > 1 {
			dups++
		}
		if !sent[l] && !strings.Contains(l, "after-") {
			unknown++
		}
	}
	t.Logf("%d workers killed; %d connections during the storm, %d connect errors; %d lines in the command file; descriptors %d before, %d after",
		killed, len(conns), len(dialErrs), len(counts), fdsBefore, fdsAfter)
	if killed < 10 {
		t.Errorf("only %d of 10 kills found a worker", killed)
	}
	if len(dialErrs) > 0 {
		t.Errorf("%d connections refused at connect: the listening sockets must outlive the workers, e.g. %q", len(dialErrs), dialErrs[:min(3, len(dialErrs))])
	}
	if dups > 0 || unknown > 0 {
		t.Errorf("%d lines written twice, %d lines nobody sent", dups, unknown)
	}
	lcAssertOnce(t, counts, after)
	if fdsAfter != fdsBefore {
		t.Errorf("the supervisor holds %d descriptors after the storm, %d before", fdsAfter, fdsBefore)
	}
	if bad := grepLines(d.Stderr(), regexp.MustCompile(`non-socket|bad file descriptor`)); len(bad) > 0 {
		t.Errorf("workers lost their socket: %q", bad[:min(3, len(bad))])
	}
	d.stop()
	// A worker keeps its counters on the board, which the supervisor
	// still reads after the worker was killed: nothing a killed worker
	// delivered is missing from the totals but the batch it was writing
	// when the kill landed, written and not yet counted. The window is the
	// sink's write, microseconds: no count went missing in most runs, and
	// 5 in one CI run where a kill fell inside a write. A batch holds what
	// queued while the last one was written; the bound allows each kill a
	// batch of two milliseconds' results, far below what a report a
	// second (1,000 milliseconds' worth a kill) would lose.
	st := statsLines(d.Stderr(), "stopped")
	if len(st) == 0 {
		t.Fatalf("no final statistics line from the supervisor")
	}
	emitted := int(sum(st[len(st)-1].emitted))
	perWorkerMs := float64(len(counts)-len(after)) / storm.Seconds() / 2 / 1000
	missing := len(counts) - emitted
	t.Logf("supervisor's final count: %d emitted, %d lines in the command file: %d missing after %d kills, a worker delivering %.2f results a millisecond",
		emitted, len(counts), missing, killed, perWorkerMs)
	bound := killed * max(1, int(math.Ceil(2*perWorkerMs)))
	if emitted > len(counts) || missing > bound {
		t.Errorf("the supervisor counts %d emitted for %d lines in the command file after %d kills: want at most %d missing", emitted, len(counts), killed, bound)
	}
}

// supSlowClient sends checks over one connection, each 4304-byte packet in
// pieces of 400 bytes 40 ms apart, so that it is in the middle of a packet
// most of the time. It reports whether the server read everything.
func supSlowClient(port int, checks []rawCheck, started *sync.WaitGroup) lcConnResult {
	var r lcConnResult
	c, err := dialLocal(port, "", 2*time.Second)
	if err != nil {
		started.Done()
		r.dialErr = err
		return r
	}
	defer c.Close()
	rc, err := readInit(c, 5*time.Second)
	started.Done()
	if err != nil {
		r.initErr = err
		return r
	}
	data := rc.packets(lcPassword, checks)
	for len(data) > 0 {
		n := min(400, len(data))
		if _, err := c.Write(data[:n]); err != nil {
			r.err = err
			return r
		}
		data = data[n:]
		time.Sleep(40 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n == 0 && err != nil && !strings.Contains(err.Error(), "EOF") {
		r.err = err
		return r
	}
	r.full = true
	return r
}

// supStopWithSlowClients starts a supervisor with two workers, has four
// slow clients in the middle of their packets, signals the supervisor and
// asserts that every check of theirs arrives and the workers end.
func supStopWithSlowClients(t *testing.T, sig syscall.Signal) {
	cmd := commandFile(t, t.TempDir())
	d := lcStart(t, lcCfg(cmd, merge(lcWorkers(2), Config{"connection_timeout": "20"})), daemonOpts{})
	workers := d.waitWorkers(2, startTimeout)
	const clients, perConn = 4, 8
	var started, done sync.WaitGroup
	results := make([]lcConnResult, clients)
	var want []string
	for i := range clients {
		checks := lcChecks("slow", i, 0, perConn)
		want = append(want, lcLines(checks)...)
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			results[i] = supSlowClient(d.Port, checks, &started)
		}()
	}
	started.Wait()
	time.Sleep(700 * time.Millisecond) // every client is a few packets in
	d.Signal(sig)
	done.Wait()
	for i, r := range results {
		if !r.full {
			t.Errorf("slow client %d was not served to the end: connect %v, init %v, then %v", i, r.dialErr, r.initErr, r.err)
		}
	}
	if left := waitGone(workers, 25*time.Second); len(left) > 0 {
		t.Errorf("workers %v still run 25 s after the supervisor got signal %d", left, sig)
	}
	waitFileLines(t, cmd, len(want))
	counts := lcOutput(t, cmd)
	lcAssertOnce(t, counts, want)
	t.Logf("signal %d to the supervisor with %d slow clients mid-packet: %d of %d checks delivered", sig, clients, len(counts), len(want))
	log := d.Stderr()
	if strings.Contains(log, "abort") {
		t.Errorf("a worker aborted its drain:\n%s", strings.Join(grepLines(log, regexp.MustCompile(`abort`)), "\n"))
	}
	if sig == syscall.SIGTERM {
		d.waitExit0(25 * time.Second)
	}
}

// TestSupervisorStopWithSlowClients: SIGTERM, and kill -9, of the
// supervisor while slow clients are in the middle of a packet: in both
// cases the workers drain (a worker used to take the supervisor's SIGTERM
// and its parent-death signal for two SIGTERMs and abort, and to die of
// SIGPIPE logging into the dead supervisor's syslog pipe), so every check
// the clients sent arrives.
func TestSupervisorStopWithSlowClients(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(fmt.Sprintf("signal=%d", sig), func(t *testing.T) {
			t.Parallel()
			supStopWithSlowClients(t, sig)
		})
	}
}

// TestSupervisorMetricsCountWorkers: with nsca_workers=2 the supervisor's
// /metrics sums what its workers counted, which they publish in shared
// memory rather than report through a pipe. A worker killed with SIGKILL
// after its results were counted leaves them in the totals, and its
// successor's results are added to them.
func TestSupervisorMetricsCountWorkers(t *testing.T) {
	t.Parallel()
	cmd := commandFile(t, t.TempDir())
	metrics := relMetricsAddr(t)
	d := lcStart(t, lcCfg(cmd, merge(lcWorkers(2), Config{"metrics_address": metrics})), daemonOpts{})
	kids := d.waitWorkers(2, 10*time.Second)
	// The harness's probe of the port counts as a connection, which a
	// worker publishes with its next batch or within a second.
	time.Sleep(1500 * time.Millisecond)
	before := relMetricsBalanced(t, metrics, nil)
	counted := func(wantEmitted, wantConns int) func(m map[string]float64) string {
		return func(m map[string]float64) string {
			e := m[`nsca_results_emitted_total{sink="file"}`] - before[`nsca_results_emitted_total{sink="file"}`]
			c := m["nsca_connections_total"] - before["nsca_connections_total"]
			if e != float64(wantEmitted) || c != float64(wantConns) {
				return fmt.Sprintf("emitted{file} went up by %v and connections by %v, want %d and %d", e, c, wantEmitted, wantConns)
			}
			return ""
		}
	}
	first := lcSendAll(t, d.Port, lcPassword, "before", 8, 5)
	waitFileLines(t, cmd, len(first))
	relMetricsBalanced(t, metrics, counted(len(first), 8))

	if err := syscall.Kill(kids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitWorkers(2, 10*time.Second, kids[0])
	relMetricsBalanced(t, metrics, counted(len(first), 8))
	second := lcSendAll(t, d.Port, lcPassword, "after", 4, 5)
	waitFileLines(t, cmd, len(first)+len(second))
	relMetricsBalanced(t, metrics, counted(len(first)+len(second), 12))
	d.stop()
}

// supListening counts the sockets listening on port (IPv4 and IPv6), from
// the kernel's tables: the supervisor's and every worker's descriptors of
// one socket count once.
func supListening(t *testing.T, port int) int {
	t.Helper()
	n := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 3 && strings.HasSuffix(f[1], fmt.Sprintf(":%04X", port)) && f[3] == "0A" {
				n++
			}
		}
	}
	return n
}

// supReloadWorkers: SIGHUPs that change nsca_workers from counts[0] to
// each of the others in turn while clients send, each as soon as the one
// before has reloaded, end with as many listening sockets as workers, and
// no client is left in the backlog of a socket nobody accepts on: every
// connection gets its init packet within a second and every check it sent
// arrives once. The supervisor used to keep every socket it had ever
// opened, so after 2→1 the kernel still gave half the new clients to a
// socket without a worker.
func supReloadWorkers(t *testing.T, counts ...int) {
	from, to := counts[0], counts[len(counts)-1]
	cmd := commandFile(t, t.TempDir())
	cfg := lcCfg(cmd, lcWorkers(from))
	d := lcStart(t, cfg, daemonOpts{})
	d.waitWorkers(from, startTimeout)
	if n := supListening(t, d.Port); n != from {
		t.Fatalf("%d listening sockets with nsca_workers=%d", n, from)
	}
	b := lcStartBurst(d.Port, 6, 3, lcPassword, "resize")
	b.waitGoing(t, 20)
	reloaded := regexp.MustCompile(`SIGHUP: configuration reloaded`)
	var hupAt time.Time
	for i, n := range counts[1:] {
		cfg["nsca_workers"] = fmt.Sprint(n)
		d.rewriteConfig(cfg)
		hupAt = time.Now()
		d.Signal(syscall.SIGHUP)
		if _, ok := waitLines(d.Stderr, reloaded, i+1, 20*time.Second); !ok {
			b.finish()
			t.Fatalf("reload %d (nsca_workers=%d) not logged within 20 s", i+1, n)
		}
	}
	listening := -1
	settled := waitFor(10*time.Second, func() bool { listening = supListening(t, d.Port); return listening == to })
	settledAt := time.Now()
	// Clients keep coming for a while with the new set of sockets, so that
	// any socket left without a worker would take some of them.
	time.Sleep(2 * time.Second)
	conns := b.finish()
	d.waitWorkers(to, 10*time.Second)
	after := supListening(t, d.Port)

	var slow []string
	var worst time.Duration
	for _, c := range conns {
		wait := c.res.endAt.Sub(c.start)
		if !c.res.initAt.IsZero() {
			wait = c.res.initAt.Sub(c.start)
		}
		worst = max(worst, wait)
		if wait > time.Second || c.res.dialErr != nil || c.res.initErr != nil {
			slow = append(slow, fmt.Sprintf("client %d conn %d at %v: waited %v (connect %v, init %v)", c.client, c.seq, c.start.Sub(hupAt).Round(time.Millisecond), wait.Round(time.Millisecond), c.res.dialErr, c.res.initErr))
		}
	}
	refused, notFull, want := supBurstReport(conns)
	waitFileLines(t, cmd, len(want))
	counted := lcOutput(t, cmd)
	t.Logf("nsca_workers %v under load: %d listening sockets %v after the last SIGHUP, %d at the end; %d connections (%d checks sent, %d lines written), %d waited over 1 s, %d not fully sent, longest wait for the init packet %v",
		counts, listening, settledAt.Sub(hupAt).Round(time.Millisecond), after, len(conns), len(want), len(counted), len(slow), notFull, worst.Round(time.Millisecond))
	if !settled || after != to {
		t.Errorf("%d listening sockets after the reload (%d at the end), want %d, one per worker", listening, after, to)
	}
	if len(slow) > 0 {
		t.Errorf("%d of %d connections waited over a second for their init packet, e.g. %q", len(slow), len(conns), slow[:min(3, len(slow))])
	}
	if len(refused) > 0 || notFull > 0 {
		t.Errorf("%d connections refused, %d not fully sent", len(refused), notFull)
	}
	lcAssertOnce(t, counted, want)
	for _, l := range grepLines(d.Stderr(), regexp.MustCompile(`SIGHUP: configuration reloaded|listening sockets nsca_workers`)) {
		t.Logf("%s", l)
	}
	if bad := grepLines(d.Stderr(), regexp.MustCompile(supBadLog.String()+`|still queued`)); len(bad) > 0 {
		t.Errorf("%d log lines of lost sockets, dead workers or reset clients, e.g. %q", len(bad), bad[:min(3, len(bad))])
	}
	d.stop()
}

// TestSupervisorReloadChangesWorkers: supReloadWorkers from 2 workers to
// 1, from 1 to 3, and from 3 to 1, 2 and 1 again, each reload before the
// sockets the one before no longer needed were closed.
func TestSupervisorReloadChangesWorkers(t *testing.T) {
	for _, counts := range [][]int{{2, 1}, {1, 3}, {3, 1, 2, 1}} {
		t.Run(strings.Trim(strings.ReplaceAll(fmt.Sprint(counts), " ", "-to-"), "[]"), func(t *testing.T) {
			t.Parallel()
			supReloadWorkers(t, counts...)
		})
	}
}
