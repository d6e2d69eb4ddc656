package tests

// Process lifecycle, black box: the worker tree and its respawning, SIGTERM
// and SIGHUP in the middle of a burst, detaching, systemd socket activation
// and sd_notify, privilege drop in workers, per-peer log rate limiting, and
// workers that must not outlive the main process. Helpers of this file carry
// the prefix lc.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// lcPassword is the password of the daemons of this file (XOR).
const lcPassword = "lifecycle-pw"

// lcCfg is a configuration for XOR with lcPassword, writing to the regular
// command file cmd, plus extra.
// Its statistics line comes every 5 s while counters change, which the
// tests that wait for the line that counts everything rely on.
func lcCfg(cmd string, extra Config) Config {
	return merge(Config{"command_file": cmd, "append_to_file": "1", "password": lcPassword, "decryption_method": "1",
		"stats_interval": "5"}, extra)
}

// lcWorkers is the nsca_workers option.
func lcWorkers(n int) Config { return Config{"nsca_workers": strconv.Itoa(n)} }

// lcConnResult is how far one client connection got.
type lcConnResult struct {
	dialErr error     // connect() failed
	initErr error     // connected, but no init packet came
	initAt  time.Time // when the init packet arrived
	err     error     // what went wrong after the init packet
	endAt   time.Time
	// full: the write of every packet returned, the client closed its
	// side, then read EOF from the server, and the kernel had nothing of
	// ours left unacknowledged. A server that closes a socket with unread
	// data sends RST, not FIN, and data arriving after its close is not
	// acknowledged, so the server read everything we sent.
	full bool
}

// lcSend connects to 127.0.0.1:port, reads the init packet, sends checks
// XOR-encrypted with password, half-closes and waits for the server to
// close. It never fails the test: the result says how far it got.
func lcSend(port int, password string, checks []rawCheck) lcConnResult {
	return lcSendHook(port, password, checks, nil)
}

// lcSendHook is lcSend calling onInit, if not nil, when the init packet
// has arrived.
func lcSendHook(port int, password string, checks []rawCheck, onInit func()) (r lcConnResult) {
	defer func() { r.endAt = time.Now() }()
	c, err := dialLocal(port, "", 2*time.Second)
	if err != nil {
		r.dialErr = err
		return r
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	rc, err := readInit(c, 5*time.Second)
	if err != nil {
		r.initErr = err
		return r
	}
	r.initAt = time.Now()
	if onInit != nil {
		onInit()
	}
	if _, err := c.Write(rc.packets(password, checks)); err != nil {
		r.err = fmt.Errorf("write: %w", err)
		return r
	}
	if err := tc.CloseWrite(); err != nil {
		r.err = fmt.Errorf("shutdown(SHUT_WR): %w", err)
		return r
	}
	n, err := c.Read(make([]byte, 1))
	if n > 0 {
		r.err = errors.New("the server sent data after the init packet")
		return r
	}
	if err != io.EOF {
		r.err = fmt.Errorf("waiting for the server to close: %w", err)
		return r
	}
	var info *unix.TCPInfo
	var infoErr error
	if raw, err := tc.SyscallConn(); err != nil {
		infoErr = err
	} else if err := raw.Control(func(fd uintptr) { info, infoErr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		infoErr = err
	}
	if infoErr != nil {
		r.err = fmt.Errorf("TCP_INFO: %w", infoErr)
		return r
	}
	if info.Unacked != 0 || info.Notsent_bytes != 0 {
		r.err = fmt.Errorf("EOF from the server with %d segments unacknowledged and %d bytes not sent", info.Unacked, info.Notsent_bytes)
		return r
	}
	r.full = true
	return r
}

// lcChecks makes n checks that name their client and connection, so every
// line of the command file tells where it came from.
func lcChecks(tag string, client, conn, n int) []rawCheck {
	out := make([]rawCheck, n)
	for i := range out {
		out[i] = rawCheck{rc: int16(i % 4), host: fmt.Sprintf("%s-c%02d", tag, client), svc: fmt.Sprintf("conn%05d", conn), output: fmt.Sprintf("check %d of %s/%d/%d", i, tag, client, conn)}
	}
	return out
}

// lcLines is the command file lines the checks must produce.
func lcLines(checks []rawCheck) []string {
	var out []string
	for _, ch := range checks {
		out = append(out, ch.line())
	}
	return out
}

// lcConn is one connection of a burst.
type lcConn struct {
	client, seq int
	checks      []rawCheck
	start       time.Time
	res         lcConnResult
}

// lcBurst is clients goroutines, each sending perConn checks per
// connection, one connection after another, until stopped.
type lcBurst struct {
	mu     sync.Mutex
	conns  []*lcConn
	full   int
	active int // connections past their init packet and not ended
	stop   chan struct{}
	wg     sync.WaitGroup
}

func lcStartBurst(port, clients, perConn int, password, tag string) *lcBurst {
	b := &lcBurst{stop: make(chan struct{})}
	for c := range clients {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for seq := 0; ; seq++ {
				select {
				case <-b.stop:
					return
				default:
				}
				conn := &lcConn{client: c, seq: seq, checks: lcChecks(tag, c, seq, perConn), start: time.Now()}
				conn.res = lcSendHook(port, password, conn.checks, func() {
					b.mu.Lock()
					b.active++
					b.mu.Unlock()
				})
				b.mu.Lock()
				// The end is taken under the lock that signalMidway holds.
				conn.res.endAt = time.Now()
				if !conn.res.initAt.IsZero() {
					b.active--
				}
				b.conns = append(b.conns, conn)
				if conn.res.full {
					b.full++
				}
				b.mu.Unlock()
				if conn.res.dialErr != nil {
					time.Sleep(10 * time.Millisecond) // the daemon is gone: do not spin
				}
			}
		}()
	}
	return b
}

// fullCount is how many connections were fully sent so far.
func (b *lcBurst) fullCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.full
}

// waitGoing waits up to 5 s until n connections were fully sent; if they
// were not, it stops the clients and fails the test.
func (b *lcBurst) waitGoing(t *testing.T, n int) {
	t.Helper()
	if !waitFor(5*time.Second, func() bool { return b.fullCount() >= n }) {
		conns := b.finish()
		t.Fatalf("the burst did not get going: %d of %d connections fully sent in 5 s", b.fullCount(), len(conns))
	}
}

