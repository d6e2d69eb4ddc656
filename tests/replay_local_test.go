package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// replayDump writes a dump file of n service results, "seq i" for
// rl-host;svc-(i%3), and returns the lines the core should read.
func replayDump(t *testing.T, path string, n int) []string {
	var b strings.Builder
	lines := make([]string, n)
	for i := range n {
		lines[i] = fmt.Sprintf("[%d] PROCESS_SERVICE_CHECK_RESULT;rl-host;svc-%d;%d;seq %d", 1762153445+i/1000, i%3, i%4, i)
		b.WriteString(lines[i] + "\n")
	}
	writeFile(t, path, b.String(), 0o600)
	return lines
}

// runReplay runs nsca -c cfg --replay path and returns its output and
// exit status.
func runReplay(t *testing.T, cfg Config, path string) (string, int) {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "nsca.cfg")
	writeFile(t, cfgPath, cfg.text(), 0o600)
	cmd := exec.Command(daemonBin(), "-c", cfgPath, "--replay", path)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil {
		t.Fatalf("nsca --replay: %v", err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// TestReplayLocal: --replay delivers into the local destinations a stock
// user has: a dump file into command_file, a FIFO a core reads, every result
// once and in order, with a progress line on a long replay; a spool
// directory into command_file, whose delivered files are removed; a dump
// file into check_result_path when there is no command file. A spool is
// never replayed into itself, nor a dump file into alternate_dump_file.
// (Before, each was refused: no remote destination configured.)
func TestReplayLocal(t *testing.T) {
	t.Run("dump into the command file", func(t *testing.T) {
		dir := t.TempDir()
		fifo := makeFIFO(t, dir)
		core := openFIFOReader(t, fifo)
		const n = 25000
		want := replayDump(t, filepath.Join(dir, "nsca.dump"), n)
		out, code := runReplay(t, Config{"command_file": fifo, "alternate_dump_file": filepath.Join(dir, "nsca.dump")}, filepath.Join(dir, "nsca.dump"))
		t.Logf("nsca --replay:\n%s", out)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("read=%d skipped=0 removed_spool_files=0; local: delivered=%d refused=0 left=0", n, n)) {
			t.Errorf("exit status %d, want 0 and every result delivered to local:\n%s", code, out)
		}
		progress := regexp.MustCompile(`(?m)^nsca: replay \S+: \d+ results read; delivered: local \d+$`)
		if len(progress.FindAllString(out, -1)) < 2 {
			t.Errorf("want a progress line every 10,000 results, got:\n%s", out)
		}
		got := core.Collect(t, n)
		if !slices.Equal(got, want) {
			t.Errorf("the core read %d lines, not the %d of the dump in order (first difference at %d)", len(got), n, firstDiff(got, want))
		}
		if extra, _ := core.Next(300 * time.Millisecond); extra != "" {
			t.Errorf("the core read more than the dump held: %q", extra)
		}
		if st, err := os.Stat(filepath.Join(dir, "nsca.dump")); err != nil || st.Size() == 0 {
			t.Errorf("the dump file was changed: %v", err)
		}
	})
	t.Run("spool into the command file", func(t *testing.T) {
		dir := t.TempDir()
		cmd := commandFile(t, dir)
		spool := makeSpoolDir(t, dir)
		for i, svc := range []string{"svc-b", "svc-a"} {
			name := filepath.Join(spool, fmt.Sprintf("cRpl00%d", i))
			writeFile(t, name, fmt.Sprintf("### NSCA Passive Check Result ###\nfile_time=%d\n\n### Service Check Result ###\n"+
				"host_name=rl-host\nservice_description=%s\ncheck_type=1\nstart_time=%d.0\nreturn_code=%d\noutput=from the spool\n",
				1762153445+i, svc, 1762153445+i, i), 0o600)
			writeFile(t, name+".ok", "", 0o600)
		}
		out, code := runReplay(t, Config{"command_file": cmd, "append_to_file": "1", "check_result_path": spool}, spool)
		if code != 0 || !strings.Contains(out, "read=2 skipped=0 removed_spool_files=2; local: delivered=2 refused=0 left=0") {
			t.Errorf("exit status %d, want 0, both results delivered and their files removed:\n%s", code, out)
		}
		want := []string{"[1762153445] PROCESS_SERVICE_CHECK_RESULT;rl-host;svc-b;0;from the spool",
			"[1762153446] PROCESS_SERVICE_CHECK_RESULT;rl-host;svc-a;1;from the spool"}
		if got := completeLines(readFile(t, cmd)); !slices.Equal(got, want) {
			t.Errorf("the command file holds %q, want %q", got, want)
		}
		if left, _ := filepath.Glob(filepath.Join(spool, "c*")); len(left) != 0 {
			t.Errorf("spool files left after a replay that delivered them: %v", left)
		}
	})
	t.Run("dump into the spool", func(t *testing.T) {
		dir := t.TempDir()
		spool := makeSpoolDir(t, dir)
		dump := filepath.Join(dir, "nsca.dump")
		replayDump(t, dump, 5)
		out, code := runReplay(t, Config{"check_result_path": spool, "alternate_dump_file": dump}, dump)
		if code != 0 || !strings.Contains(out, "read=5 skipped=0 removed_spool_files=0; local: delivered=5 refused=0 left=0") {
			t.Errorf("exit status %d, want 0 and 5 results delivered:\n%s", code, out)
		}
		if got := countOKs(t, spool); got != 5 {
			t.Errorf("%d result files in the spool, want 5", got)
		}
		// The spool it wrote is its only destination: not replayed into itself.
		out, code = runReplay(t, Config{"check_result_path": spool}, spool)
		if code == 0 || !strings.Contains(out, "no destination configured besides the input") {
			t.Errorf("replaying the spool into itself: exit status %d:\n%s", code, out)
		}
		if got := countOKs(t, spool); got != 5 {
			t.Errorf("%d result files in the spool after the refused replay, want 5", got)
		}
	})
}

// firstDiff is the first index at which a and b differ.
func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
