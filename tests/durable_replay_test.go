package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDurableReplay: `nsca --replay` feeds what a fallback wrote (a dump
// file, a spool directory) to the configured remote destination, here
// gearmand with a worker on check_results, and reports the counts; spool
// files delivered are removed, the dump file is left. A dump file's line
// that does not parse, and its last line when the newline is missing (cut
// off as it was written: it parses, but its output is cut short), are
// skipped, counted and named with the file and line number.
func TestDurableReplay(t *testing.T) {
	gd := gmStartGearmand(t, 0)
	col := startGmCollector(t, gd.addr)
	dir := t.TempDir()
	dump := filepath.Join(dir, "nsca.dump")
	writeFile(t, dump, "[1762153445] PROCESS_SERVICE_CHECK_RESULT;rp-host;svc-a;0;seq 1 of svc-a|seq=1\n"+
		"[1762153445] PROCESS_SERVICE_CHECK_RESULT;rp-host;svc-a;1;seq 2 of svc-a\\nsecond line\n"+
		"[1762153446] PROCESS_HOST_CHECK_RESULT;rp-host;0;host up\n"+
		"not a command\n"+
		"[1762153446] PROCESS_SERVICE_CHECK_RESULT;rp-host;svc-a;2;seq 3 of svc-a, cut sh", 0o644)
	spool := filepath.Join(dir, "spool")
	os.Mkdir(spool, 0o755)
	spoolFile := "### NSCA Passive Check Result ###\n# Time: Mon Nov  3 07:04:05 2025\nfile_time=1762153447\n\n" +
		"### Service Check Result ###\nhost_name=rp-host\nservice_description=svc-b\ncheck_type=1\nscheduled_check=0\n" +
		"reschedule_check=0\nlatency=0\nstart_time=1762153447.0\nfinish_time=1762153447.0\nreturn_code=2\noutput=seq 1 of svc-b\n\n"
	writeFile(t, filepath.Join(spool, "cAbC123"), spoolFile, 0o600)
	writeFile(t, filepath.Join(spool, "cAbC123.ok"), "", 0o600)
	cfgPath := filepath.Join(dir, "nsca.cfg")
	writeFile(t, cfgPath, Config{"gearman_server": gd.addr, "gearman_encryption": "0",
		"alternate_dump_file": filepath.Join(dir, "other.dump")}.text(), 0o600)

	for _, c := range []struct {
		path string
		want []string
	}{
		{dump, []string{"read=3 skipped=2 removed_spool_files=0; gearman: delivered=3 refused=0 left=0",
			"nsca: replay: skipped " + dump + ":4: not an external command line",
			"nsca: replay: skipped " + dump + ":5: no newline at its end"}},
		{spool, []string{"read=1 skipped=0 removed_spool_files=1; gearman: delivered=1 refused=0 left=0"}},
	} {
		out, err := exec.Command(daemonBin(), "-c", cfgPath, "--replay", c.path).CombinedOutput()
		for _, want := range c.want {
			if err != nil || !strings.Contains(string(out), want) {
				t.Errorf("--replay %s: %v\n%s\nwant %q", c.path, err, out, want)
			}
		}
	}
	if !waitFor(10*time.Second, func() bool { return col.count() >= 3 }) {
		t.Fatalf("the worker got %d service jobs, want 3", col.count())
	}
	time.Sleep(300 * time.Millisecond) // let a torn line's job, if sent, arrive
	col.mu.Lock()
	a, b := col.seqs["svc-a"], col.seqs["svc-b"]
	col.mu.Unlock()
	if len(a) != 2 || a[0] != 1 || a[1] != 2 || len(b) != 1 {
		t.Errorf("the worker got svc-a %v, svc-b %v; want [1 2] and [1]", a, b)
	}
	if _, err := os.Stat(filepath.Join(spool, "cAbC123")); !os.IsNotExist(err) {
		t.Errorf("the replayed spool file is still there (%v)", err)
	}
	if _, err := os.Stat(dump); err != nil {
		t.Errorf("the dump file is gone: %v", err)
	}
}

// TestDurableReplayQueue: results queued on disk for gearmand stay there
// when gearman_server is then removed from the configuration. The daemon
// says so at start, and `nsca --replay` on the queue directory delivers
// them, in order per service, acknowledges them and removes the emptied
// directory. A queue that a running daemon holds is refused.
func TestDurableReplayQueue(t *testing.T) {
	const conns, perConn = 4, 10
	gmPort := freePort(t)
	queueDir := filepath.Join(t.TempDir(), "queue")
	dump := filepath.Join(t.TempDir(), "nsca.dump")
	withGearman := relCfg(Config{"gearman_server": "127.0.0.1:" + strconv.Itoa(gmPort), "gearman_encryption": "0",
		"gearman_timeout": "2", "queue_directory": queueDir, "alternate_dump_file": dump})
	clientCfg := filepath.Join(t.TempDir(), "send_nsca.cfg")
	writeFile(t, clientCfg, "password="+relPassword+"\nencryption_method=1\n", 0o600)

	d := startDaemon(t, withGearman)
	cl := Client{CfgPath: clientCfg}
	sendServiceSeqs(t, cl, d.Port, "rq-host", "q", conns, perConn)
	gmQueue := filepath.Join(queueDir, "gearman")
	replayCfg := filepath.Join(t.TempDir(), "replay.cfg")
	writeFile(t, replayCfg, withGearman.text(), 0o600)
	replay := func() (string, error) {
		out, err := exec.Command(daemonBin(), "-c", replayCfg, "--replay", gmQueue).CombinedOutput()
		return string(out), err
	}
	if out, err := replay(); err == nil || !strings.Contains(out, "is open in a running nsca") {
		t.Errorf("--replay of the queue the daemon holds: %v\n%s\nwant a refusal naming the running nsca", err, out)
	}
	d.Stop()
	if segs, _ := filepath.Glob(filepath.Join(gmQueue, "*.seg")); len(segs) == 0 {
		t.Fatalf("nothing queued in %s while gearmand was down", gmQueue)
	}

	stranded := regexp.MustCompile(`sink: \S+/gearman holds \d+ bytes of results queued for gearman, which this configuration does not have \(gearman_server is not set\)`)
	d = startDaemon(t, relCfg(Config{"queue_directory": queueDir, "check_result_path": makeSpoolDir(t, t.TempDir())}))
	d.waitLog(stranded, 10*time.Second)
	d.Stop()
	// Under inetd a process serves one connection: it would say so once
	// per connection, so it does not.
	inetd := exec.Command(daemonBin(), "-c", d.CfgPath, "--inetd", "-f")
	if out, _ := inetd.CombinedOutput(); stranded.Match(out) {
		t.Errorf("an inetd process logs the stranded queue:\n%s", out)
	}

	gd := gmStartGearmand(t, gmPort)
	col := startGmCollector(t, gd.addr)
	want := fmt.Sprintf("read=%d skipped=0 removed_spool_files=0 acked_queue_records=%d queue_removed=true; gearman: delivered=%d refused=0 left=0",
		conns*perConn, conns*perConn, conns*perConn)
	out, err := replay()
	if err != nil || !strings.Contains(out, want) {
		t.Errorf("--replay %s: %v\n%s\nwant %q", gmQueue, err, out, want)
	}
	t.Logf("--replay %s: %s", gmQueue, strings.TrimSpace(out))
	if !waitFor(10*time.Second, func() bool { return col.count() >= conns*perConn }) {
		t.Errorf("the worker got %d of %d results", col.count(), conns*perConn)
	}
	time.Sleep(300 * time.Millisecond) // let duplicates, if any, arrive
	col.checkInOrder(t, "q", conns, perConn)
	if _, err := os.Stat(gmQueue); !os.IsNotExist(err) {
		t.Errorf("the emptied queue %s is still there (%v)", gmQueue, err)
	}
	if out, err := replay(); err == nil {
		t.Errorf("a second --replay of the removed queue succeeded:\n%s", out)
	}
}

// TestDumpTornTailAtStart: a dump file left ending in a partial line (a
// write that kill -9, the OOM killer or a power loss cut short) has it cut
// off, with a log line, before the daemon appends to it again: otherwise
// the next result is glued to it, and the core or --replay reads the two as
// one result, the first one's output followed by the second's line.
func TestDumpTornTailAtStart(t *testing.T) {
	dir := t.TempDir()
	dump := filepath.Join(dir, "nsca.dump")
	const whole = "[1762153445] PROCESS_SERVICE_CHECK_RESULT;torn-host;svc;0;before the crash\n"
	writeFile(t, dump, whole+"[1762153446] PROCESS_SERVICE_CHECK_RESULT;torn-host;svc;2;cut sh", 0o644)
	d := startDaemon(t, relCfg(Config{"command_file": makeFIFO(t, dir), "alternate_dump_file": dump}))
	cl := Client{Password: relPassword, Method: 1}
	cl.send(t, d.Port, "torn-host\tsvc\t0\tafter the restart\n", 1)
	lines := waitFileLines(t, dump, 2)
	if len(lines) != 2 || lines[0]+"\n" != whole || !regexp.MustCompile(`^\[\d+\] PROCESS_SERVICE_CHECK_RESULT;torn-host;svc;0;after the restart$`).MatchString(lines[1]) {
		t.Errorf("the dump file holds %q; want the whole line from before the crash and the new result", lines)
	}
	d.waitLog(regexp.MustCompile(`alternate dump file \S+: cut off a partial last line \(\d+ bytes at offset \d+`), 10*time.Second)
}