// signalMidway sends sig to pid at a moment when at least one connection
// is past its init packet and not finished, and returns that moment.
func (b *lcBurst) signalMidway(t *testing.T, pid int, sig syscall.Signal) time.Time {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		if b.active > 0 {
			at := time.Now()
			err := syscall.Kill(pid, sig)
			b.mu.Unlock()
			if err != nil {
				t.Fatalf("kill -%d %d: %v", sig, pid, err)
			}
			return at
		}
		b.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("in 5 s there was no moment with a connection in flight")
		}
		time.Sleep(time.Millisecond)
	}
}

// finish stops the clients and returns every connection they made.
func (b *lcBurst) finish() []*lcConn {
	close(b.stop)
	b.wg.Wait()
	return b.conns
}

// lcDaemon is a daemon started by this file's tests, ended by its PID;
// workers it was seen with are killed by PID if they outlive it.
type lcDaemon struct {
	*Daemon
	mu   sync.Mutex
	seen map[int]bool
}

// lcStart writes cfg into a directory, starts `nsca -c CFG -f` there with
// its output in a log file, and (unless o.noWait) waits until the port
// serves. Cleanup ends it and any worker it had, by PID.
func lcStart(t *testing.T, cfg Config, o daemonOpts) *lcDaemon {
	t.Helper()
	d := &lcDaemon{Daemon: launchDaemon(t, cfg, o), seen: map[int]bool{}}
	t.Cleanup(d.cleanup)
	return d
}

// workers returns the live children of the daemon and remembers them.
func (d *lcDaemon) workers() []int {
	return d.remember(childPIDs(d.Pid()))
}

func (d *lcDaemon) remember(kids []int) []int {
	d.mu.Lock()
	for _, k := range kids {
		d.seen[k] = true
	}
	d.mu.Unlock()
	return kids
}

// waitWorkers waits until the daemon has exactly n live children, other
// than those in not, and returns them.
func (d *lcDaemon) waitWorkers(n int, timeout time.Duration, not ...int) []int {
	d.t.Helper()
	return d.remember(d.Daemon.waitWorkers(n, timeout, not...))
}

// kill ends the daemon by its PID: SIGTERM, then SIGKILL.
func (d *lcDaemon) kill() {
	d.workers()
	d.p.terminate(stopTimeout)
}

// cleanup kills the daemon and every worker it was seen with that is left.
func (d *lcDaemon) cleanup() {
	d.kill()
	d.mu.Lock()
	defer d.mu.Unlock()
	var seen []int
	for pid := range d.seen {
		seen = append(seen, pid)
	}
	// Workers of a daemon that had to be killed get SIGTERM from the
	// kernel (parent-death signal) and drain: give them a moment.
	left := waitGone(seen, 3*time.Second)
	for _, pid := range left {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if len(left) > 0 {
		d.t.Errorf("worker processes %v outlived the daemon %d; killed", left, d.Pid())
	}
	if d.t.Failed() {
		d.t.Logf("daemon log (%s):\n%s", d.stderrPath, d.Stderr())
	}
}

// stop sends SIGTERM and asserts exit status 0 within stopTimeout.
func (d *lcDaemon) stop() {
	d.t.Helper()
	d.workers()
	syscall.Kill(d.Pid(), syscall.SIGTERM)
	d.waitExit0(stopTimeout)
}

// waitExit0 waits for the daemon's exit and asserts status 0.
func (d *lcDaemon) waitExit0(timeout time.Duration) {
	d.t.Helper()
	if !d.p.exitWithin(timeout) {
		d.t.Fatalf("the daemon %d did not exit within %v", d.Pid(), timeout)
	}
	if !d.p.state.Success() {
		d.t.Errorf("the daemon exited with %v, want status 0", d.p.state)
	}
}

// lcPsTree is `ps -o pid,ppid,user,args` for pid and its children.
func lcPsTree(pid int) string {
	pids := []string{strconv.Itoa(pid)}
	for _, k := range childPIDs(pid) {
		pids = append(pids, strconv.Itoa(k))
	}
	out, err := exec.Command("ps", "-o", "pid,ppid,user,args", "-p", strings.Join(pids, ",")).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("ps: %v: %s", err, out)
	}
	return string(out)
}

// lcOutput counts the command file's lines, without their `[time] `.
func lcOutput(t *testing.T, path string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, l := range completeLines(readFile(t, path)) {
		m := commandLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("command file line %q is not `[time] COMMAND`", l)
			continue
		}
		counts[m[2]]++
	}
	return counts
}

// lcLogPid is the PID in a glog line's header.
var lcLogPid = regexp.MustCompile(`^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+(\d+) `)

