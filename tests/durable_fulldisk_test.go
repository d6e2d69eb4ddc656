package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDurableFullDiskRestarts (issue 23, item 2): the durable queue fills a
// small real tmpfs while Icinga is unreachable (the rest goes to the dump
// fallback), Icinga comes back and the queue drains; then the daemon is
// restarted three times. No result may reach Icinga twice, and the space of
// the drained queue must come back.
func TestDurableFullDiskRestarts(t *testing.T) {
	root := fdMount(t, "256k")
	g := startGraphite(t)
	i2 := startIcingaGraphite(t, g, Icinga2Host{"dq-full", []string{"svc"}})
	gt := startGate(t, fmt.Sprintf("127.0.0.1:%d", i2.port))
	gt.open.set(false)
	dump := filepath.Join(t.TempDir(), "nsca.dump")
	metrics := relMetricsAddr(t)
	cfg := relCfg(i2Config(i2, dump, Config{
		"icinga2_api_url": gt.url(), "queue_directory": filepath.Join(root, "queue"), "metrics_address": metrics, "icinga2_retries": "0"}))
	cl := Client{Password: relPassword, Method: 1}
	const sent = 1500
	pad := strings.Repeat("x", 300)
	d := startDaemon(t, cfg)
	for b := 0; b < sent/100; b++ {
		var in strings.Builder
		for n := b*100 + 1; n <= b*100+100; n++ {
			fmt.Fprintf(&in, "dq-full\tsvc\t0\tseq %d %s|seq=%d\x17", n, pad, n)
		}
		cl.send(t, d.Port, in.String(), 100)
	}
	dumped := func() int {
		b, _ := os.ReadFile(dump)
		return strings.Count(string(b), "PROCESS_SERVICE_CHECK_RESULT;dq-full;svc;")
	}
	diskResults := func() float64 { return durableMetric(t, metrics, `nsca_queue_disk_results{sink="icinga2"}`) }
	queued := 0
	if !waitFor(30*time.Second, func() bool {
		queued = int(diskResults())
		return queued > 0 && queued+dumped() == sent
	}) {
		t.Fatalf("%v results on disk and %d in the dump file, want %d in all", diskResults(), dumped(), sent)
	}
	var st syscall.Statfs_t
	syscall.Statfs(root, &st)
	t.Logf("queued %d results on the full tmpfs (%d bytes free), %d went to the dump file", queued, int64(st.Bavail)*st.Bsize, sent-queued)
	gt.open.set(true)
	delivered := func() int {
		_, missing, _ := g.check("dq-full", map[string]int{"svc": sent})
		return sent - missing
	}
	if !waitFor(60*time.Second, func() bool { return diskResults() == 0 && delivered() == queued }) {
		t.Fatalf("%v results left on disk, %d of %d delivered", diskResults(), delivered(), queued)
	}
	d.Stop()
	syscall.Statfs(root, &st)
	free := int64(st.Bavail) * st.Bsize
	t.Logf("after the drain: %d bytes free", free)
	if free < 200<<10 {
		t.Errorf("%d bytes free on the 256k tmpfs after the drain: the drained queue's space did not come back", free)
	}
	for restart := 1; restart <= 3; restart++ {
		d = startDaemon(t, cfg)
		// Time for the drainer to deliver whatever the queue still holds.
		waitFor(4*time.Second, func() bool {
			return durableMetric(t, metrics, `nsca_queue_replayed_total{sink="icinga2"}`) > 0
		})
		time.Sleep(time.Second)
		d.Stop()
		dups, _, _ := g.check("dq-full", map[string]int{"svc": sent})
		t.Logf("after restart %d: %d duplicates", restart, dups)
	}
	if dups, _, _ := g.check("dq-full", map[string]int{"svc": sent}); dups != 0 {
		t.Errorf("%d results delivered twice over 3 restarts (%d were queued)", dups, queued)
	}
}
