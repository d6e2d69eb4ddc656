package tests

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDurableReadOnlyQueueAtStart: a daemon restarted while its
// queue_directory is on a read-only file system (ext4's errors=remount-ro,
// here a tmpfs remounted read-only, which stops root too) serves as a
// running daemon whose queue fails does: it logs that the queue cannot be
// used, and what gearmand does not take goes to the fallback (the dump
// file, counted in fell_back). Once the file system is writable again the
// queue opens by itself, and what it held from before the restart is
// delivered when gearmand is back, in order, once.
func TestDurableReadOnlyQueueAtStart(t *testing.T) {
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("nsca_workers=%d", workers), func(t *testing.T) {
			testReadOnlyQueueAtStart(t, workers)
		})
	}
}

func testReadOnlyQueueAtStart(t *testing.T, workers int) {
	const conns, perConn = 2, 10
	queueDir := fdMount(t, "1m")
	remount := func(flags uintptr) {
		t.Helper()
		if err := syscall.Mount("tmpfs", queueDir, "tmpfs", syscall.MS_REMOUNT|flags, "size=1m"); err != nil {
			t.Fatalf("remount %s (flags %#x): %v", queueDir, flags, err)
		}
	}
	gmPort := freePort(t)
	dump := filepath.Join(t.TempDir(), "nsca.dump")
	cfg := relCfg(Config{"gearman_server": "127.0.0.1:" + strconv.Itoa(gmPort), "gearman_encryption": "0",
		"gearman_timeout": "1", "queue_directory": queueDir, "alternate_dump_file": dump,
		"nsca_workers": strconv.Itoa(workers)})
	clientCfg := filepath.Join(t.TempDir(), "send_nsca.cfg")
	writeFile(t, clientCfg, "password="+relPassword+"\nencryption_method=1\n", 0o600)
	cl := Client{CfgPath: clientCfg}

	// gearmand is down: the results are queued on disk.
	d := startDaemon(t, cfg)
	sendServiceSeqs(t, cl, d.Port, "ro-host", "q", conns, perConn)
	d.Stop()
	if segs, _ := filepath.Glob(filepath.Join(queueDir, "gearman*", "*.seg")); len(segs) == 0 {
		t.Fatalf("nothing queued in %s while gearmand was down", queueDir)
	}

	remount(syscall.MS_RDONLY)
	d = startDaemon(t, cfg)
	unusable := regexp.MustCompile(`gearman: durable queue \S+/gearman\S* cannot be used: .*read-only file system; serving without it: what gearman does not take goes to its fallback`)
	d.waitLog(unusable, 10*time.Second)
	sendServiceSeqs(t, cl, d.Port, "ro-host", "r", conns, perConn)
	lines := waitFileLines(t, dump, conns*perConn)
	want := map[string]bool{}
	for c := range conns {
		for seq := 1; seq <= perConn; seq++ {
			want[fmt.Sprintf("ro-host;r%d;0;seq %d of r%d", c, seq, c)] = true
		}
	}
	for _, l := range lines {
		_, cmd, _ := strings.Cut(l, "] PROCESS_SERVICE_CHECK_RESULT;")
		if !want[cmd] {
			t.Errorf("the dump file has %q: not one of the results sent while the queue was read-only, or twice", l)
		}
		delete(want, cmd)
	}
	if len(want) > 0 {
		t.Errorf("%d results sent while the queue was read-only are not in the dump file", len(want))
	}

	remount(0)
	d.waitLog(regexp.MustCompile(`gearman: durable queue \S+ open now`), 45*time.Second)
	gd := gmStartGearmand(t, gmPort)
	col := startGmCollector(t, gd.addr)
	if !waitFor(30*time.Second, func() bool { return col.count() >= conns*perConn }) {
		t.Errorf("the worker got %d of the %d results queued before the restart", col.count(), conns*perConn)
	}
	time.Sleep(300 * time.Millisecond) // let duplicates, if any, arrive
	col.checkInOrder(t, "q", conns, perConn)
	if n := col.count(); n != conns*perConn {
		t.Errorf("the worker got %d results, want the %d queued before the restart", n, conns*perConn)
	}
	d.Stop()
	stopped := regexp.MustCompile(`stopped: .*fell_back\{([^}]*)\}`).FindStringSubmatch(d.Stderr())
	if stopped == nil || !strings.Contains(stopped[1], fmt.Sprintf("gearman=%d", conns*perConn)) {
		t.Errorf("the last statistics line says fell_back{%v}, want gearman=%d", stopped, conns*perConn)
	}
	if len(completeLines(readFile(t, dump))) != conns*perConn {
		t.Errorf("the dump file has more than the %d results sent while the queue was read-only", conns*perConn)
	}
}