func lcPidOf(line string) int {
	m := lcLogPid.FindStringSubmatch(line)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// lcServes dials the port once and reports whether the init packet comes
// within timeout.
func lcServes(port int, timeout time.Duration) error {
	r, err := dialInit(port, "", timeout)
	if err == nil {
		r.c.Close()
	}
	return err
}

// lcSendAll sends conns connections of perConn checks from parallel
// goroutines and returns the lines that must arrive; every connection
// must be fully sent.
func lcSendAll(t *testing.T, port int, password, tag string, conns, perConn int) []string {
	t.Helper()
	results := make([]lcConnResult, conns)
	checks := make([][]rawCheck, conns)
	var wg sync.WaitGroup
	for i := range conns {
		checks[i] = lcChecks(tag, i%100, i, perConn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = lcSend(port, password, checks[i])
		}()
	}
	wg.Wait()
	var want []string
	for i, r := range results {
		if !r.full {
			t.Errorf("%s connection %d not fully sent: dial %v, init %v, then %v", tag, i, r.dialErr, r.initErr, r.err)
		}
		want = append(want, lcLines(checks[i])...)
	}
	return want
}

// lcDeliverOnce sends conns connections of perConn checks and asserts that
// the command file cmd gets every check once.
func lcDeliverOnce(t *testing.T, port int, cmd, tag string, conns, perConn int) {
	t.Helper()
	want := lcSendAll(t, port, lcPassword, tag, conns, perConn)
	waitFileLines(t, cmd, len(want))
	lcAssertOnce(t, lcOutput(t, cmd), want)
}

// lcAssertOnce asserts every line of want is in counts exactly once.
func lcAssertOnce(t *testing.T, counts map[string]int, want []string) {
	t.Helper()
	var missing, dup []string
	for _, w := range want {
		switch n := counts[w]; {
		case n == 0:
			missing = append(missing, w)
		case n > 1:
			dup = append(dup, fmt.Sprintf("%s (%d times)", w, n))
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d lines missing from the command file, e.g. %q", len(missing), len(want), missing[:min(5, len(missing))])
	}
	if len(dup) > 0 {
		t.Errorf("%d lines written more than once, e.g. %q", len(dup), dup[:min(5, len(dup))])
	}
}

// lcStatsRe matches the statistics lines the daemon logs every 5 s.
var lcStatsRe = regexp.MustCompile(`\] statistics: `)

// TestLifecycleWorkerRespawn: with nsca_workers=3 the main process has
// exactly three worker children; a worker killed with SIGKILL is replaced
// by a new process within a few seconds; checks sent afterwards over many
// connections reach every worker, the new one included, are all
// delivered, and the supervisor's statistics line, which sums the workers,
// counts exactly what was sent.
func TestLifecycleWorkerRespawn(t *testing.T) {
	t.Parallel()
	cmd := commandFile(t, t.TempDir())
	d := lcStart(t, lcCfg(cmd, Config{"nsca_workers": "3", "nsca_workers_spread": "always", "debug": "1"}), daemonOpts{})
	workers := d.waitWorkers(3, startTimeout)
	time.Sleep(300 * time.Millisecond)
	if again := d.workers(); !slices.Equal(again, workers) {
		t.Fatalf("the workers changed from %v to %v without a reason", workers, again)
	}
	t.Logf("nsca_workers=3, process tree:\n%s", lcPsTree(d.Pid()))

	victim := workers[1]
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", victim, err)
	}
	killed := time.Now()
	now3 := d.waitWorkers(3, 5*time.Second, victim)
	t.Logf("worker %d killed; workers %v again after %v", victim, now3, time.Since(killed).Round(time.Millisecond))
	var fresh []int
	for _, w := range now3 {
		if !slices.Contains(workers, w) {
			fresh = append(fresh, w)
		}
	}
	if len(fresh) != 1 {
		t.Errorf("workers after the kill %v, before %v: want exactly one new PID", now3, workers)
	}
	d.waitLog(regexp.MustCompile(fmt.Sprintf(`worker \d+ \(pid %d\) died`, victim)), 2*time.Second)

	// 60 connections of 2 checks each, from many source ports, so that
	// SO_REUSEPORT gives every worker some.
	const conns, perConn = 60, 2
	want := lcSendAll(t, d.Port, lcPassword, "respawn", conns, perConn)
	waitFileLines(t, cmd, len(want))
	delivered := time.Now()
	counts := lcOutput(t, cmd)
	lcAssertOnce(t, counts, want)
	if len(counts) != len(want) {
		t.Errorf("the command file has %d distinct lines, want %d", len(counts), len(want))
	}

	// debug=1 logs every check with the PID of the worker that took it.
	byPid := map[int]int{}
	for _, l := range grepLines(d.Stderr(), regexp.MustCompile(`\] check from 127\.0\.0\.1`)) {
		byPid[lcPidOf(l)]++
	}
	for _, w := range now3 {
		if byPid[w] == 0 {
			t.Errorf("worker %d took none of the %d connections (checks per PID: %v)", w, conns, byPid)
		}
	}
	if byPid[victim] != 0 {
		t.Errorf("the killed worker %d logged checks: %v", victim, byPid)
	}
	t.Logf("checks per worker: %v", byPid)

	// Workers report every second; the statistics line after that must
	// count everything. A line is skipped when nothing changed, so the one
	// that counts it may be the last one logged already.
	time.Sleep(time.Until(delivered.Add(1500 * time.Millisecond)))
	counted := regexp.MustCompile(fmt.Sprintf(`\] statistics: .*received=%d, `, len(want)))
	lines, ok := waitLines(d.Stderr, counted, 1, 7*time.Second)
	if !ok {
		all := grepLines(d.Stderr(), lcStatsRe)
		t.Fatalf("no statistics line with received=%d within 7 s (the interval is 5 s); the last: %q", len(want), all[max(len(all)-1, 0):])
	}
	line := lines[len(lines)-1]
	if pid := lcPidOf(line); pid != d.Pid() {
		t.Errorf("the statistics line comes from PID %d, want the supervisor %d: %s", pid, d.Pid(), line)
	}
	st, ok := parseStats(line)
	if !ok {
		t.Fatalf("statistics line without received= and report_success=: %s", line)
	}
	if st.received != uint64(len(want)) || st.success != uint64(len(want)) {
		t.Errorf("statistics line says received=%d report_success=%d, want %d each (all sent after the kill): %s", st.received, st.success, len(want), line)
	}
	d.stop()
}

// lcTermBurst runs 20 clients sending 10 checks per connection in a loop,
// sends SIGTERM to the main process in the middle and checks that every
// fully sent check was written once.
func lcTermBurst(t *testing.T, workers int) {
	cmd := commandFile(t, t.TempDir())
	d := lcStart(t, lcCfg(cmd, lcWorkers(workers)), daemonOpts{})
	if workers > 0 {
		d.waitWorkers(workers, startTimeout)
	}
	const clients, perConn = 20, 10
	b := lcStartBurst(d.Port, clients, perConn, lcPassword, "term")
	b.waitGoing(t, 40)
	d.workers()
	termAt := b.signalMidway(t, d.Pid(), syscall.SIGTERM)
	if !d.p.exitWithin(stopTimeout + 5*time.Second) {
		b.finish()
		t.Fatalf("the daemon did not exit within %v of SIGTERM", stopTimeout+5*time.Second)
	}
	exitAt := time.Now()
	conns := b.finish()
	if !d.p.state.Success() {
		t.Errorf("the daemon exited with %v after SIGTERM during a burst, want status 0", d.p.state)
	}

	var want []string
	var full, inFlight, acceptedNotFull int
	var notFull []string
	for _, c := range conns {
		if c.res.full {
			full++
			want = append(want, lcLines(c.checks)...)
		}
		if !c.res.initAt.IsZero() && c.res.initAt.Before(termAt) {
			if c.res.endAt.After(termAt) {
				inFlight++
			}
			// Accepted before SIGTERM was even sent: the drain must let
			// it finish (it sends everything at once, well within the
			// 2 s grace).
			if !c.res.full {
				acceptedNotFull++
				notFull = append(notFull, fmt.Sprintf("client %d conn %d: %v", c.client, c.seq, c.res.err))
			}
		}
	}
	t.Logf("workers=%d: %d connections, %d fully sent (%d checks); %d in flight at SIGTERM; exit %v after SIGTERM",
		workers, len(conns), full, len(want), inFlight, exitAt.Sub(termAt).Round(time.Millisecond))
	if inFlight == 0 {
		t.Errorf("no connection was in flight when SIGTERM was sent: the test did not hit the middle of the burst")
	}
	if acceptedNotFull > 0 {
		t.Errorf("%d connections that had their init packet before SIGTERM was sent were not served to the end, e.g. %q", acceptedNotFull, notFull[:min(5, len(notFull))])
	}
	counts := lcOutput(t, cmd)
	lcAssertOnce(t, counts, want)
	sent := map[string]bool{}
	for _, c := range conns {
		for _, l := range lcLines(c.checks) {
			sent[l] = true
		}
	}
	for l, n := range counts {
		if !sent[l] {
			t.Errorf("line nobody sent: %q", l)
		}
		if n > 1 && !slices.Contains(want, l) {
			t.Errorf("line written %d times: %q", n, l)
		}
	}
}

// TestLifecycleSIGTERMMidBurst: SIGTERM to the main process while 20
// clients send; it exits 0 and every check a client fully sent is in the
// command file exactly once, with one process and with two workers.
func TestLifecycleSIGTERMMidBurst(t *testing.T) {
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("nsca_workers=%d", workers), func(t *testing.T) { lcTermBurst(t, workers) })
	}
}

