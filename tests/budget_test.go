package tests

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// budgetRSS is the resident set of pid in bytes, from /proc/PID/status.
func budgetRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// budgetSend is a patient client: it waits up to 60 s for the init packet
// (a daemon under a backlog leaves it in the listen queue), sends its
// checks at once, half-closes and waits for the server's close.
func budgetSend(port int, checks []rawCheck) error {
	c, err := dialLocal(port, "", 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	rc, err := readInit(c, 60*time.Second)
	if err != nil {
		return err
	}
	if _, err := c.Write(rc.packets(lcPassword, checks)); err != nil {
		return err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n > 0 || !errors.Is(err, io.EOF) {
		return fmt.Errorf("waiting for the server to close: %d bytes, %v", n, err)
	}
	return nil
}

// TestRelReadBudgetBoundsMemory: 1,000 connections each send 64 KiB of
// checks (15 packets) while the core reads nothing from the command FIFO.
// The daemon stops reading what it cannot pass on, so the backlog stays in
// the kernel and RSS stays bounded; once the core reads again every check
// arrives, once.
func TestRelReadBudgetBoundsMemory(t *testing.T) {
	relRaiseNofile(t, 8192)
	_, fifo, core := relFIFO(t, true)
	core.Pause()
	d := startDaemon(t, lcCfg(fifo, nil))
	const conns, perConn = 1000, 15
	var want []string
	var wg sync.WaitGroup
	var failed atomic.Int32
	var firstErr atomic.Value
	for i := range conns {
		checks := lcChecks("budget", i%100, i, perConn)
		want = append(want, lcLines(checks)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := budgetSend(d.Port, checks); err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
		}()
	}
	var peak int64
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		peak = max(peak, budgetRSS(d.Pid()))
	}
	core.Resume()
	sent := make(chan struct{})
	go func() { wg.Wait(); close(sent) }()
	for waiting := true; waiting; {
		select {
		case <-sent:
			waiting = false
		case <-time.After(50 * time.Millisecond):
			peak = max(peak, budgetRSS(d.Pid()))
		case <-time.After(90 * time.Second):
			t.Fatalf("the clients did not finish within 90 s")
		}
	}
	core.Quiet(300*time.Millisecond, 20*time.Second)
	counts := map[string]int{}
	for _, l := range core.Lines() {
		if m := commandLine.FindStringSubmatch(l); m != nil {
			counts[m[2]]++
		}
	}
	t.Logf("%d connections x %d checks (%d KiB each) into a stalled core: peak RSS %.1f MB; %d clients failed; %d lines delivered",
		conns, perConn, perConn*packetSize>>10, float64(peak)/(1<<20), failed.Load(), len(counts))
	if n := failed.Load(); n > 0 {
		t.Errorf("%d clients were not served to the end, e.g. %v", n, firstErr.Load())
	}
	lcAssertOnce(t, counts, want)
	if peak > 64<<20 {
		t.Errorf("peak RSS %.1f MB with the core stalled, want under 64 MB", float64(peak)/(1<<20))
	}
}
