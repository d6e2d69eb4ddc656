package tests

// Helpers shared by the test files: configurations and files, processes
// and the process tree, polling, the daemon's statistics lines and the
// spool directory.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// merge returns a new Config with the options of cfgs, later ones winning.
func merge(cfgs ...Config) Config {
	c := Config{}
	for _, cfg := range cfgs {
		for k, v := range cfg {
			c[k] = v
		}
	}
	return c
}

// writeFile writes data to path and gives it mode perm whatever the umask,
// failing the test on error.
func writeFile(t testing.TB, path, data string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

// sharedDir makes a temporary directory outside t.TempDir() (whose parents
// only root may enter) holding an empty command file, both usable by an
// unprivileged user: for daemons that drop their privileges.
func sharedDir(t *testing.T, prefix string) (dir, cmd string) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd = filepath.Join(dir, "nsca.cmd")
	writeFile(t, cmd, "", 0o666)
	return dir, cmd
}

// makeSpoolDir creates dir/spool for check_result_path.
func makeSpoolDir(t testing.TB, dir string) string {
	t.Helper()
	spool := filepath.Join(dir, "spool")
	if err := os.Mkdir(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	return spool
}

// waitFor polls cond every 20 ms until it holds or timeout passes, and
// reports whether it held.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLines polls read (a log) until it has at least n lines matching re,
// or timeout passes; it returns the matching lines and whether there were n.
func waitLines(read func() string, re *regexp.Regexp, n int, timeout time.Duration) ([]string, bool) {
	var lines []string
	ok := waitFor(timeout, func() bool {
		lines = grepLines(read(), re)
		return len(lines) >= n
	})
	return lines, ok
}

// lockedBuffer collects a process's output; it may be read while the
// process writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// nscaCmd is the daemon under test with args, run in dir, its standard
// output and error going to out unless out is nil.
func nscaCmd(dir string, out io.Writer, args ...string) *exec.Cmd {
	cmd := exec.Command(daemonBin(), args...)
	cmd.Dir = dir
	if out != nil {
		cmd.Stdout, cmd.Stderr = out, out
	}
	return cmd
}

// mustStart starts cmd as a proc, failing the test if it cannot.
func mustStart(t testing.TB, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p, err := startProc(name, cmd)
	if err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	return p
}

// exitWithin waits up to timeout for p to exit. One that does not is ended
// by its PID (SIGTERM, then SIGKILL) and exitWithin returns false.
func (p *proc) exitWithin(timeout time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(timeout):
		p.terminate(time.Second)
		return false
	}
}

// procStat returns the fields of /proc/pid/stat after the command name:
// [0] state, [1] ppid, [2] pgrp, [3] session, [4] tty_nr, ...
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return strings.Fields(s[i+1:]), nil
}

// procGone reports whether pid has ended: no such process, or a zombie
// whose threads have all exited (a Go process's main thread can be a
// zombie for a moment while its other threads still run and hold its
// descriptors).
func procGone(pid int) bool {
	st, err := procStat(pid)
	if err != nil || len(st) == 0 {
		return true
	}
	if st[0] != "Z" {
		return false
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return len(tasks) <= 1
}

// waitGone waits up to timeout until every one of pids has ended and
// returns those that have not.
func waitGone(pids []int, timeout time.Duration) (left []int) {
	waitFor(timeout, func() bool {
		left = nil
		for _, p := range pids {
			if !procGone(p) {
				left = append(left, p)
			}
		}
		return len(left) == 0
	})
	return left
}

// killAtEnd makes sure at cleanup that the processes pids returns then have
// ended: any left is killed by its PID and fails the test.
func killAtEnd(t *testing.T, what string, pids func() []int) {
	t.Cleanup(func() {
		for _, p := range pids() {
			if !procGone(p) {
				syscall.Kill(p, syscall.SIGKILL)
				t.Errorf("process %d of %s was still running at the end; killed", p, what)
			}
		}
	})
}

// procPIDs lists the processes in /proc.
func procPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// childPIDs returns the live (not zombie) children of pid, sorted, from
// /proc/PID/task/*/children, or by scanning the ppid of every process where
// the kernel lacks that file.
func childPIDs(pid int) []int {
	var kids []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if len(tasks) > 0 {
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, w := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(w); err == nil {
					kids = append(kids, n)
				}
			}
		}
	} else {
		kids = procPIDs()
	}
	var live []int
	for _, k := range kids {
		if st, err := procStat(k); err == nil && len(st) > 1 && st[0] != "Z" && st[1] == strconv.Itoa(pid) {
			live = append(live, k)
		}
	}
	slices.Sort(live)
	return slices.Compact(live)
}

// waitChildren waits up to timeout until pid has exactly n live children,
// none of them in not; it returns the children it saw last and whether
// they were those.
func waitChildren(pid, n int, timeout time.Duration, not ...int) ([]int, bool) {
	var kids []int
	ok := waitFor(timeout, func() bool {
		kids = childPIDs(pid)
		if len(kids) != n {
			return false
		}
		for _, k := range kids {
			if slices.Contains(not, k) {
				return false
			}
		}
		return true
	})
	return kids, ok
}