// lcReloadBurst changes the password and sends SIGHUP while clients with
// the old password keep connecting.
func lcReloadBurst(t *testing.T, workers int) {
	cmd := commandFile(t, t.TempDir())
	cfg := lcCfg(cmd, merge(lcWorkers(workers), Config{"password": "old-password"}))
	d := lcStart(t, cfg, daemonOpts{})
	var oldWorkers []int
	if workers > 0 {
		oldWorkers = d.waitWorkers(workers, startTimeout)
	}
	b := lcStartBurst(d.Port, 8, 2, "old-password", "old")
	b.waitGoing(t, 20)
	cfg["password"] = "new-password"
	d.rewriteConfig(cfg)
	hupAt := b.signalMidway(t, d.Pid(), syscall.SIGHUP)
	reloadedRe := regexp.MustCompile(`SIGHUP: configuration reloaded`)
	reloaded := func() bool { return len(grepLines(d.Stderr(), reloadedRe)) > 0 }
	if !waitFor(10*time.Second, func() bool { return reloaded() || d.p.hasExited() }) || !reloaded() {
		b.finish()
		t.Fatalf("no %q in the log within 10 s of SIGHUP (exited: %v)", reloadedRe, d.p.hasExited())
	}
	doneAt := time.Now()
	// The previous server (or the previous workers, on their SIGTERM) stop
	// accepting right after that line; allow them a moment.
	settled := doneAt.Add(300 * time.Millisecond)
	time.Sleep(time.Until(settled.Add(700 * time.Millisecond)))
	if workers > 0 {
		d.waitWorkers(workers, 5*time.Second, oldWorkers...)
	}
	newWant := lcSendAll(t, d.Port, "new-password", "new", 10, 2)
	conns := b.finish()
	waitFileLines(t, cmd, len(newWant))
	time.Sleep(200 * time.Millisecond)
	d.stop()

	var refused []string
	var oldBefore, oldAfter []string
	var nBefore, nAfter, nSwitch int
	for _, c := range conns {
		r := c.res
		if r.dialErr != nil || r.initErr != nil {
			refused = append(refused, fmt.Sprintf("client %d conn %d at +%v: connect: %v, init packet: %v", c.client, c.seq, c.start.Sub(hupAt).Round(time.Millisecond), r.dialErr, r.initErr))
			continue
		}
		switch {
		case r.full && r.endAt.Before(hupAt):
			nBefore++
			oldBefore = append(oldBefore, lcLines(c.checks)...)
		case r.initAt.After(settled):
			nAfter++
			oldAfter = append(oldAfter, lcLines(c.checks)...)
		default:
			nSwitch++
		}
	}
	t.Logf("workers=%d: %d old-password connections: %d done before SIGHUP, %d during the switch-over, %d after the reload (reload took %v)",
		workers, len(conns), nBefore, nSwitch, nAfter, doneAt.Sub(hupAt).Round(time.Millisecond))
	if len(refused) > 0 {
		t.Errorf("%d connections were refused or closed before the init packet around the reload, e.g. %q", len(refused), refused[:min(5, len(refused))])
	}
	if nAfter == 0 {
		t.Errorf("no old-password connection was made after the reload: the test proves nothing about them")
	}
	counts := lcOutput(t, cmd)
	lcAssertOnce(t, counts, oldBefore)
	lcAssertOnce(t, counts, newWant)
	var leaked []string
	for _, l := range oldAfter {
		if counts[l] > 0 {
			leaked = append(leaked, l)
		}
	}
	if len(leaked) > 0 {
		t.Errorf("%d checks with the old password, sent after the reload completed, were delivered, e.g. %q", len(leaked), leaked[:min(5, len(leaked))])
	}
	// The rejections are logged (rate-limited) after the reload line.
	log := d.Stderr()
	i := strings.Index(log, "SIGHUP: configuration reloaded")
	if bad := grepLines(log[i:], regexp.MustCompile(`127\.0\.0\.1.*(?i:crc|version)`)); len(bad) == 0 {
		t.Errorf("no log line after the reload says an old-password client (127.0.0.1) failed the crc or version check")
	}
	if strings.Contains(log, "keeping the running configuration") {
		t.Errorf("the reload was refused")
	}
}

// TestLifecycleSIGHUPPasswordChange: clients keep connecting with the old
// password while the configuration gets a new one and SIGHUP reloads it: no
// connection is refused or reset before its init packet, clients with the
// new password are delivered, old-password clients after the reload are
// rejected and logged as such.
func TestLifecycleSIGHUPPasswordChange(t *testing.T) {
	for _, workers := range []int{2, 0} {
		t.Run(fmt.Sprintf("nsca_workers=%d", workers), func(t *testing.T) { lcReloadBurst(t, workers) })
	}
}

// lcOpenPTY returns the master and slave of a new pseudo-terminal.
func lcOpenPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("opening the pty slave: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		m.Close()
	})
	return m, s
}

// lcStartDetaching runs `nsca -c cfgPath` without -f from a session whose
// controlling terminal is a pty, as an operator at a shell would, with its
// stderr captured. It returns the exit status and stderr.
func lcStartDetaching(t *testing.T, dir, cfgPath string) (*os.ProcessState, string, time.Duration) {
	t.Helper()
	_, slave := lcOpenPTY(t)
	var stderr lockedBuffer
	cmd := nscaCmd(dir, nil, "-c", cfgPath)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	start := time.Now()
	p := mustStart(t, "nsca (detaching)", cmd)
	if !p.exitWithin(startTimeout) {
		t.Fatalf("nsca without -f did not return within %v; stderr:\n%s", startTimeout, stderr.String())
	}
	return p.state, stderr.String(), time.Since(start)
}

