package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDurableReplay: `nsca --replay` feeds what a fallback wrote (a dump
// file, a spool directory) to the configured remote destination, here
// gearmand with a worker on check_results, and reports the counts; spool
// files delivered are removed, the dump file is left.
func TestDurableReplay(t *testing.T) {
	gd := gmStartGearmand(t, 0)
	col := startGmCollector(t, gd.addr)
	dir := t.TempDir()
	dump := filepath.Join(dir, "nsca.dump")
	writeFile(t, dump, "[1762153445] PROCESS_SERVICE_CHECK_RESULT;rp-host;svc-a;0;seq 1 of svc-a|seq=1\n"+
		"[1762153445] PROCESS_SERVICE_CHECK_RESULT;rp-host;svc-a;1;seq 2 of svc-a\\nsecond line\n"+
		"[1762153446] PROCESS_HOST_CHECK_RESULT;rp-host;0;host up\n"+
		"not a command\n", 0o644)
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
		path, want string
	}{
		{dump, "read=3 skipped=1 removed_spool_files=0; gearman: delivered=3 refused=0 left=0"},
		{spool, "read=1 skipped=0 removed_spool_files=1; gearman: delivered=1 refused=0 left=0"},
	} {
		out, err := exec.Command(daemonBin(), "-c", cfgPath, "--replay", c.path).CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("--replay %s: %v\n%s\nwant %q", c.path, err, out, c.want)
		}
	}
	if !waitFor(10*time.Second, func() bool { return col.count() >= 3 }) {
		t.Fatalf("the worker got %d service jobs, want 3", col.count())
	}
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