// procStatus returns the fields of the line of /proc/pid/status that
// starts with field ("Uid:", "Gid:", "Groups:"), or nil.
func procStatus(pid int, field string) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// assertNobody asserts that pid runs as nobody/nogroup (65534) for every
// user and group id, with no other supplementary group; who names the
// process in the messages.
func assertNobody(t *testing.T, pid int, who string) {
	t.Helper()
	for _, field := range []string{"Uid:", "Gid:"} {
		ids := procStatus(pid, field)
		if len(ids) == 0 {
			t.Fatalf("%s: /proc/%d/status has no %s line", who, pid, field)
		}
		for _, id := range ids {
			if id != "65534" {
				t.Errorf("%s has %s %v, want all 65534 (nobody/nogroup)", who, field, ids)
				break
			}
		}
	}
	if g := procStatus(pid, "Groups:"); len(g) > 1 || (len(g) == 1 && g[0] != "65534") {
		t.Errorf("%s kept the supplementary groups %v", who, g)
	}
}

// stats is a statistics line of the daemon ("statistics:" every few
// seconds, "pipeline drained:" at exit).
type stats struct {
	line                      string
	received, success, failed uint64
	queued                    int64
	emitted, dropped          map[string]uint64
}

var statsRe = regexp.MustCompile(`(?:statistics|pipeline drained|stopped): .*received=(\d+), report_success=(\d+), report_failed=(\d+), queued=(-?\d+) \(held by sinks -?\d+\), emitted\{([^}]*)\}, dropped\{([^}]*)\}`)

// parseStats parses a statistics line.
func parseStats(line string) (stats, bool) {
	m := statsRe.FindStringSubmatch(line)
	if m == nil {
		return stats{line: line}, false
	}
	s := stats{line: line, emitted: parseCounts(m[5]), dropped: parseCounts(m[6])}
	s.received, _ = strconv.ParseUint(m[1], 10, 64)
	s.success, _ = strconv.ParseUint(m[2], 10, 64)
	s.failed, _ = strconv.ParseUint(m[3], 10, 64)
	s.queued, _ = strconv.ParseInt(m[4], 10, 64)
	return s, true
}

// statsLines parses the statistics lines of kind ("statistics" or
// "pipeline drained") in a daemon's log.
func statsLines(log, kind string) []stats {
	var out []stats
	for _, l := range grepLines(log, regexp.MustCompile(`\] `+kind+`: `)) {
		if s, ok := parseStats(l); ok {
			out = append(out, s)
		}
	}
	return out
}

// parseCounts parses "a=1,b=2".
func parseCounts(s string) map[string]uint64 {
	m := map[string]uint64{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k], _ = strconv.ParseUint(v, 10, 64)
		}
	}
	return m
}

func sum(m map[string]uint64) (n uint64) {
	for _, v := range m {
		n += v
	}
	return n
}

// spoolName matches the name of a result file in check_result_path.
var spoolName = regexp.MustCompile(`^c[A-Za-z0-9]{6}$`)

// spoolHostRe finds the host_name of a spool file.
var spoolHostRe = regexp.MustCompile(`(?m)^host_name=(.*)$`)

// readDirNames returns the entries of dir and the set of their names.
func readDirNames(t testing.TB, dir string) ([]os.DirEntry, map[string]bool) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	return entries, names
}

// countOKs counts the .ok files in dir: the results the spool has
// completed.
func countOKs(t testing.TB, dir string) int {
	t.Helper()
	entries, _ := readDirNames(t, dir)
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".ok") {
			n++
		}
	}
	return n
}

// seqHosts names n clients of sendSeqs: prefix00, prefix01, ...
func seqHosts(prefix string, n int) []string {
	hosts := make([]string, n)
	for c := range hosts {
		hosts[c] = fmt.Sprintf("%s%02d", prefix, c)
	}
	return hosts
}

// sendSeqs runs one send_nsca per host at once, each sending per service
// checks "seq I" with return code I%4 on one connection; a client that
// fails fails the test.
func sendSeqs(t *testing.T, cl Client, port int, hosts []string, per int) {
	t.Helper()
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var in strings.Builder
			for i := range per {
				fmt.Fprintf(&in, "%s\tsvc\t%d\tseq %03d\x17", h, i%4, i)
			}
			out, err := cl.run(t, port, in.String())
			if err != nil || !strings.Contains(out, fmt.Sprintf("%d data packet(s) sent", per)) {
				t.Errorf("client %s: %v: %s", h, err, out)
			}
		}()
	}
	wg.Wait()
}

var seqLine = regexp.MustCompile(`^PROCESS_SERVICE_CHECK_RESULT;([^;]+);svc;(-?\d+);seq (\d+)$`)

// assertSeqs checks that lines (command lines without their times) are
// exactly what sendSeqs sent for hosts, each host's checks in order.
func assertSeqs(t *testing.T, lines []string, hosts []string, per int) {
	t.Helper()
	if len(lines) != len(hosts)*per {
		t.Fatalf("%d lines, want %d", len(lines), len(hosts)*per)
	}
	next := map[string]int{}
	for _, h := range hosts {
		next[h] = 0
	}
	for _, l := range lines {
		m := seqLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("unexpected line %q", l)
			continue
		}
		h := m[1]
		rc, _ := strconv.Atoi(m[2])
		seq, _ := strconv.Atoi(m[3])
		want, known := next[h]
		if !known {
			t.Errorf("unexpected line %q: no client sent for %s", l, h)
			continue
		}
		if seq != want || rc != seq%4 {
			t.Errorf("client %s: got seq %d rc %d, want seq %d rc %d: %q", h, seq, rc, want, want%4, l)
		}
		next[h] = seq + 1
	}
}

// needTool skips the test when path (from Debian's package pkg) is not
// installed, or fails it when CI is set: CI installs every tool the
// suite uses (scripts/deps.sh), so a missing one there is a broken setup,
// not a test to skip.
func needTool(t testing.TB, path, pkg string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v; scripts/deps.sh installs %s", path, err, pkg)
		}
		t.Skipf("no %s (%v); install %s to run this test", path, err, pkg)
	}
}