// TestLifecycleDetachedSession: started without -f from a terminal, the
// command returns 0 promptly; the daemon in the pid file leads its own
// session, has no controlling terminal and has /dev/null as standard input
// and output (its workers too), serves checks, refuses a second start with
// a message naming the pid file (leaving the first alone), and SIGTERM
// stops it and removes the pid file. TestDetach covers relative paths.
func TestLifecycleDetachedSession(t *testing.T) {
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("nsca_workers=%d", workers), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cmdFile := commandFile(t, dir)
			pidPath := filepath.Join(dir, "nsca.pid")
			port := freePort(t)
			cfg := listenConfig(lcCfg(cmdFile, merge(lcWorkers(workers), Config{"pid_file": pidPath})), port)
			cfgPath := filepath.Join(dir, "nsca.cfg")
			writeFile(t, cfgPath, cfg.text(), 0o600)
			state, stderr, took := lcStartDetaching(t, dir, cfgPath)
			if !state.Success() {
				t.Fatalf("nsca without -f exited with %v, want 0; stderr:\n%s", state, stderr)
			}
			t.Logf("the detaching command returned after %v", took.Round(time.Millisecond))
			pid, _ := strconv.Atoi(strings.TrimSpace(readFile(t, pidPath)))
			if pid <= 0 {
				t.Fatalf("pid_file %s holds %q after the command returned", pidPath, readFile(t, pidPath))
			}
			var kids []int
			killAtEnd(t, "the detached daemon", func() []int { return append([]int{pid}, kids...) })
			st, err := procStat(pid)
			if err != nil {
				t.Fatalf("the daemon %d from the pid file: %v", pid, err)
			}
			if st[3] != strconv.Itoa(pid) {
				t.Errorf("the daemon %d is in session %s, want its own (setsid)", pid, st[3])
			}
			if st[4] != "0" {
				t.Errorf("the daemon %d has the controlling terminal tty_nr=%s, want none (0)", pid, st[4])
			}
			for _, fd := range []int{0, 1} {
				if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd)); err != nil || target != os.DevNull {
					t.Errorf("the daemon's fd %d is %q (%v), want /dev/null", fd, target, err)
				}
			}
			if workers > 0 {
				var ok bool
				if kids, ok = waitChildren(pid, workers, startTimeout); !ok {
					t.Fatalf("the detached daemon %d has children %v, want %d workers", pid, kids, workers)
				}
				for _, k := range kids {
					st, err := procStat(k)
					if err != nil || len(st) < 5 {
						t.Errorf("worker %d: %v", k, err)
					} else if st[3] != strconv.Itoa(pid) || st[4] != "0" {
						t.Errorf("worker %d: session %s tty_nr %s, want session %d and no terminal", k, st[3], st[4], pid)
					}
				}
			}

			lcDeliverOnce(t, port, cmdFile, "detached", 4, 2)

			// A second start with the same configuration.
			state2, stderr2, _ := lcStartDetaching(t, dir, cfgPath)
			if state2.Success() {
				t.Errorf("a second start while the daemon %d runs exited 0, want a refusal", pid)
			}
			if !strings.Contains(stderr2, pidPath) {
				t.Errorf("a second start while the daemon %d runs says %q, want a message naming the pid file %s", pid, strings.TrimSpace(stderr2), pidPath)
			}
			if got := strings.TrimSpace(readFile(t, pidPath)); got != strconv.Itoa(pid) {
				t.Errorf("after the refused second start the pid file holds %q, want %d", got, pid)
			}
			if procGone(pid) {
				t.Fatalf("the first daemon %d is gone after the refused second start", pid)
			}
			if err := lcServes(port, 2*time.Second); err != nil {
				t.Errorf("the first daemon no longer serves after the refused second start: %v", err)
			}

			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if len(waitGone(append([]int{pid}, kids...), stopTimeout)) > 0 {
				t.Fatalf("the detached daemon %d (workers %v) did not end within %v of SIGTERM", pid, kids, stopTimeout)
			}
			if _, err := os.Stat(pidPath); !os.IsNotExist(err) {
				t.Errorf("the pid file is still there after the daemon ended (stat: %v)", err)
			}
		})
	}
}

// TestLifecycleSocketActivation: started the way systemd's socket
// activation starts it (the listening socket as fd 3, LISTEN_FDS=1,
// LISTEN_PID its own PID; the test plays systemd because
// systemd-socket-activate is not among the packages scripts/deps.sh
// installs), the daemon serves on that socket, says so in its log, and
// does not pass LISTEN_* on to its workers. nsca.cfg names the same port,
// as /etc/nsca.cfg and nsca.socket both say 5667.
func TestLifecycleSocketActivation(t *testing.T) {
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("nsca_workers=%d", workers), func(t *testing.T) {
			t.Parallel()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			lf, err := l.(*net.TCPListener).File()
			l.Close()
			if err != nil {
				t.Fatal(err)
			}
			cmd := commandFile(t, t.TempDir())
			d := lcStart(t, lcCfg(cmd, lcWorkers(workers)), daemonOpts{
				port:  port,
				env:   []string{"LISTEN_FDS=1"},
				extra: []*os.File{lf},
				wrap: func(bin string, args []string) *exec.Cmd {
					// LISTEN_PID must be the daemon's own PID: the shell's,
					// which exec keeps.
					return exec.Command("/bin/sh", append([]string{"-c", `LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"`, bin}, args...)...)
				},
			})
			// The socket's identity, to find it in the daemon's descriptors;
			// then only the daemon holds it. (Not lf.Fd(): that would make
			// the socket, shared with the daemon, blocking.)
			fi, err := lf.Stat()
			if err != nil {
				t.Fatal(err)
			}
			socket := fmt.Sprintf("socket:[%d]", fi.Sys().(*syscall.Stat_t).Ino)
			lf.Close()
			if !strings.Contains(d.Stderr(), "from systemd socket activation") {
				t.Errorf("the log does not say the daemon uses the socket from socket activation")
			}
			// The process that accepts (the daemon, or each worker) has the
			// activated socket as fd 3.
			accepting := []int{d.Pid()}
			if workers > 0 {
				accepting = d.waitWorkers(workers, startTimeout)
			}
			for _, p := range accepting {
				if got, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", p)); err != nil || got != socket {
					t.Errorf("process %d has fd 3 = %q (%v), want the activated socket %s", p, got, err, socket)
				}
				if workers > 0 {
					env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
					if err == nil && bytes.Contains(env, []byte("LISTEN_FDS=")) {
						t.Errorf("worker %d inherited LISTEN_FDS", p)
					}
				}
			}
			lcDeliverOnce(t, port, cmd, "activated", 20, 2)
			d.stop()
		})
	}
}

