package tests

// dir_stats: the C++ nsca_fast's sample nsca.cfg (conf/testdata, its keys
// and values) runs unchanged but for the paths of this machine, and each
// worker keeps the statistics file that sites graph with Munin.

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// statsKeys are the C++ nsca_fast's keys, in its order, after its header
// line "[nsca stats]".
var statsKeys = []string{"pid", "process_started_at", "file_created_at", "connections_per_sec",
	"connections_current", "connections_counter", "report_success", "report_failed"}

// statsWait bounds how long a file takes to show a change: it is rewritten
// every 5 seconds.
const statsWait = 15 * time.Second

// cppSample is the C++ nsca_fast's sample with the values in set put in
// place of its own (every other key and value stays as it ships).
func cppSample(t *testing.T, set map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "conf", "testdata", "nsca_fast_cpp.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i, line := range lines {
		name, _, ok := strings.Cut(line, "=")
		if v, found := set[name]; ok && found {
			lines[i] = name + "=" + v
			delete(set, name)
		}
	}
	for name := range set {
		t.Fatalf("the C++ sample has no line for %s", name)
	}
	return strings.Join(lines, "\n")
}

// readStats parses a statistics file, failing unless it is exactly the
// header and the eight keys in order, each a decimal number.
func readStats(t *testing.T, path string) (map[string]uint64, error) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(statsKeys)+1 || lines[0] != "[nsca stats]" {
		t.Fatalf("%s is not the C++ nsca_fast's format:\n%s", path, b)
	}
	m := map[string]uint64{}
	for i, key := range statsKeys {
		v, ok := strings.CutPrefix(lines[i+1], key+"=")
		n, err := strconv.ParseUint(v, 10, 64)
		if !ok || err != nil {
			t.Fatalf("%s: line %d is %q, want %s=<number>:\n%s", path, i+2, lines[i+1], key, b)
		}
		m[key] = n
	}
	return m, nil
}

// sumStats adds a key over the files of slots 0..n-1.
func sumStats(t *testing.T, dir string, n int, key string) uint64 {
	var total uint64
	for slot := range n {
		if m, err := readStats(t, filepath.Join(dir, fmt.Sprintf("nsca-stats-%d.txt", slot))); err == nil {
			total += m[key]
		}
	}
	return total
}

// TestCppSampleDirStats starts the daemon on the C++ nsca_fast's sample
// (4 workers, 4 threads each, tripledes, dir_stats), sends checks with the
// real send_nsca and follows the four statistics files: every key is there,
// the counters move, and the files go when the daemon stops.
func TestCppSampleDirStats(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sample runs as nsca_user=nagios, nsca_group=nogroup: needs root")
	}
	for _, who := range []func() error{
		func() error { _, err := user.Lookup("nagios"); return err },
		func() error { _, err := user.LookupGroup("nogroup"); return err },
	} {
		if err := who(); err != nil {
			t.Skipf("the sample's nsca_user or nsca_group is missing: %v", err)
		}
	}
	dir, _ := sharedDir(t, "nsca-dirstats-")
	spool := filepath.Join(dir, "checkresults")
	stats := filepath.Join(dir, "stats")
	for _, d := range []string{spool, stats} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o777) // the workers write as nagios
	}
	port := freePort(t)
	text := cppSample(t, map[string]string{"check_result_path": spool, "pid_file": filepath.Join(dir, "nsca.pid"),
		"server_port": strconv.Itoa(port), "server_address": "127.0.0.1", "dir_stats": stats})
	d := startDaemonWith(t, Config{}, daemonOpts{port: port, cfgTail: text})
	workers := d.waitWorkers(4, startTimeout)
	d.waitLog(regexp.MustCompile(` listening on `), startTimeout) // logged once every worker serves

	// Each worker writes its file before it serves.
	files := map[int]map[string]uint64{}
	for slot := range 4 {
		m, err := readStats(t, filepath.Join(stats, fmt.Sprintf("nsca-stats-%d.txt", slot)))
		if err != nil {
			t.Fatalf("worker %d's statistics file: %v", slot, err)
		}
		files[slot] = m
	}
	for slot, m := range files {
		if !containsInt(workers, int(m["pid"])) {
			t.Errorf("nsca-stats-%d.txt: pid=%d is not a worker (%v)", slot, m["pid"], workers)
		}
		now := uint64(time.Now().Unix())
		if m["process_started_at"] > m["file_created_at"] || m["file_created_at"] > now || now-m["process_started_at"] > 60 {
			t.Errorf("nsca-stats-%d.txt: process_started_at=%d, file_created_at=%d, now %d", slot, m["process_started_at"], m["file_created_at"], now)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(stats, fmt.Sprintf("nsca-stats-%d.txt", slot)), &st); err == nil {
			if u, _ := user.Lookup("nagios"); u != nil && strconv.Itoa(int(st.Uid)) != u.Uid {
				t.Errorf("nsca-stats-%d.txt belongs to uid %d, want nagios (%s)", slot, st.Uid, u.Uid)
			}
		}
	}

	// Checks with the sample's password and method; one connection each,
	// so the connection counters move as the results do.
	cl := Client{Password: "password", Method: 3}
	const connections, perConnection = 12, 5
	for c := range connections {
		var in strings.Builder
		for i := range perConnection {
			fmt.Fprintf(&in, "host%02d\tsvc%d\t0\tok %d/%d\x17", c, i, c, i)
		}
		cl.send(t, port, in.String(), perConnection)
	}
	// One connection with the wrong password: its packet fails the CRC.
	Client{Password: "wrong", Method: 3}.sendRejected(t, port, "bad\tsvc\t0\tout\n")
	// connections_counter also counts the harness's probes of the port.
	want := map[string]uint64{"report_success": connections * perConnection, "report_failed": 1}
	ok := waitFor(statsWait, func() bool {
		for key, n := range want {
			if sumStats(t, stats, 4, key) != n {
				return false
			}
		}
		return sumStats(t, stats, 4, "connections_counter") >= connections+1
	})
	if !ok {
		for key, n := range want {
			t.Errorf("sum of %s over the 4 files: %d, want %d", key, sumStats(t, stats, 4, key), n)
		}
		t.Errorf("sum of connections_counter: %d, want at least %d", sumStats(t, stats, 4, "connections_counter"), connections+1)
	}
	if got := countOKs(t, spool); got != connections*perConnection {
		t.Errorf("%d results in check_result_path, want %d", got, connections*perConnection)
	}
	for slot := range 4 {
		b, _ := os.ReadFile(filepath.Join(stats, fmt.Sprintf("nsca-stats-%d.txt", slot)))
		t.Logf("nsca-stats-%d.txt:\n%s", slot, b)
	}
	// Only the four files: the temporary ones are renamed into place. A
	// worker may be rewriting its file as the directory is read (CI caught
	// one in flight), so a temporary file counts only if it stays.
	var entries []os.DirEntry
	if !waitFor(2*time.Second, func() bool { entries, _ = os.ReadDir(stats); return len(entries) == 4 }) {
		t.Errorf("dir_stats holds %d entries, want the 4 files: %v", len(entries), entries)
	}

	d.Stop()
	if entries, _ := os.ReadDir(stats); len(entries) != 0 {
		t.Errorf("dir_stats still holds %v after the daemon stopped", entries)
	}
}

