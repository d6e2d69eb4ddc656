package tests

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"nsca_fast/stages/emit/gearman"
)

// gmCollector is a worker on check_results as mod_gearman's result thread
// is one, that keeps grabbing through restarts of gearmand and records the
// seq of every result per service, in the order it got them.
type gmCollector struct {
	addr string
	mu   sync.Mutex
	seqs map[string][]int
	stop chan struct{}
	done chan struct{}
}

var gmSeq = regexp.MustCompile(`service_description=([^\n]+)\n(?s:.*)output=seq (\d+) `)

func startGmCollector(t *testing.T, addr string) *gmCollector {
	c := &gmCollector{addr: addr, seqs: map[string][]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	t.Cleanup(func() { close(c.stop); <-c.done })
	return c
}

func (c *gmCollector) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		c.session()
		time.Sleep(100 * time.Millisecond) // gearmand is down: dial again
	}
}

// session grabs jobs on one connection until it breaks or stop.
func (c *gmCollector) session() {
	conn, err := net.DialTimeout("tcp", c.addr, time.Second)
	if err != nil {
		return
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	if _, err := conn.Write(gmFrame(1, "check_results")); err != nil { // CAN_DO
		return
	}
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(gmFrame(9)); err != nil { // GRAB_JOB
			return
		}
		var h [12]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return
		}
		data := make([]byte, binary.BigEndian.Uint32(h[8:]))
		if _, err := io.ReadFull(r, data); err != nil {
			return
		}
		switch binary.BigEndian.Uint32(h[4:]) {
		case 10: // NO_JOB
			time.Sleep(10 * time.Millisecond)
		case 11: // JOB_ASSIGN
			args := bytes.SplitN(data, []byte{0}, 3)
			if _, err := conn.Write(gmFrame(13, string(args[0]), "")); err != nil { // WORK_COMPLETE
				return
			}
			plain, err := gearman.Open(nil, args[2])
			if m := gmSeq.FindSubmatch(plain); err == nil && m != nil {
				n, _ := strconv.Atoi(string(m[2]))
				c.mu.Lock()
				c.seqs[string(m[1])] = append(c.seqs[string(m[1])], n)
				c.mu.Unlock()
			}
		default:
			return
		}
	}
}

func (c *gmCollector) count() (n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.seqs {
		n += len(s)
	}
	return n
}

// sendServiceSeqs sends, through send_nsca, conns connections of perConn results
// each, one service per connection (prefix0, prefix1, ...), its results
// "seq 1 of ..." to "seq perConn of ...", which checkInOrder then checks.
func sendServiceSeqs(t *testing.T, cl Client, port int, host, prefix string, conns, perConn int) {
	t.Helper()
	for c := range conns {
		var in strings.Builder
		for seq := 1; seq <= perConn; seq++ {
			fmt.Fprintf(&in, "%s\t%s%d\t0\tseq %d of %s%d\x17", host, prefix, c, seq, prefix, c)
		}
		cl.send(t, port, in.String(), perConn)
	}
}

// checkInOrder checks that each of services (named prefix0, prefix1, ...)
// got the seqs 1..perService, once each and in order.
func (c *gmCollector) checkInOrder(t *testing.T, prefix string, services, perService int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range services {
		svc := fmt.Sprintf("%s%d", prefix, i)
		got := c.seqs[svc]
		ok := len(got) == perService
		for j := 0; ok && j < perService; j++ {
			ok = got[j] == j+1
		}
		if !ok {
			t.Errorf("%s: got seqs %v, want 1..%d once each, in order", svc, got, perService)
		}
	}
}

// TestDurableGearmanOutage: gearmand stopped and started again while
// results arrive at durableRate; a worker reading check_results gets every
// one, in order per service, none twice.
func TestDurableGearmanOutage(t *testing.T) {
	outage := durableOutage(t)
	gd := gmStartGearmand(t, 0)
	col := startGmCollector(t, gd.addr)
	svcs := durableServices()
	clientCfg := filepath.Join(t.TempDir(), "send_nsca.cfg")
	writeFile(t, clientCfg, "password="+relPassword+"\nencryption_method=1\n", 0o600)
	metrics := relMetricsAddr(t)
	d := startDaemon(t, relCfg(Config{"gearman_server": gd.addr, "gearman_encryption": "0", "gearman_timeout": "2",
		"queue_directory": filepath.Join(t.TempDir(), "queue"), "metrics_address": metrics,
		"alternate_dump_file": filepath.Join(t.TempDir(), "nsca.dump")}))
	s, stop := sending(t, d.Port, clientCfg, "dq-gearman", svcs)
	defer stop()
	time.Sleep(2 * time.Second)
	// gearmand keeps its queue in memory: what it accepted and no worker
	// took yet dies with it. Pause the clients until the worker has all,
	// so that only the outage is tested, not gearmand's own queue.
	stop()
	if !waitFor(10*time.Second, func() bool { return col.count() >= s.total() }) {
		t.Fatalf("the worker got %d of %d jobs before the outage", col.count(), s.total())
	}
	gd.stop()
	s2 := &durableSender{t: t, cl: s.cl, port: d.Port, host: s.host, services: svcs, sent: s.snapshot()}
	stop2, done2 := make(chan struct{}), make(chan struct{})
	go s2.run(stop2, done2)
	time.Sleep(outage)
	onDisk := durableMetric(t, metrics, `nsca_queue_disk_results{sink="gearman"}`)
	gd2 := gmStartGearmand(t, gd.port)
	time.Sleep(2 * time.Second)
	close(stop2)
	<-done2
	back := time.Now()
	sent := s2.snapshot()
	total := s2.total()
	var dups, missing, crossed int
	var problem string
	g := &graphite{}
	waitFor(60*time.Second, func() bool {
		col.mu.Lock()
		g.seqs = map[string][]int{}
		for svc, v := range col.seqs {
			g.seqs["dq-gearman!"+svc] = append([]int(nil), v...)
		}
		col.mu.Unlock()
		dups, missing, problem, crossed = g.checkRounds("dq-gearman", sent, durableRate/10/len(svcs))
		return missing == 0
	})
	t.Logf("%d results sent, %v on disk at the end of the outage, %d missing, %d duplicates, %d overtook an earlier connection's; all taken %v after the clients stopped",
		total, onDisk, missing, dups, crossed, time.Since(back).Round(100*time.Millisecond))
	if onDisk <= 0 {
		t.Errorf("nothing was queued on disk during the outage")
	}
	if missing > 0 {
		t.Errorf("%d of %d results never reached the worker", missing, total)
	}
	if problem != "" {
		t.Errorf("%s", problem)
	}
	if float64(dups) > 0.001*float64(total) {
		t.Errorf("%d duplicates of %d results: more than 0.1%%", dups, total)
	}
	d.Stop()
	gd2.stop()
}