// lcNotifyListener listens on a unixgram socket for sd_notify messages.
type lcNotifyListener struct {
	path string
	c    *net.UnixConn
}

func lcListenNotify(t *testing.T) *lcNotifyListener {
	t.Helper()
	// sun_path is short: keep the path well under 108 bytes.
	dir, err := os.MkdirTemp("", "lcn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listening on %s: %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	return &lcNotifyListener{path: path, c: c}
}

// next returns the next message, or "" after timeout.
func (n *lcNotifyListener) next(timeout time.Duration) string {
	buf := make([]byte, 4096)
	n.c.SetReadDeadline(time.Now().Add(timeout))
	k, _, err := n.c.ReadFromUnix(buf)
	if err != nil {
		return ""
	}
	return string(buf[:k])
}

// lcMonotonicUsec is CLOCK_MONOTONIC in microseconds.
func lcMonotonicUsec() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano() / 1000
}

// TestLifecycleSdNotify: with NOTIFY_SOCKET set the daemon sends exactly
// READY=1 once it serves, RELOADING=1 with MONOTONIC_USEC= then READY=1
// on SIGHUP, and STOPPING=1 on SIGTERM, with one process and with workers.
func TestLifecycleSdNotify(t *testing.T) {
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("nsca_workers=%d", workers), func(t *testing.T) {
			t.Parallel()
			n := lcListenNotify(t)
			cmd := commandFile(t, t.TempDir())
			d := lcStart(t, lcCfg(cmd, lcWorkers(workers)), daemonOpts{env: []string{"NOTIFY_SOCKET=" + n.path}, noWait: true})
			msg := n.next(startTimeout)
			if msg != "READY=1" {
				t.Fatalf("first sd_notify message %q, want READY=1 within %v (exited: %v)", msg, startTimeout, d.p.hasExited())
			}
			// READY=1 promises the port serves now: one try, no retry.
			if err := lcServes(d.Port, 2*time.Second); err != nil {
				t.Errorf("after READY=1 the port does not serve: %v", err)
			}

			hupMono := lcMonotonicUsec()
			d.Signal(syscall.SIGHUP)
			msg = n.next(5 * time.Second)
			fields := strings.Split(msg, "\n")
			if len(fields) != 2 || fields[0] != "RELOADING=1" || !strings.HasPrefix(fields[1], "MONOTONIC_USEC=") {
				t.Errorf("sd_notify message after SIGHUP %q, want \"RELOADING=1\\nMONOTONIC_USEC=<n>\"", msg)
			} else if usec, err := strconv.ParseInt(strings.TrimPrefix(fields[1], "MONOTONIC_USEC="), 10, 64); err != nil || usec < hupMono-1000 || usec > lcMonotonicUsec() {
				t.Errorf("MONOTONIC_USEC=%s (%v), want CLOCK_MONOTONIC between %d (SIGHUP) and now", strings.TrimPrefix(fields[1], "MONOTONIC_USEC="), err, hupMono)
			}
			if msg := n.next(10 * time.Second); msg != "READY=1" {
				t.Errorf("sd_notify message after RELOADING=1: %q, want READY=1", msg)
			}
			if err := lcServes(d.Port, 2*time.Second); err != nil {
				t.Errorf("after the reload's READY=1 the port does not serve: %v", err)
			}
			want := lcSendAll(t, d.Port, lcPassword, "notify", 4, 1)
			waitFileLines(t, cmd, len(want))

			d.workers()
			d.Signal(syscall.SIGTERM)
			if msg := n.next(5 * time.Second); msg != "STOPPING=1" {
				t.Errorf("sd_notify message after SIGTERM %q, want STOPPING=1", msg)
			}
			d.waitExit0(stopTimeout)
			if msg := n.next(300 * time.Millisecond); msg != "" {
				t.Errorf("unexpected sd_notify message after STOPPING=1: %q", msg)
			}
		})
	}
}

// TestLifecycleWorkersDropPrivileges: as root with nsca_workers=2 and
// nsca_user=nobody, nsca_group=nogroup, every worker runs as 65534/65534
// while it writes results; an unknown user or group refuses to start with
// a message naming it. TestDropPrivileges covers one process.
func TestLifecycleWorkersDropPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change user")
	}
	t.Parallel()
	dir, cmd := sharedDir(t, "nsca-lc-privs-")
	cfg := lcCfg(cmd, Config{"nsca_workers": "2", "nsca_user": "nobody", "nsca_group": "nogroup"})
	d := lcStart(t, cfg, daemonOpts{dir: dir})
	// Every worker has dropped its privileges once the supervisor
	// announces that all serve.
	d.waitLog(regexp.MustCompile(`listening on .* 2 worker processes`), startTimeout)
	workers := d.waitWorkers(2, startTimeout)
	assertIDs := func(when string) {
		for _, w := range workers {
			assertNobody(t, w, fmt.Sprintf("%s: worker %d", when, w))
		}
	}
	assertIDs("before any check")
	t.Logf("supervisor %d runs as uid %v; workers %v", d.Pid(), procStatus(d.Pid(), "Uid:"), workers)
	want := lcSendAll(t, d.Port, lcPassword, "nobody", 20, 2)
	waitFileLines(t, cmd, len(want))
	assertIDs("after writing results")
	if now := d.workers(); !slices.Equal(now, workers) {
		t.Errorf("the workers changed from %v to %v while serving", workers, now)
	}
	lcAssertOnce(t, lcOutput(t, cmd), want)
	d.stop()

	for _, c := range []struct{ option, value, says string }{
		{"nsca_user", "lc-no-such-user", "no such user"},
		{"nsca_group", "lc-no-such-group", "no such group"},
	} {
		bad := listenConfig(merge(cfg, Config{c.option: c.value}), freePort(t))
		_, code, out := runDaemonExpectFailure(t, bad.text())
		if code == 0 {
			t.Errorf("%s=%s: the daemon exited 0, want a refusal", c.option, c.value)
		}
		if !strings.Contains(out, c.option+"="+c.value) || !strings.Contains(out, c.says) {
			t.Errorf("%s=%s: the daemon says %q, want a message with %q and %q", c.option, c.value, strings.TrimSpace(out), c.option+"="+c.value, c.says)
		}
	}
}

// lcSendBad makes n connections at once, each sending one whole packet
// with the wrong password; every one must get its init packet.
func lcSendBad(t *testing.T, port, n int, tag string) {
	t.Helper()
	var wg sync.WaitGroup
	results := make([]lcConnResult, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = lcSend(port, "wrong-password", lcChecks(tag, i, 0, 1))
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.dialErr != nil || r.initErr != nil {
			t.Fatalf("%s connection %d: connect %v, init packet %v", tag, i, r.dialErr, r.initErr)
		}
	}
}

