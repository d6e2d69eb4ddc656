package tests

import (
	"fmt"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// supStartedRe is the supervisor's line for a worker it started.
var supStartedRe = regexp.MustCompile(`started worker \d+ \(generation (\d+)\) pid (\d+)`)

// supKillNewWorker waits for the first worker of a generation after gen
// that the supervisor logs after offset in its log, and kills it with
// SIGKILL at once, most likely while it starts; it returns the
// generation and the log's length when it did.
func supKillNewWorker(t *testing.T, d *lcDaemon, offset, gen int) (int, int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		log := d.Stderr()
		for _, m := range supStartedRe.FindAllStringSubmatch(log[min(offset, len(log)):], -1) {
			g, _ := strconv.Atoi(m[1])
			pid, _ := strconv.Atoi(m[2])
			if g > gen {
				syscall.Kill(pid, syscall.SIGKILL)
				return g, len(log)
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no worker of a generation after %d started within 10 s:\n%s", gen, d.Stderr())
	return 0, 0
}

// TestSupervisorReloadAfterKill: a worker killed with kill -9, a SIGHUP at
// once after, and the first worker of the new generation killed as it
// starts. The reload is retried, not abandoned ("keeping the running
// configuration"): the new password is in force, the old one no longer
// is. It takes up to three rounds, each with a new password, for a kill to
// land before its worker serves.
func TestSupervisorReloadAfterKill(t *testing.T) {
	t.Parallel()
	cmd := commandFile(t, t.TempDir())
	cfg := lcCfg(cmd, lcWorkers(2))
	d := lcStart(t, cfg, daemonOpts{})
	old := d.waitWorkers(2, startTimeout)
	reloaded := regexp.MustCompile(`SIGHUP: configuration reloaded`)
	retried := regexp.MustCompile(`SIGHUP: .*exited during start-up.*trying the reload again`)
	password, gen, collided := lcPassword, 1, false
	for round := 1; round <= 3 && !collided; round++ {
		password = fmt.Sprintf("reloaded-after-kill-%d", round)
		cfg["password"] = password
		d.rewriteConfig(cfg)
		offset := len(d.Stderr())
		if round == 1 {
			if err := syscall.Kill(old[0], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
		d.Signal(syscall.SIGHUP)
		g, _ := supKillNewWorker(t, d, offset, gen)
		if _, ok := waitLines(d.Stderr, reloaded, round, 20*time.Second); !ok {
			t.Fatalf("round %d: the reload was not done within 20 s:\n%s", round, d.Stderr()[offset:])
		}
		gen = g
		for _, m := range supStartedRe.FindAllStringSubmatch(d.Stderr(), -1) {
			n, _ := strconv.Atoi(m[1])
			gen = max(gen, n)
		}
		collided = len(grepLines(d.Stderr()[offset:], retried)) > 0
	}
	if !collided {
		t.Skipf("in three rounds no kill landed before its worker served:\n%s", d.Stderr())
	}
	d.waitWorkers(2, 10*time.Second)
	// The previous password's checks are dropped (they do not decrypt);
	// those of the new one arrive, each once.
	for i := range 4 {
		lcSend(d.Port, lcPassword, lcChecks("stale", 0, i, 1))
	}
	want := lcSendAll(t, d.Port, password, "fresh", 4, 3)
	waitFileLines(t, cmd, len(want))
	time.Sleep(200 * time.Millisecond)
	counts := lcOutput(t, cmd)
	lcAssertOnce(t, counts, want)
	if len(counts) != len(want) {
		t.Errorf("%d lines in the command file, want the %d sent with the new password", len(counts), len(want))
	}
	if bad := grepLines(d.Stderr(), regexp.MustCompile(`keeping the running configuration`)); len(bad) > 0 {
		t.Errorf("a reload was abandoned: %q", bad)
	}
	for _, l := range grepLines(d.Stderr(), regexp.MustCompile(`trying the reload again|configuration reloaded|died`)) {
		t.Logf("%s", l)
	}
	d.stop()
}
