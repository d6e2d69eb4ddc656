package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNscaNGOkayOnlyWhenDeliverable: with a regular command file on a
// full tmpfs and no other destination, nsca-ng clients are told FAIL with
// the reason instead of OKAY for results nothing can take (before, 128,000
// were answered OKAY and 123,896 of them dropped); what was dropped after
// an OKAY is bounded by what was queued when the disk filled; once space
// comes back, results are taken again without a restart.
func TestNscaNGOkayOnlyWhenDeliverable(t *testing.T) {
	ngExtract(t, false) // skips (or in CI fails) where nsca-ng cannot run
	disk := fdMount(t, "256k")
	cmd := filepath.Join(disk, "nagios.cmd")
	writeFile(t, cmd, "", 0o644)
	dir := t.TempDir()
	ids := filepath.Join(dir, "nsca-ng.cfg")
	writeFile(t, ids, ngIdentities(cmd, 0), 0o600)
	d, ngPort, metrics := ngStartDaemon(t, dir, cmd, ids, Config{"append_to_file": "1"})
	output := strings.Repeat("x", 1000)
	push := func(n int, tag string) (okays, fails int, lastFail string) {
		reqs := []string{"MOIN 1 full" + tag}
		for i := 0; i < n; i++ {
			data := fmt.Sprintf("[%d] PROCESS_SERVICE_CHECK_RESULT;web1;disk;0;%s %d %s\n", time.Now().Unix(), tag, i, output)
			reqs = append(reqs, "PUSH "+strconv.Itoa(len(data)), data)
		}
		for _, a := range ngOpenSSL(t, ngPort, append(reqs, "QUIT")) {
			switch {
			case a == "OKAY":
				okays++
			case strings.HasPrefix(a, "FAIL"):
				fails++
				lastFail = a
			}
		}
		// Each PUSH line and the QUIT are answered OKAY too.
		return okays - n - 1, fails, lastFail
	}
	okays, fails, lastFail := push(600, "full")
	if fails == 0 {
		t.Fatalf("600 results of 1 KB into a 256 KB file system: every one answered OKAY")
	}
	if !strings.Contains(lastFail, "no space left on device") {
		t.Errorf("the FAIL says %q, want the reason (no space left on device)", lastFail)
	}
	m, _ := relScrape(metrics)
	down, lost := m[`nsca_results_dropped_total{reason="destination_down"}`], m[`nsca_results_dropped_total{reason="sink_failed"}`]
	if down != float64(fails) {
		t.Errorf("dropped{destination_down} = %v, want the %d FAILs", down, fails)
	}
	// OKAY means on the emit stage's queue while the file could be
	// written: what was queued when it filled is all that can be lost.
	if lost > 128+256 {
		t.Errorf("dropped{sink_failed} = %v after an OKAY, want at most queue_size + a batch (384); %d OKAYs", lost, okays)
	}
	written := len(completeLines(readFile(t, cmd)))
	if err := os.Truncate(cmd, 0); err != nil {
		t.Fatal(err)
	}
	var again int
	if !waitFor(10*time.Second, func() bool {
		again, _, _ = push(1, "back")
		return again == 1
	}) {
		t.Fatalf("10 s after the file system had room again, a result is still refused")
	}
	if !waitFor(5*time.Second, func() bool { return strings.Contains(readFile(t, cmd), "back 0 ") }) {
		t.Errorf("the result taken after the space came back is not in the command file")
	}
	d.Stop()
	t.Logf("%d results answered OKAY, %d written before the disk filled, %d answered FAIL (the last: %q), %v dropped after OKAY", okays, written, fails, lastFail, lost)
}