// TestLifecycleRejectLogRateLimit: 50 wrong-password connections from
// 127.0.0.1 within a second log at most 5 (allowing 6) lines for that
// peer, at least one of them the rejection; the daemon still serves a good
// client; the next rejection after the 10-second window reports how many
// lines were suppressed.
func TestLifecycleRejectLogRateLimit(t *testing.T) {
	t.Parallel()
	cmd := commandFile(t, t.TempDir())
	d := lcStart(t, lcCfg(cmd, nil), daemonOpts{})
	const bad = 50
	burstStart := time.Now()
	lcSendBad(t, d.Port, bad, "bad")
	if took := time.Since(burstStart); took > time.Second {
		t.Logf("the %d bad connections took %v (meant to be within a second)", bad, took)
	}
	// The good client is served.
	want := lcSendAll(t, d.Port, lcPassword, "good", 1, 1)
	waitFileLines(t, cmd, len(want))
	// The next statistics line counts every rejection.
	lines, ok := waitLines(d.Stderr, lcStatsRe, 1, 7*time.Second)
	if !ok {
		t.Fatalf("no statistics line within 7 s")
	}
	last, _ := parseStats(lines[len(lines)-1])
	if n := last.dropped["bad_crc"] + last.dropped["bad_version"]; n != bad {
		t.Errorf("statistics count %d checks dropped for bad crc or version, want %d: %s", n, bad, last.line)
	}
	peerLines := grepLines(d.Stderr(), regexp.MustCompile(`^W.*127\.0\.0\.1`))
	rejections := grepLines(strings.Join(peerLines, "\n"), regexp.MustCompile(`(?i:crc|version)`))
	if len(peerLines) > 6 {
		t.Errorf("%d warning lines for 127.0.0.1 after %d bad connections within a second, want at most 6 (5 per 10 s):\n%s", len(peerLines), bad, strings.Join(peerLines, "\n"))
	}
	if len(rejections) == 0 {
		t.Errorf("none of the lines logged for 127.0.0.1 gives the rejection's reason (crc or version):\n%s", strings.Join(peerLines, "\n"))
	}
	counts := lcOutput(t, cmd)
	lcAssertOnce(t, counts, want)
	if len(counts) != 1 {
		t.Errorf("the command file has %d lines, want only the good client's", len(counts))
	}

	// After the window, the next rejection says how many were suppressed.
	time.Sleep(time.Until(burstStart.Add(10*time.Second + 300*time.Millisecond)))
	lcSendBad(t, d.Port, 1, "late")
	line := d.waitLog(regexp.MustCompile(`similar lines for 127\.0\.0\.1 suppressed`), 3*time.Second)
	m := regexp.MustCompile(`\((\d+) similar lines for 127\.0\.0\.1 suppressed\)`).FindStringSubmatch(line)
	if n, _ := strconv.Atoi(m[1]); n < bad-len(peerLines) {
		t.Errorf("the first line after the window says %d lines were suppressed, want at least %d: %s", n, bad-len(peerLines), line)
	}
	d.stop()
}

// TestLifecycleWrongPasswordNotShortPacket: a client with the wrong
// password that sends one whole 4304-byte packet and closes is rejected for
// its bad version or crc, once; the daemon must not also log and count a
// "short packet", which the client did not send. (The daemon frames a
// wrong-version connection in 720-byte pieces so as to reject it at once;
// the 704 bytes left over are not a short packet of a connection already
// rejected.) Besides being false, those lines use up the per-peer log
// budget before the rejection's real reason gets logged.
func TestLifecycleWrongPasswordNotShortPacket(t *testing.T) {
	t.Parallel()
	cmd := commandFile(t, t.TempDir())
	d := lcStart(t, lcCfg(cmd, nil), daemonOpts{})
	const bad = 20
	lcSendBad(t, d.Port, bad, "bad")
	time.Sleep(300 * time.Millisecond)
	d.stop()
	log := d.Stderr()
	drained := statsLines(log, "pipeline drained")
	if len(drained) != 1 {
		t.Fatalf("%d \"pipeline drained\" lines, want 1", len(drained))
	}
	dropped := drained[0].dropped
	if n := dropped["bad_crc"] + dropped["bad_version"]; n != bad {
		t.Errorf("%d checks dropped for bad crc or version, want %d: %s", n, bad, drained[0].line)
	}
	if dropped["short_packet"] != 0 {
		t.Errorf("%d of %d wrong-password connections, each of one whole packet, counted as short_packet: %s", dropped["short_packet"], bad, drained[0].line)
	}
	if short := grepLines(log, regexp.MustCompile(`dropped short packet`)); len(short) > 0 {
		t.Errorf("whole wrong-password packets logged as short packets:\n%s", strings.Join(short, "\n"))
	}
}

// TestLifecycleWorkersDieWithMain: SIGKILL to the main process of an
// nsca_workers=2 daemon leaves no worker running after 3 seconds, and
// nothing holds the port any more.
func TestLifecycleWorkersDieWithMain(t *testing.T) {
	t.Parallel()
	cmd := commandFile(t, t.TempDir())
	d := lcStart(t, lcCfg(cmd, lcWorkers(2)), daemonOpts{})
	workers := d.waitWorkers(2, startTimeout)
	want := lcSendAll(t, d.Port, lcPassword, "orphan", 4, 1)
	waitFileLines(t, cmd, len(want))
	d.Signal(syscall.SIGKILL)
	if !d.p.exitWithin(2 * time.Second) {
		t.Fatalf("the main process %d did not die of SIGKILL", d.Pid())
	}
	if left := waitGone(workers, 3*time.Second); len(left) > 0 {
		t.Fatalf("workers %v still run 3 s after the main process was killed", left)
	}
	// Nobody holds the listening socket: the port can be bound again.
	var err error
	for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(d.Port))); err == nil {
			l.Close()
			break
		}
		if time.Now().After(deadline) {
			out, _ := exec.Command("ss", "-ltnp", fmt.Sprintf("sport = :%d", d.Port)).CombinedOutput()
			t.Errorf("the port is still held after the workers ended: %v\n%s", err, out)
			break
		}
	}
}

