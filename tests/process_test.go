package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReloadOnSIGHUP: like stock, the daemon re-reads its configuration on
// SIGHUP; new connections use the new password and method.
func TestReloadOnSIGHUP(t *testing.T) {
	cmd := commandFile(t, t.TempDir())
	cfg := Config{"command_file": cmd, "append_to_file": "1", "password": "before", "decryption_method": "1"}
	d := startDaemon(t, cfg)
	lo := now()
	Client{Password: "before", Method: 1}.send(t, d.Port, "reload\tsvc\t0\tbefore SIGHUP\x17", 1)
	waitFileLines(t, cmd, 1)

	cfg["password"], cfg["decryption_method"] = "after", "14"
	d.rewriteConfig(cfg)
	d.Signal(syscall.SIGHUP)
	time.Sleep(time.Second)
	if d.p.hasExited() {
		t.Fatalf("the daemon exited on SIGHUP: %v", d.p.state)
	}
	Client{Password: "after", Method: 14}.send(t, d.Port, "reload\tsvc\t1\tafter SIGHUP\x17", 1)
	waitFileLines(t, cmd, 2)
	// The old settings no longer work.
	(Client{Password: "before", Method: 1}).sendRejected(t, d.Port, "reload\tsvc\t2\told settings\x17")
	time.Sleep(200 * time.Millisecond)
	hi := now()
	d.Stop()
	assertLines(t, commandsIn(t, cmd, lo, hi), []string{
		serviceLine("reload", "svc", 0, "before SIGHUP"),
		serviceLine("reload", "svc", 1, "after SIGHUP"),
	})
}

// TestReloadBadConfigKeepsRunning: a SIGHUP with a broken configuration on
// disk keeps the daemon serving with the configuration it has.
func TestReloadBadConfigKeepsRunning(t *testing.T) {
	cmd := commandFile(t, t.TempDir())
	cfg := Config{"command_file": cmd, "append_to_file": "1", "password": shortPassword, "decryption_method": "1"}
	d := startDaemon(t, cfg)
	d.rewriteConfig(merge(Config{"no_such_option": "1"}, cfg))
	d.Signal(syscall.SIGHUP)
	time.Sleep(500 * time.Millisecond)
	if d.p.hasExited() {
		t.Fatalf("the daemon exited on SIGHUP with a bad configuration: %v\n%s", d.p.state, d.Stderr())
	}
	if !strings.Contains(d.Stderr(), "no_such_option") {
		t.Errorf("the rejected reload does not name the bad option:\n%s", d.Stderr())
	}
	lo := now()
	Client{Password: shortPassword, Method: 1}.send(t, d.Port, "kept\tsvc\t0\tstill the old config\x17", 1)
	deliverAll(t, d, cmd, lo, []string{serviceLine("kept", "svc", 0, "still the old config")})
}

// endWorkers waits for the workers to be gone; any left are killed by PID
// and fail the test.
func endWorkers(t *testing.T, pids []int) {
	t.Helper()
	if left := waitGone(pids, stopTimeout); len(left) > 0 {
		for _, p := range left {
			syscall.Kill(p, syscall.SIGKILL)
		}
		t.Errorf("workers %v were still running %v after the daemon was stopped; killed", left, stopTimeout)
	}
}

// TestWorkers: with nsca_workers=2 results from concurrent clients all
// arrive; SIGHUP replaces the workers; SIGTERM ends the supervisor (status
// 0) and every worker.
func TestWorkers(t *testing.T) {
	d, cmd := startFileDaemon(t, 14, shortPassword, Config{"nsca_workers": "2"})
	workers := d.waitWorkers(2, startTimeout)
	var all []int
	all = append(all, workers...)
	t.Cleanup(func() { endWorkers(t, all) })

	cl := Client{Password: shortPassword, Method: 14}
	round1, round2 := seqHosts("r1c", 8), seqHosts("r2c", 8)
	lo := now()
	sendSeqs(t, cl, d.Port, round1, 10)
	waitFileLines(t, cmd, 80)

	d.Signal(syscall.SIGHUP)
	// After SIGHUP: two new workers instead of the old ones.
	all = append(all, d.waitWorkers(2, stopTimeout, workers...)...)
	sendSeqs(t, cl, d.Port, round2, 10)
	waitFileLines(t, cmd, 160)
	hi := now()
	d.Stop()
	endWorkers(t, all)

	assertSeqs(t, commandsIn(t, cmd, lo, hi), append(round1, round2...), 10)
}

