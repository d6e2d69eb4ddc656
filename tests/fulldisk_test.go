package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Full-disk tests (issue 11, items 3-5): the spool, the dump file and a
// regular command file on a real small tmpfs. When the file system fills,
// the counters must equal what is in the files, no line may be partial or
// fused with another, nothing may be delivered twice, every drop is logged
// with its cause, and everything resumes when space returns. Helpers here
// are prefixed fd. The daemons run with GOGC=1 (see lifecycleGOGC).

// fdMount mounts a tmpfs of the given size on a new directory and unmounts
// it when the test ends (after the daemon, started later, has stopped); it
// skips the test when it cannot mount (not root, a container without the
// right).
func fdMount(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("skipped: cannot mount a %s tmpfs for a full-disk test (needs root): %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// fdFiller takes about size bytes of dir's file system with a file, so the
// test can give that space back later by removing it.
func fdFiller(t *testing.T, dir string, size int) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// fdOutput pads each check's output so that a few hundred fill the disk.
var fdOutput = strings.Repeat("x", 300)

// fdSend sends n checks with ids prefix-000000.., per checks a connection,
// four connections at a time, and returns their ids.
func fdSend(t *testing.T, port int, prefix string, n, per int) []string {
	t.Helper()
	return relParallel(t, (n+per-1)/per, 4, "connection", func(c int) ([]string, error) {
		var checks []rawCheck
		var ids []string
		for i := c * per; i < min((c+1)*per, n); i++ {
			id := fmt.Sprintf("%s-%06d", prefix, i)
			checks = append(checks, rawCheck{0, "fdhost", "svc", relOutput(id, fdOutput)})
			ids = append(ids, id)
		}
		return ids, relSend(port, "", checks)
	})
}

// fdLines reads a command or dump file and returns the ids of its lines;
// it fails the test for a partial line at the end or a line that is not
// one whole result (two fused, or a fragment).
func fdLines(t *testing.T, path string) []string {
	t.Helper()
	text := readFile(t, path)
	if text != "" && !strings.HasSuffix(text, "\n") {
		tail := text[strings.LastIndexByte(text, '\n')+1:]
		t.Errorf("%s ends in a partial line: %q", path, abbrev(tail))
	}
	ids, bad := relLineIDs(completeLines(text))
	if len(bad) > 0 {
		t.Errorf("%s: %d lines that are not one whole result (partial or fused), e.g. %q", path, len(bad), abbrev(bad[0]))
	}
	return ids
}

// fdSpool returns the ids of the results in a spool directory, failing
// the test for a result file without its .ok (the core never reads it,
// and a fallback may hold a second copy) or a temporary file left behind.
func fdSpool(t *testing.T, dir string) []string {
	t.Helper()
	entries, names := readDirNames(t, dir)
	for _, e := range entries {
		n := e.Name()
		switch {
		case spoolName.MatchString(n) && !names[n+".ok"]:
			t.Errorf("%s: result file %s has no .ok", dir, n)
		case strings.HasPrefix(n, "t") && len(n) == 7:
			t.Errorf("%s: temporary file %s left behind", dir, n)
		}
	}
	ids, _ := relSpoolIDs(t, dir)
	return ids
}

// fdSettled waits until the daemon has counted every check sent so far
// (received = want) and is idle, and returns its metrics.
func fdSettled(t *testing.T, metrics string, want int) map[string]float64 {
	t.Helper()
	return relMetricsBalanced(t, metrics, func(m map[string]float64) string {
		if got := m[`nsca_stage_items_total{stage="decrypt"}`]; got != float64(want) {
			return fmt.Sprintf("received %v of %d", got, want)
		}
		return ""
	})
}

// fdCheckCounts compares a destination's counters with what its files hold.
func fdCheckCounts(t *testing.T, m map[string]float64, sink string, inFiles int) {
	t.Helper()
	if got := m[`nsca_results_emitted_total{sink="`+sink+`"}`]; got != float64(inFiles) {
		t.Errorf(`nsca_results_emitted_total{sink="%s"} = %v, but the files hold %d results`, sink, got, inFiles)
	}
}

// fdPart is one destination of a full-disk test: its sink label in the
// metrics, the name the messages give it, and the results its files hold.
type fdPart struct {
	sink, what string
	results    []string
}

// fdSplit checks the results sent while one destination filled and the one
// behind it took the rest: the counters match the files, every result is
// in exactly one of them, and each of them holds some.
func fdSplit(t *testing.T, m map[string]float64, sent []string, full, behind fdPart) {
	t.Helper()
	fdCheckCounts(t, m, full.sink, len(full.results))
	fdCheckCounts(t, m, behind.sink, len(behind.results))
	if missing := relOnce(t, sent, map[string][]string{full.what: full.results, behind.what: behind.results}); len(missing) > 0 {
		t.Errorf("%d results in neither the %s nor the %s, e.g. %v", len(missing), full.what, behind.what, missing[:min(5, len(missing))])
	}
	if len(full.results) == 0 || len(behind.results) == 0 {
		t.Errorf("%d results in the %s and %d in the %s: want the %s to fill and the %s to take the rest",
			len(full.results), full.what, len(behind.results), behind.what, full.what, behind.what)
	}
	t.Logf("%s full: %d sent, %d in the %s, %d in the %s, counters emitted{%s=%v,%s=%v} fell_back{%s=%v}",
		full.what, len(sent), len(full.results), full.what, len(behind.results), behind.what,
		full.sink, m[`nsca_results_emitted_total{sink="`+full.sink+`"}`], behind.sink, m[`nsca_results_emitted_total{sink="`+behind.sink+`"}`],
		full.sink, m[`nsca_sink_fallbacks_total{sink="`+full.sink+`"}`])
}

// fdCauseLogged checks that drops were logged with the cause, ENOSPC.
func fdCauseLogged(t *testing.T, d *Daemon, sink string) {
	t.Helper()
	re := regexp.MustCompile(`dropped check host="fdhost" service="svc": no sink could take it: .*` + sink + `: .*no space left on device`)
	if len(grepLines(d.Stderr(), re)) == 0 {
		t.Errorf("no drop line names its cause (%s: no space left on device), want one matching %q", sink, re)
	}
}

// fdDrained stops the daemon and checks its final line against the files.
func fdDrained(t *testing.T, d *Daemon, sent int, inFiles map[string]int) {
	t.Helper()
	d.Signal(syscall.SIGTERM)
	d.Stop()
	dr := relParseDrained(t, d.Stderr())
	if dr.received != uint64(sent) {
		t.Errorf("received=%d, want %d sent: %s", dr.received, sent, dr.line)
	}
	for sink, n := range inFiles {
		if dr.emitted[sink] != uint64(n) {
			t.Errorf("emitted{%s=%d}, but the files hold %d: %s", sink, dr.emitted[sink], n, dr.line)
		}
	}
	t.Logf("%d sent; final counters: emitted%v dropped%v", sent, dr.emitted, dr.dropped)
}

// TestFullDiskDump: the command file is missing, results go to the dump
// file, and its file system fills. What the counters say was emitted is
// exactly what is in the file, in whole lines; the rest is dropped with
// ENOSPC as the logged cause; once space returns, the dump file takes
// results again, the first on a line of its own.
func TestFullDiskDump(t *testing.T) {
	fs := fdMount(t, "256k")
	free := fdFiller(t, fs, 64<<10)
	dump := filepath.Join(fs, "nsca.dump")
	metrics := relMetricsAddr(t)
	d := startDaemon(t, relCfg(Config{"command_file": filepath.Join(fs, "nagios.cmd"), "alternate_dump_file": dump, "metrics_address": metrics}))

	const first = 2000
	sent := fdSend(t, d.Port, "a", first, 50)
	m := fdSettled(t, metrics, first)
	ids := fdLines(t, dump)
	fdCheckCounts(t, m, "dump_file", len(ids))
	dropped := m[`nsca_results_dropped_total{reason="sink_failed"}`]
	if len(ids) == 0 || len(ids) == first || float64(len(ids))+dropped != first {
		t.Errorf("%d of %d results in the dump file and %v dropped: want some of each, adding up to what was sent", len(ids), first, dropped)
	}
	t.Logf("disk full: %d sent, %d in the dump file, counters emitted=%v dropped=%v", first, len(ids), m[`nsca_results_emitted_total{sink="dump_file"}`], dropped)
	fdCauseLogged(t, d, "dump_file")

	// Space returns: everything sent now arrives, each on its own line.
	free()
	const second = 100
	sent = append(sent, fdSend(t, d.Port, "b", second, 10)...)
	m = fdSettled(t, metrics, first+second)
	all := fdLines(t, dump)
	if got := len(all) - len(ids); got != second {
		t.Errorf("%d of the %d results sent after space returned reached the dump file", got, second)
	}
	if missing := relOnce(t, sent, map[string][]string{"dump": all}); len(missing) != int(m[`nsca_results_dropped_total{reason="sink_failed"}`]) {
		t.Errorf("%d results missing from the dump file, but %v counted as dropped", len(missing), m[`nsca_results_dropped_total{reason="sink_failed"}`])
	}
	fdDrained(t, d, first+second, map[string]int{"dump_file": len(all)})
}

// TestFullDiskSpool: check_result_path fills; the dump file, on another
// file system, takes what the spool cannot. Every result is in one place
// exactly once, no result file lacks its .ok, the counters match the
// files, and once space returns the spool takes results again.
func TestFullDiskSpool(t *testing.T) {
	fs := fdMount(t, "192k")
	spool := filepath.Join(fs, "spool")
	if err := os.Mkdir(spool, 0o755); err != nil {
		t.Fatal(err)
	}
	free := fdFiller(t, fs, 64<<10)
	dump := filepath.Join(t.TempDir(), "nsca.dump")
	metrics := relMetricsAddr(t)
	d := startDaemon(t, relCfg(Config{"check_result_path": spool, "alternate_dump_file": dump, "metrics_address": metrics}))

	const first = 300
	sent := fdSend(t, d.Port, "a", first, 20)
	m := fdSettled(t, metrics, first)
	inSpool, inDump := fdSpool(t, spool), fdLines(t, dump)
	fdSplit(t, m, sent, fdPart{"spool", "spool", inSpool}, fdPart{"dump_file", "dump file", inDump})
	if len(grepLines(d.Stderr(), regexp.MustCompile(`results not written to spool, trying .*nsca\.dump: sink: spool: .*no space left on device`))) == 0 {
		t.Errorf("the fallback from the spool is not logged with its cause (no space left on device)")
	}

	// Space returns: the spool takes results again.
	free()
	const second = 10
	sent = append(sent, fdSend(t, d.Port, "b", second, 5)...)
	fdSettled(t, metrics, first+second)
	spoolAfter, dumpAfter := fdSpool(t, spool), fdLines(t, dump)
	if got := len(spoolAfter) - len(inSpool); got != second {
		t.Errorf("%d of the %d results sent after space returned went to the spool (the dump file got %d)", got, second, len(dumpAfter)-len(inDump))
	}
	if missing := relOnce(t, sent, map[string][]string{"spool": spoolAfter, "dump": dumpAfter}); len(missing) > 0 {
		t.Errorf("%d results lost, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	fdDrained(t, d, first+second, map[string]int{"spool": len(spoolAfter), "dump_file": len(dumpAfter)})
}

// TestFullDiskSpoolNoFallback: a full spool with nothing behind it drops
// results, and the drop lines say why (ENOSPC), not just that no sink
// could take them.
func TestFullDiskSpoolNoFallback(t *testing.T) {
	fs := fdMount(t, "64k")
	metrics := relMetricsAddr(t)
	d := startDaemon(t, relCfg(Config{"check_result_path": fs, "metrics_address": metrics}))
	const n = 100
	fdSend(t, d.Port, "a", n, 20)
	m := fdSettled(t, metrics, n)
	inSpool := fdSpool(t, fs)
	fdCheckCounts(t, m, "spool", len(inSpool))
	if dropped := m[`nsca_results_dropped_total{reason="sink_failed"}`]; dropped == 0 || float64(len(inSpool))+dropped != n {
		t.Errorf("%d result files and %v dropped, want some dropped and the two adding up to %d", len(inSpool), dropped, n)
	}
	fdCauseLogged(t, d, "spool")
	fdDrained(t, d, n, map[string]int{"spool": len(inSpool)})
}

// TestFullDiskCommandFile: a regular command file (append_to_file=1) on a
// file system that fills, with the spool behind it on another. The lines
// that reached the command file are not sent to the spool as well (the
// bug: a partly written chunk went there whole), no partial line stays,
// and once space returns the command file takes results again.
func TestFullDiskCommandFile(t *testing.T) {
	fs := fdMount(t, "256k")
	cmd := filepath.Join(fs, "nagios.cmd")
	writeFile(t, cmd, "", 0o600)
	free := fdFiller(t, fs, 64<<10)
	spool := makeSpoolDir(t, t.TempDir())
	metrics := relMetricsAddr(t)
	d := startDaemon(t, relCfg(Config{"command_file": cmd, "append_to_file": "1", "check_result_path": spool, "metrics_address": metrics}))

	const first = 1000
	sent := fdSend(t, d.Port, "a", first, 50)
	m := fdSettled(t, metrics, first)
	inFile, inSpool := fdLines(t, cmd), fdSpool(t, spool)
	fdSplit(t, m, sent, fdPart{"file", "command file", inFile}, fdPart{"spool", "spool", inSpool})

	// Space returns: once its back-off (at most 5 s) has passed, the
	// command file takes results again.
	free()
	total := first
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		sent = append(sent, fdSend(t, d.Port, fmt.Sprintf("b%d", i), 5, 5)...)
		total += 5
		fdSettled(t, metrics, total)
		if len(fdLines(t, cmd)) > len(inFile) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command file took nothing within 15 s of space returning")
		}
		time.Sleep(500 * time.Millisecond)
	}
	fileAfter, spoolAfter := fdLines(t, cmd), fdSpool(t, spool)
	if missing := relOnce(t, sent, map[string][]string{"command file": fileAfter, "spool": spoolAfter}); len(missing) > 0 {
		t.Errorf("%d results lost, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	fdDrained(t, d, total, map[string]int{"file": len(fileAfter), "spool": len(spoolAfter)})
}
