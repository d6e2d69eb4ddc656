package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Queue damage must not be silent (issue 23, item 4): a damaged region is
// logged once with its file, offset and the results it cost (or
// "unknown"), counted, and shown in the statistics line; a segment file
// removed under the running daemon too.

var damageRe = regexp.MustCompile(`durable queue damaged: (\S+) at offset (\d+) \((\d+) bytes\): ([^;]*); results lost: (\w+)`)

func damageBatch(host string, from, to int) string {
	var in strings.Builder
	for n := from; n <= to; n++ {
		fmt.Fprintf(&in, "%s\tsvc\t0\tseq %d|seq=%d\x17", host, n, n)
	}
	return in.String()
}

// TestQueueDamageReported cuts the header of a queued segment between two
// runs (no one can tell what it held: "unknown"), and removes a segment
// under the running daemon (its 100 results, undelivered when it stops:
// counted and logged).
func TestQueueDamageReported(t *testing.T) {
	g := startGraphite(t)
	i2 := startIcingaGraphite(t, g, Icinga2Host{"dq-dmg", []string{"svc"}})
	gt := startGate(t, fmt.Sprintf("127.0.0.1:%d", i2.port))
	gt.open.set(false)
	qdir := filepath.Join(t.TempDir(), "queue")
	metrics := relMetricsAddr(t)
	cfg := relCfg(i2Config(i2, filepath.Join(t.TempDir(), "nsca.dump"), Config{
		"icinga2_api_url": gt.url(), "queue_directory": qdir, "metrics_address": metrics, "icinga2_retries": "0", "stats_interval": "1"}))
	cl := Client{Password: relPassword, Method: 1}
	onDisk := func(want int) {
		t.Helper()
		if !waitFor(10*time.Second, func() bool {
			return durableMetric(t, metrics, `nsca_queue_disk_results{sink="icinga2"}`) == float64(want)
		}) {
			t.Fatalf("%v results on disk, want %d", durableMetric(t, metrics, `nsca_queue_disk_results{sink="icinga2"}`), want)
		}
	}
	segs := func() []string {
		s, _ := filepath.Glob(filepath.Join(qdir, "icinga2", "*.seg"))
		return s
	}

	// Run 1: 200 results queued, then the segment's header is cut.
	d := startDaemon(t, cfg)
	cl.send(t, d.Port, damageBatch("dq-dmg", 1, 200), 200)
	onDisk(200)
	d.Stop()
	if s := segs(); len(s) != 1 {
		t.Fatalf("segments %q", s)
	} else if err := os.Truncate(s[0], 10); err != nil {
		t.Fatal(err)
	}

	// Run 2: the cut is found at start; 100 more are queued, and their
	// segment is removed while the daemon runs; then Icinga comes back.
	d = startDaemon(t, cfg)
	cl.send(t, d.Port, damageBatch("dq-dmg", 201, 300), 100)
	onDisk(100)
	s := segs() // the cut one may not be removed yet
	if len(s) == 0 {
		t.Fatal("no segment")
	}
	if err := os.Remove(s[len(s)-1]); err != nil {
		t.Fatal(err)
	}
	cl.send(t, d.Port, damageBatch("dq-dmg", 301, 310), 10)
	onDisk(110)
	d.Stop()
	log := d.Stderr()
	// Run 3: Icinga is back; what is left is delivered.
	gt.open.set(true)
	d = startDaemon(t, cfg)
	if !waitFor(30*time.Second, func() bool {
		_, missing, _ := g.check("dq-dmg", map[string]int{"svc": 310})
		return missing <= 300
	}) {
		_, missing, _ := g.check("dq-dmg", map[string]int{"svc": 310})
		t.Fatalf("%d of 310 missing, want only the 300 damaged", missing)
	}
	d.Stop()
	dups, missing, _ := g.check("dq-dmg", map[string]int{"svc": 310})
	t.Logf("delivered: %d missing of 310 (300 damaged), %d duplicates", missing, dups)
	var cut, removed, noticed []string
	for _, m := range damageRe.FindAllStringSubmatch(log, -1) {
		t.Logf("logged: %s", m[0])
		switch {
		case m[2] == "0" && m[5] == "unknown" && strings.Contains(m[4], "header"):
			cut = append(cut, m[0])
		case strings.Contains(m[4], "removed while appended to") && m[5] == "unknown":
			noticed = append(noticed, m[0])
		case strings.Contains(m[4], "removed") && m[5] == "100":
			removed = append(removed, m[0])
		}
	}
	if len(cut) != 1 {
		t.Errorf("the cut header: %d lines (want 1) with offset 0 and results lost unknown", len(cut))
	}
	if len(noticed) != 1 {
		t.Errorf("the removal noticed by the writer: %d lines (want 1)", len(noticed))
	}
	if len(removed) != 1 {
		t.Errorf("the removed segment: %d lines (want 1) saying 100 results lost", len(removed))
	}
	final := grepLines(log, regexp.MustCompile(`\] pipeline drained: `))
	if len(final) == 0 || !strings.Contains(final[len(final)-1], "queue_lost{icinga2=100}") || !strings.Contains(final[len(final)-1], "queue_lost_unknown{icinga2=1}") {
		t.Errorf("the final statistics line does not show the loss: %q", final)
	}
}
