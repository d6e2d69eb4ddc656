package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Rotation of the alternate dump file (issue 25): logrotate run on it
// while results arrive, the way cron runs it. Helpers here are prefixed
// rot.

// TestRotateSIGUSR1: SIGUSR1, which ends a process by default, makes the
// daemon (each worker, through the supervisor) open its files anew; it
// goes on serving, and the results sent after it reach the dump file.
func TestRotateSIGUSR1(t *testing.T) {
	for _, workers := range []int{0, 2} {
		t.Run("nsca_workers="+strconv.Itoa(workers), func(t *testing.T) {
			dir := t.TempDir()
			dump := filepath.Join(dir, "nsca.dump")
			d := startDaemon(t, relCfg(Config{"command_file": makeFIFO(t, dir), "alternate_dump_file": dump,
				"nsca_workers": strconv.Itoa(workers)}))
			cl := Client{Password: relPassword, Method: 1}
			cl.send(t, d.Port, "usr1-host\tbefore\t0\tbefore\n", 1)
			waitFileLines(t, dump, 1)
			// A hard link keeps the path naming the same file: only the
			// signal makes the daemon open it anew.
			if err := os.Link(dump, dump+".old"); err != nil {
				t.Fatal(err)
			}
			d.Signal(syscall.SIGUSR1)
			d.waitLog(regexp.MustCompile(`SIGUSR1: `), 10*time.Second)
			time.Sleep(200 * time.Millisecond)
			if d.p.hasExited() {
				t.Fatalf("the daemon exited on SIGUSR1: %v\n%s", d.p.state, d.Stderr())
			}
			for i := range 4 {
				cl.send(t, d.Port, fmt.Sprintf("usr1-host\tafter%d\t0\tafter\n", i), 1)
			}
			if lines := waitFileLines(t, dump, 5); len(lines) != 5 {
				t.Errorf("the dump file has %d lines, want 5", len(lines))
			}
		})
	}
}
