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

// TestReloadFewerWorkersDeliversQueues: three workers queue results on
// disk while gearmand is down; SIGHUP then lowers nsca_workers to 1. The
// remaining worker takes over the queues of the two slots that are gone,
// and once gearmand is up, a worker on check_results gets every result
// exactly once, in order per connection. Before, what slots 1 and 2 had
// queued stayed on disk for good.
func TestReloadFewerWorkersDeliversQueues(t *testing.T) {
	const conns, perConn = 30, 10
	gmPort := freePort(t)
	queueDir := filepath.Join(t.TempDir(), "queue")
	clientCfg := filepath.Join(t.TempDir(), "send_nsca.cfg")
	writeFile(t, clientCfg, "password="+relPassword+"\nencryption_method=1\n", 0o600)
	cfg := func(workers int) Config {
		return relCfg(Config{"gearman_server": "127.0.0.1:" + strconv.Itoa(gmPort), "gearman_encryption": "0",
			"gearman_timeout": "2", "queue_directory": queueDir, "nsca_workers": strconv.Itoa(workers),
			"nsca_workers_spread": "always",
			"alternate_dump_file": filepath.Join(t.TempDir(), "nsca.dump")})
	}
	d := startDaemon(t, cfg(3))
	old := d.waitWorkers(3, 10*time.Second)

	// One service per connection: its results are queued by one worker,
	// so their order is known. New connections spread over the three
	// SO_REUSEPORT sockets by their source ports.
	cl := Client{CfgPath: clientCfg}
	sendServiceSeqs(t, cl, d.Port, "dq-slots", "c", conns, perConn)
	// A queue's directory exists from its start; a segment file only once
	// it stored a result.
	for slot := range 3 {
		if segs, _ := filepath.Glob(filepath.Join(queueDir, fmt.Sprintf("gearman-%d", slot), "*.seg")); len(segs) == 0 {
			t.Fatalf("worker slot %d queued nothing in %s: the test needs all three to have queued", slot, queueDir)
		}
	}

	d.rewriteConfig(cfg(1))
	d.Signal(syscall.SIGHUP)
	d.waitLog(regexp.MustCompile(`SIGHUP: configuration reloaded`), 20*time.Second)
	d.waitWorkers(1, 30*time.Second, old...)
	for slot := 1; slot <= 2; slot++ {
		d.waitLog(regexp.MustCompile(fmt.Sprintf(`gearman: took over \d+ results queued in \S+/gearman-%d by a removed worker slot`, slot)), 20*time.Second)
		dir := filepath.Join(queueDir, fmt.Sprintf("gearman-%d", slot))
		if !waitFor(5*time.Second, func() bool { _, err := os.Stat(dir); return os.IsNotExist(err) }) {
			t.Errorf("the emptied queue %s is still there", dir)
		}
	}

	gd := gmStartGearmand(t, gmPort)
	col := startGmCollector(t, gd.addr)
	if !waitFor(60*time.Second, func() bool { return col.count() >= conns*perConn }) {
		t.Errorf("the worker got %d of %d results", col.count(), conns*perConn)
	}
	time.Sleep(500 * time.Millisecond) // let duplicates, if any, arrive
	col.checkInOrder(t, "c", conns, perConn)
	d.Stop()
}