// TestDirStatsSingleProcess: with nsca_workers=0 the one process keeps
// nsca-stats-0.txt (the C++ daemon's name for its only worker), through a
// reload, moves it when a reload names another directory, and a directory
// the daemon cannot use refuses the start.
func TestDirStatsSingleProcess(t *testing.T) {
	dir := t.TempDir()
	stats := filepath.Join(dir, "stats")
	if err := os.Mkdir(stats, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := filepath.Join(dir, "nsca.cmd")
	writeFile(t, cmd, "", 0o600)
	d := startDaemon(t, Config{"command_file": cmd, "append_to_file": "1", "dir_stats": stats, "nsca_workers": "0"})
	path := filepath.Join(stats, "nsca-stats-0.txt")
	first, err := readStats(t, path)
	if err != nil {
		t.Fatal(err)
	}
	if int(first["pid"]) != d.Pid() {
		t.Errorf("pid=%d, want the daemon's %d", first["pid"], d.Pid())
	}
	cl := Client{Method: 1}
	cl.send(t, d.Port, "h\ts\t0\tbefore\n", 1)
	d.Signal(syscall.SIGHUP)
	d.waitLog(regexp.MustCompile(`configuration reloaded`), startTimeout)
	cl.send(t, d.Port, "h\ts\t0\tafter\n", 1)
	// The counters span the reload: one process, one file.
	if !waitFor(statsWait, func() bool {
		m, err := readStats(t, path)
		return err == nil && m["report_success"] == 2 && m["connections_counter"] >= 2 && m["file_created_at"] > first["file_created_at"]
	}) {
		m, err := readStats(t, path)
		t.Errorf("after 2 results across a reload: %v (%v)", m, err)
	}
	// A reload naming another directory moves the file there.
	moved := filepath.Join(dir, "moved")
	if err := os.Mkdir(moved, 0o755); err != nil {
		t.Fatal(err)
	}
	d.rewriteConfig(Config{"command_file": cmd, "append_to_file": "1", "dir_stats": moved, "nsca_workers": "0"})
	d.Signal(syscall.SIGHUP)
	movedPath := filepath.Join(moved, "nsca-stats-0.txt")
	if !waitFor(startTimeout, func() bool {
		_, errOld := os.Stat(path)
		m, err := readStats(t, movedPath)
		return os.IsNotExist(errOld) && err == nil && m["report_success"] == 2
	}) {
		t.Errorf("after a reload to dir_stats=%s: %s still there or %s missing", moved, path, movedPath)
	}
	d.Stop()
	if _, err := os.Stat(movedPath); !os.IsNotExist(err) {
		t.Errorf("%s is still there after the daemon stopped: %v", movedPath, err)
	}

	for _, c := range []struct{ value, reason string }{
		{filepath.Join(dir, "missing"), "no such file or directory"},
		{cmd, "is not a directory"},
		{"1", "is not an absolute path"},
	} {
		cfgPath, code, out := runDaemonExpectFailure(t, listenConfig(Config{"command_file": cmd, "dir_stats": c.value}, freePort(t)).text())
		if code != 1 || !strings.Contains(out, cfgPath+":") || !strings.Contains(out, "dir_stats=") || !strings.Contains(out, c.reason) {
			t.Errorf("dir_stats=%s: exit %d, output %q; want 1 with %s:LINE, the option and %q", c.value, code, out, cfgPath, c.reason)
		}
	}
}

func containsInt(list []int, n int) bool {
	for _, v := range list {
		if v == n {
			return true
		}
	}
	return false
}