// TestDetach: without -f the daemon detaches, and relative paths in its
// configuration keep resolving against the directory it was started from
// (stock's own tests rely on this). It is stopped by the PID in pid_file.
func TestDetach(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "var"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmdFile := filepath.Join(dir, "var", "nsca.cmd")
	writeFile(t, cmdFile, "", 0o644)
	port := freePort(t)
	cfg := listenConfig(Config{
		"pid_file": "var/nsca.pid", "command_file": "var/nsca.cmd", "append_to_file": "1",
		"password": shortPassword, "decryption_method": "1",
	}, port)
	writeFile(t, filepath.Join(dir, "nsca.cfg"), cfg.text(), 0o600)
	out, err := os.Create(filepath.Join(dir, "nsca.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p := mustStart(t, "nsca (detaching)", nscaCmd(dir, out, "-c", "nsca.cfg"))
	if !p.exitWithin(startTimeout) {
		t.Fatalf("nsca without -f did not return within %v", startTimeout)
	}
	if !p.state.Success() {
		t.Fatalf("nsca without -f exited with %v:\n%s", p.state, readFile(t, out.Name()))
	}
	pidPath := filepath.Join(dir, "var", "nsca.pid")
	var pid int
	if !waitFor(startTimeout, func() bool { pid, _ = strconv.Atoi(strings.TrimSpace(readFile(t, pidPath))); return pid != 0 }) {
		t.Fatalf("no PID in the relative pid_file %s within %v; output:\n%s", pidPath, startTimeout, readFile(t, out.Name()))
	}
	killAtEnd(t, "the detached daemon", func() []int { return []int{pid} })
	if pid == p.cmd.Process.Pid {
		t.Errorf("the pid_file holds the PID of the process that should have detached (%d)", pid)
	}
	lo := now()
	Client{Password: shortPassword, Method: 1}.send(t, port, "detached\tsvc\t0\trelative paths after detaching\x17", 1)
	waitFileLines(t, cmdFile, 1)
	hi := now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if len(waitGone([]int{pid}, stopTimeout)) > 0 {
		t.Fatalf("the detached daemon %d did not exit within %v of SIGTERM", pid, stopTimeout)
	}
	assertLines(t, commandsIn(t, cmdFile, lo, hi), []string{
		serviceLine("detached", "svc", 0, "relative paths after detaching"),
	})
	if _, err := os.Stat(pidPath); !os.IsNotExist(err) {
		t.Errorf("the pid_file is still there after exit (stat: %v)", err)
	}
}

// TestCRLFPasswordLine: a configuration written with CRLF line endings is
// read as its author meant, without the carriage return in the password
// (issue 33; stock keeps it, and so every LF client was refused): a client
// whose send_nsca.cfg says the password on an LF line is served.
func TestCRLFPasswordLine(t *testing.T) {
	cmd := commandFile(t, t.TempDir())
	// After server_address and server_port, as the config's own lines.
	d := startDaemonWith(t, nil, daemonOpts{cfgTail: "command_file=" + cmd + "\nappend_to_file=1\r\npassword=secret\r\ndecryption_method=14\r\n"})
	lo := now()
	Client{Password: "secret", Method: 14}.send(t, d.Port, "crlf\tsvc\t0\tCRLF config\x17", 1)
	deliverAll(t, d, cmd, lo, []string{serviceLine("crlf", "svc", 0, "CRLF config")})
}

// TestSignalsRightAfterStart: a signal that arrives as soon as the daemon
// takes connections (a reload or stop just after start, e.g. by systemd
// after READY=1) must be handled: SIGHUP must not kill it, SIGTERM must end
// it with status 0. The signal is sent the moment connect() succeeds.
func TestSignalsRightAfterStart(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			for attempt := range 8 {
				dir := t.TempDir()
				// Started without waiting for the port, and without a cleanup:
				// every way out of an attempt ends the daemon.
				d := launchDaemon(t, Config{"command_file": commandFile(t, dir), "append_to_file": "1",
					"password": shortPassword, "decryption_method": "1"}, daemonOpts{dir: dir, noWait: true})
				p := d.p
				deadline := time.Now().Add(startTimeout)
				for {
					conn, err := dialLocal(d.Port, "", 100*time.Millisecond)
					if err == nil {
						conn.Close()
						break
					}
					if time.Now().After(deadline) || p.hasExited() {
						p.terminate(time.Second)
						t.Fatalf("the daemon never took connections: %v", err)
					}
					time.Sleep(time.Millisecond)
				}
				syscall.Kill(d.Pid(), sig)
				if sig == syscall.SIGHUP {
					time.Sleep(300 * time.Millisecond)
					if p.hasExited() {
						t.Fatalf("attempt %d: SIGHUP sent when the port first accepted killed the daemon: %v\nstderr:\n%s", attempt+1, p.state, d.Stderr())
					}
					if p.terminate(stopTimeout) || !p.state.Success() {
						t.Fatalf("attempt %d: SIGTERM after SIGHUP: %v", attempt+1, p.state)
					}
					continue
				}
				if !p.exitWithin(stopTimeout) {
					t.Fatalf("attempt %d: no exit within %v of SIGTERM", attempt+1, stopTimeout)
				}
				if !p.state.Success() {
					t.Fatalf("attempt %d: SIGTERM sent when the port first accepted: %v, want exit status 0\nstderr:\n%s", attempt+1, p.state, d.Stderr())
				}
			}
		})
	}
}

// TestDropPrivileges: with nsca_user and nsca_group the daemon serves as
// that user and group (it binds the port first), as stock does.
func TestDropPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change user")
	}
	// A directory the unprivileged user can reach, with a command file it
	// can write.
	dir, cmd := sharedDir(t, "nsca-privs-")
	d := startDaemonWith(t, Config{
		"command_file": cmd, "append_to_file": "1",
		"password": shortPassword, "decryption_method": "1",
		"nsca_user": "nobody", "nsca_group": "nogroup",
	}, daemonOpts{dir: dir})
	assertNobody(t, d.Pid(), "the daemon")
	lo := now()
	Client{Password: shortPassword, Method: 1}.send(t, d.Port, "nobody\tsvc\t0\tserved as nobody\x17", 1)
	deliverAll(t, d, cmd, lo, []string{serviceLine("nobody", "svc", 0, "served as nobody")})
}
