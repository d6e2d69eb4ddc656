package tests

// The package's System V init script (conf/debian/nsca.init, installed as
// /etc/init.d/nsca), run on this machine against the daemon under test: a
// copy whose DAEMON, CONF and DEFAULTS point at the test's files, so the
// script's logic runs as on a host without systemd.

import (
	"context"
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

// initScript is a copy of the init script set up for one test.
type initScript struct {
	path    string
	pidFile string
	env     []string
}

// newInitScript copies conf/debian/nsca.init into dir with DAEMON=bin,
// CONF=cfg and a defaults file of its own holding defaults.
func newInitScript(t *testing.T, dir, bin, cfg, pidFile, defaults string) *initScript {
	t.Helper()
	for _, need := range []string{"/lib/lsb/init-functions", "/sbin/start-stop-daemon"} {
		if _, err := os.Stat(need); err != nil {
			if _, err := exec.LookPath(filepath.Base(need)); err != nil {
				t.Skipf("the init script needs %s: %v", need, err)
			}
		}
	}
	b, err := os.ReadFile(filepath.Join("..", "conf", "debian", "nsca.init"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, r := range [][2]string{{"DAEMON=/usr/sbin/nsca\n", "DAEMON=" + bin + "\n"},
		{"CONF=/etc/nsca.cfg\n", "CONF=" + cfg + "\n"},
		{"DEFAULTS=/etc/default/nsca\n", "DEFAULTS=" + filepath.Join(dir, "default") + "\n"}} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("conf/debian/nsca.init has no line %q", strings.TrimSpace(r[0]))
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	s := &initScript{path: filepath.Join(dir, "nsca.init"), pidFile: pidFile}
	writeFile(t, s.path, text, 0o755)
	writeFile(t, filepath.Join(dir, "default"), defaults, 0o644)
	// No systemd hook of init-functions may redirect the script to systemctl.
	s.env = append(os.Environ(), "_SYSTEMCTL_SKIP_REDIRECT=1")
	return s
}

// run runs the script with action and returns its exit status and output.
func (s *initScript) run(t *testing.T, action string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", s.path, action)
	cmd.Env = s.env
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: timed out\n%s", s.path, action, out)
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("%s %s: %v", s.path, action, err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// must runs action and fails the test unless it exits with want.
func (s *initScript) must(t *testing.T, action string, want int) string {
	t.Helper()
	code, out := s.run(t, action)
	if code != want {
		t.Fatalf("init script %s: exit %d, want %d; output:\n%s", action, code, want, out)
	}
	t.Logf("init script %s: exit %d: %s", action, code, strings.TrimSpace(out))
	return out
}

// pid reads the pid file, 0 if there is none.
func (s *initScript) pid() int {
	b, err := os.ReadFile(s.pidFile)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// TestInitScript drives the init script through status, start, a second
// start, reload (good and refused configurations), restart and stop, with
// the daemon's pid file, against a supervisor with two workers.
func TestInitScript(t *testing.T) {
	dir := t.TempDir()
	cmdFile := filepath.Join(dir, "nsca.cmd")
	writeFile(t, cmdFile, "", 0o600)
	pidFile := filepath.Join(dir, "run", "nsca.pid") // the script makes run/
	port := freePort(t)
	cfgPath := filepath.Join(dir, "nsca.cfg")
	good := Config{"server_address": "127.0.0.1", "server_port": strconv.Itoa(port), "command_file": cmdFile,
		"append_to_file": "1", "pid_file": pidFile, "nsca_workers": "2"}
	writeFile(t, cfgPath, good.text(), 0o600)
	bin := daemonBin()
	s := newInitScript(t, dir, bin, cfgPath, pidFile, "STOP_TIMEOUT=20\n")
	t.Cleanup(func() {
		if pid := s.pid(); pid > 0 && !procGone(pid) {
			s.run(t, "stop")
		}
		killAtEnd(t, "init script daemon", func() []int {
			var pids []int
			for _, pid := range procPIDs() {
				if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe == bin {
					if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), cfgPath) {
						pids = append(pids, pid)
					}
				}
			}
			return pids
		})
	})

	s.must(t, "status", 3)

	s.must(t, "start", 0)
	pid := s.pid()
	if pid == 0 || procGone(pid) {
		t.Fatalf("after start: pid file %s holds %d, which does not run", pidFile, pid)
	}
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe != bin {
		t.Errorf("pid %d runs %q, want %s", pid, exe, bin)
	}
	workers, ok := waitChildren(pid, 2, startTimeout)
	if !ok {
		t.Fatalf("pid %d has children %v, want 2 workers", pid, workers)
	}
	cl := Client{Method: 1}
	cl.send(t, port, "h\ts\t0\tstarted by the init script\n", 1)
	waitFileLines(t, cmdFile, 1)

	s.must(t, "start", 0) // running already: nothing happens
	if s.pid() != pid || procGone(pid) {
		t.Errorf("a second start replaced the daemon: pid %d, was %d", s.pid(), pid)
	}
	if out := s.must(t, "status", 0); !strings.Contains(out, "running") {
		t.Errorf("status says %q, want it to say running", out)
	}

	// reload: new workers take over, the supervisor stays.
	s.must(t, "reload", 0)
	if _, ok := waitChildren(pid, 2, startTimeout, workers...); !ok {
		t.Errorf("after reload the supervisor %d still has the old workers %v", pid, workers)
	}
	cl.send(t, port, "h\ts\t0\tafter reload\n", 1)
	waitFileLines(t, cmdFile, 2)

	// A configuration the daemon would refuse: reload and restart say so
	// with FILE:LINE and leave the running daemon be.
	bad := merge(good, Config{"decryption_method": "7"})
	writeFile(t, cfgPath, bad.text(), 0o600)
	where := regexp.MustCompile(regexp.QuoteMeta(cfgPath) + `:[0-9]+: decryption_method=7`)
	// The daemon's complaint on a line of its own, not run into the status
	// line ("...: nscansca: conf: ..."), and the verdict said once.
	ownLine := regexp.MustCompile(`(?m)^ *nsca: conf: ` + where.String())
	refused := func(action string, code int, out string) {
		t.Helper()
		if code == 0 || !where.MatchString(out) {
			t.Errorf("%s with a refused configuration: exit %d, output %q; want failure naming %s:LINE", action, code, out, cfgPath)
		}
		if !ownLine.MatchString(out) || strings.Count(out, "failed") != 1 {
			t.Errorf("%s with a refused configuration: want the complaint on a line of its own and one \"failed\":\n%s", action, out)
		}
	}
	for _, action := range []string{"reload", "force-reload", "restart"} {
		code, out := s.run(t, action)
		refused(action, code, out)
		if s.pid() != pid || procGone(pid) {
			t.Fatalf("%s with a refused configuration stopped the daemon (pid %d, pid file %d)", action, pid, s.pid())
		}
	}
	writeFile(t, cfgPath, good.text(), 0o600)

	s.must(t, "restart", 0)
	next := s.pid()
	if next == 0 || next == pid || procGone(next) || !procGone(pid) {
		t.Fatalf("restart: pid %d (was %d, gone: %v)", next, pid, procGone(pid))
	}
	cl.send(t, port, "h\ts\t0\tafter restart\n", 1)
	waitFileLines(t, cmdFile, 3)

	s.must(t, "stop", 0)
	if !waitFor(5*time.Second, func() bool { return procGone(next) }) {
		t.Fatalf("stop: pid %d still runs", next)
	}
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("stop: the pid file is still there (%v)", err)
	}
	s.must(t, "stop", 0) // stopped already
	s.must(t, "status", 3)
	writeFile(t, cfgPath, bad.text(), 0o600)
	code, out := s.run(t, "start")
	refused("start", code, out)
	writeFile(t, cfgPath, good.text(), 0o600)
	if code, _ := s.run(t, "frobnicate"); code == 0 {
		t.Errorf("an unknown action exits 0")
	}

	// Without pid_file the script cannot find the daemon and says so.
	writeFile(t, cfgPath, merge(good, Config{"pid_file": ""}).text(), 0o600)
	if code, out := s.run(t, "start"); code == 0 || !strings.Contains(out, "pid_file") {
		t.Errorf("start without pid_file: exit %d, %q", code, out)
	}
}