// TestLifecycleSecondStartStealsNoConnections: while a daemon serves a
// burst of clients, repeated attempts to start a second daemon with the
// same configuration (an operator typing the start command again) are
// refused, and no client of the running daemon loses its connection
// before the init packet. A second start must not take a share of the
// running daemon's port (SO_REUSEPORT) before it finds the pid file held.
func TestLifecycleSecondStartStealsNoConnections(t *testing.T) {
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("nsca_workers=%d", workers), func(t *testing.T) {
			dir := t.TempDir()
			cmdFile := commandFile(t, dir)
			d := lcStart(t, lcCfg(cmdFile, merge(lcWorkers(workers), Config{"pid_file": filepath.Join(dir, "nsca.pid")})), daemonOpts{dir: dir})
			b := lcStartBurst(d.Port, 10, 1, lcPassword, "first")
			const attempts = 15
			var accepted int
			for i := range attempts {
				var out lockedBuffer
				p, err := startProc("nsca (second)", nscaCmd(dir, &out, "-c", d.CfgPath, "-f"))
				if err != nil {
					b.finish()
					t.Fatal(err)
				}
				if !p.exitWithin(startTimeout) {
					b.finish()
					t.Fatalf("attempt %d: a second daemon with the same configuration did not exit within %v:\n%s", i+1, startTimeout, out.String())
				}
				if p.state.Success() {
					accepted++
				}
			}
			conns := b.finish()
			if accepted > 0 {
				t.Errorf("%d of %d second starts exited 0, want refusals", accepted, attempts)
			}
			var lost []string
			var want []string
			for _, c := range conns {
				if c.res.dialErr != nil || c.res.initErr != nil {
					lost = append(lost, fmt.Sprintf("connect: %v, init packet: %v", c.res.dialErr, c.res.initErr))
				}
				if c.res.full {
					want = append(want, lcLines(c.checks)...)
				}
			}
			t.Logf("workers=%d: %d connections during %d refused second starts, %d lost before the init packet", workers, len(conns), attempts, len(lost))
			if len(lost) > 0 {
				t.Errorf("%d of %d connections to the running daemon were refused or reset before the init packet while second starts were refused, e.g. %q", len(lost), len(conns), lost[:min(3, len(lost))])
			}
			waitFileLines(t, cmdFile, len(want))
			lcAssertOnce(t, lcOutput(t, cmdFile), want)
			d.stop()
		})
	}
}

// TestLifecycleSecondDaemonSamePort: a second daemon started on the port
// a running one serves refuses to start with the same message whether they
// run one process or workers: without a pid file "address already in use",
// as the kernel says it for nsca_workers=0, and with one that the pid file
// is held. With workers and no pid file, both used to bind SO_REUSEPORT
// sockets, so the second started silently and took a share of the first
// one's clients.
func TestLifecycleSecondDaemonSamePort(t *testing.T) {
	for _, pidFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("pid_file=%v", pidFile), func(t *testing.T) {
			msgs := map[int]string{}
			for _, workers := range []int{0, 2} {
				t.Run(fmt.Sprintf("nsca_workers=%d", workers), func(t *testing.T) {
					msgs[workers] = lcSecondDaemon(t, workers, pidFile)
				})
			}
			if msgs[0] != msgs[2] {
				t.Errorf("the refusal differs: %q with nsca_workers=0, %q with workers", msgs[0], msgs[2])
			}
		})
	}
}

// lcSecondDaemon starts a daemon, then a second one with its
// configuration, and returns the second one's refusal, with the port,
// directory and pid in it made generic.
func lcSecondDaemon(t *testing.T, workers int, pidFile bool) string {
	dir := t.TempDir()
	cmdFile := commandFile(t, dir)
	cfg := lcCfg(cmdFile, lcWorkers(workers))
	want := "address already in use"
	if pidFile {
		cfg["pid_file"] = filepath.Join(dir, "nsca.pid")
		want = "already running"
	}
	d := lcStart(t, cfg, daemonOpts{dir: dir})
	if workers > 0 {
		d.waitWorkers(workers, startTimeout)
	}
	var out lockedBuffer
	p, err := startProc("nsca (second)", nscaCmd(dir, &out, "-c", d.CfgPath, "-f"))
	if err != nil {
		t.Fatal(err)
	}
	if !p.exitWithin(startTimeout) {
		p.terminate(stopTimeout)
		sent := lcSendAll(t, d.Port, lcPassword, "shared", 40, 1)
		t.Fatalf("a second daemon on port %d still runs after %v (the first took %d of %d connections):\n%s", d.Port, startTimeout, countLines(t, cmdFile), len(sent), out.String())
	}
	lines := grepLines(out.String(), regexp.MustCompile(`^nsca: `))
	t.Logf("second daemon: %v, %q", p.state, lines)
	if p.state.Success() || len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Errorf("second daemon exited %v saying %q; want a failure saying %q", p.state, lines, want)
	}
	lcDeliverOnce(t, d.Port, cmdFile, "first", 20, 1)
	d.stop()
	if len(lines) == 0 {
		return ""
	}
	msg := strings.ReplaceAll(lines[0], strconv.Itoa(d.Port), "PORT")
	msg = strings.ReplaceAll(msg, dir, "DIR")
	return regexp.MustCompile(`pid \d+`).ReplaceAllString(msg, "pid N")
}

// countLines is how many complete lines the file holds.
func countLines(t *testing.T, path string) int { return len(completeLines(readFile(t, path))) }

// TestLifecycleReloadSingleToWorkers: a SIGHUP whose configuration raises
// nsca_workers from 0 says that it takes effect at the next restart, and
// the daemon goes on serving, with the rest of the new configuration, in
// one process. It used to ignore the option without a word.
func TestLifecycleReloadSingleToWorkers(t *testing.T) {
	t.Parallel()
	cmd := commandFile(t, t.TempDir())
	cfg := lcCfg(cmd, lcWorkers(0))
	d := lcStart(t, cfg, daemonOpts{})
	cfg["nsca_workers"] = "2"
	cfg["password"] = "after-reload"
	d.rewriteConfig(cfg)
	d.Signal(syscall.SIGHUP)
	d.waitLog(regexp.MustCompile(`SIGHUP: configuration reloaded`), 10*time.Second)
	waits := grepLines(d.Stderr(), regexp.MustCompile(`nsca_workers=2 takes effect at the next restart`))
	t.Logf("log: %q", waits)
	if len(waits) != 1 {
		t.Errorf("%d log lines say nsca_workers=2 waits for a restart, want 1", len(waits))
	}
	if kids := childPIDs(d.Pid()); len(kids) != 0 {
		t.Errorf("the daemon has children %v after the reload, want none", kids)
	}
	want := lcSendAll(t, d.Port, "after-reload", "single", 10, 2)
	waitFileLines(t, cmd, len(want))
	lcAssertOnce(t, lcOutput(t, cmd), want)
	d.stop()
}
