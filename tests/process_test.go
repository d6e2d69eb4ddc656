package tests

import (
	"fmt"
	"net"
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

// rewriteConfig replaces the daemon's configuration file with cfg, keeping
// its address and port.
func (d *Daemon) rewriteConfig(t *testing.T, cfg Config) {
	t.Helper()
	c := Config{"server_address": "127.0.0.1", "server_port": strconv.Itoa(d.Port)}
	for k, v := range cfg {
		c[k] = v
	}
	if err := os.WriteFile(d.CfgPath, []byte(c.text()), 0o600); err != nil {
		t.Fatal(err)
	}
}

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
	d.rewriteConfig(t, cfg)
	d.Signal(syscall.SIGHUP)
	time.Sleep(time.Second)
	if d.p.hasExited() {
		t.Fatalf("the daemon exited on SIGHUP: %v", d.p.state)
	}
	Client{Password: "after", Method: 14}.send(t, d.Port, "reload\tsvc\t1\tafter SIGHUP\x17", 1)
	waitFileLines(t, cmd, 2)
	// The old settings no longer work.
	if out, err := (Client{Password: "before", Method: 1}).run(t, d.Port, "reload\tsvc\t2\told settings\x17"); err != nil && strings.Contains(err.Error(), "timed out") {
		t.Fatalf("send_nsca: %v\n%s", err, out)
	}
	time.Sleep(200 * time.Millisecond)
	hi := now()
	d.Stop()
	assertLines(t, stripTimes(t, completeLines(readFile(t, cmd)), lo, hi), []string{
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
	bad := Config{"no_such_option": "1"}
	for k, v := range cfg {
		bad[k] = v
	}
	d.rewriteConfig(t, bad)
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

// childrenOf returns the PIDs whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 {
			if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// waitWorkers waits until pid has n children and returns them.
func waitWorkers(t *testing.T, pid, n int) []int {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for {
		kids := childrenOf(pid)
		if len(kids) == n {
			return kids
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon %d has children %v, want %d workers", pid, kids, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// endWorkers waits for the workers to be gone; any left are killed by PID
// and fail the test.
func endWorkers(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(stopTimeout)
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range left {
				syscall.Kill(p, syscall.SIGKILL)
			}
			t.Errorf("workers %v were still running %v after the daemon was stopped; killed", left, stopTimeout)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWorkers: with nsca_workers=2 results from concurrent clients all
// arrive; SIGHUP replaces the workers; SIGTERM ends the supervisor (status
// 0) and every worker.
func TestWorkers(t *testing.T) {
	cmd := commandFile(t, t.TempDir())
	d := startDaemon(t, Config{
		"command_file":      cmd,
		"append_to_file":    "1",
		"password":          shortPassword,
		"decryption_method": "14",
		"nsca_workers":      "2",
	})
	pid := d.p.cmd.Process.Pid
	workers := waitWorkers(t, pid, 2)
	var all []int
	all = append(all, workers...)
	t.Cleanup(func() { endWorkers(t, all) })

	send := func(round, clients, per int) {
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var in strings.Builder
				for i := range per {
					fmt.Fprintf(&in, "r%dc%d\tsvc\t%d\tseq %d\x17", round, c, i%4, i)
				}
				out, err := (Client{Password: shortPassword, Method: 14}).run(t, d.Port, in.String())
				if err != nil || !strings.Contains(out, fmt.Sprintf("%d data packet(s) sent", per)) {
					t.Errorf("client %d: %v: %s", c, err, out)
				}
			}()
		}
		wg.Wait()
	}
	lo := now()
	send(1, 8, 10)
	waitFileLines(t, cmd, 80)

	d.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(stopTimeout)
	var replaced []int
	for {
		kids := childrenOf(pid)
		if len(kids) == 2 && !slices.Contains(kids, workers[0]) && !slices.Contains(kids, workers[1]) {
			replaced = kids
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGHUP the workers are %v, want two new ones instead of %v", kids, workers)
		}
		time.Sleep(50 * time.Millisecond)
	}
	all = append(all, replaced...)
	send(2, 8, 10)
	waitFileLines(t, cmd, 160)
	hi := now()
	d.Stop()
	endWorkers(t, all)

	lines := stripTimes(t, completeLines(readFile(t, cmd)), lo, hi)
	if len(lines) != 160 {
		t.Fatalf("%d lines, want 160", len(lines))
	}
	next := map[string]int{}
	for _, l := range lines {
		var round, c, rc, seq int
		if _, err := fmt.Sscanf(l, "PROCESS_SERVICE_CHECK_RESULT;r%dc%d;svc;%d;seq %d", &round, &c, &rc, &seq); err != nil {
			t.Errorf("unexpected line %q: %v", l, err)
			continue
		}
		key := fmt.Sprintf("r%dc%d", round, c)
		if seq != next[key] || rc != seq%4 {
			t.Errorf("%s: seq %d rc %d, want seq %d", key, seq, rc, next[key])
		}
		next[key] = seq + 1
	}
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
	if err := os.WriteFile(cmdFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cfg := Config{
		"server_address": "127.0.0.1", "server_port": strconv.Itoa(port),
		"pid_file": "var/nsca.pid", "command_file": "var/nsca.cmd", "append_to_file": "1",
		"password": shortPassword, "decryption_method": "1",
	}
	if err := os.WriteFile(filepath.Join(dir, "nsca.cfg"), []byte(cfg.text()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "nsca.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(daemonBin(), "-c", "nsca.cfg")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	p, err := startProc("nsca (detaching)", cmd)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(startTimeout):
		p.terminate(time.Second)
		t.Fatalf("nsca without -f did not return within %v", startTimeout)
	}
	if !p.state.Success() {
		t.Fatalf("nsca without -f exited with %v:\n%s", p.state, readFile(t, out.Name()))
	}
	pidPath := filepath.Join(dir, "var", "nsca.pid")
	var pid int
	deadline := time.Now().Add(startTimeout)
	for pid == 0 {
		pid, _ = strconv.Atoi(strings.TrimSpace(readFile(t, pidPath)))
		if pid == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no PID in the relative pid_file %s within %v; output:\n%s", pidPath, startTimeout, readFile(t, out.Name()))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Cleanup(func() {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("the detached daemon %d was still running at the end; killed", pid)
		}
	})
	if pid == cmd.Process.Pid {
		t.Errorf("the pid_file holds the PID of the process that should have detached (%d)", pid)
	}
	lo := now()
	Client{Password: shortPassword, Method: 1}.send(t, port, "detached\tsvc\t0\trelative paths after detaching\x17", 1)
	waitFileLines(t, cmdFile, 1)
	hi := now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(stopTimeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the detached daemon %d did not exit within %v of SIGTERM", pid, stopTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	assertLines(t, stripTimes(t, completeLines(readFile(t, cmdFile)), lo, hi), []string{
		serviceLine("detached", "svc", 0, "relative paths after detaching"),
	})
	if _, err := os.Stat(pidPath); !os.IsNotExist(err) {
		t.Errorf("the pid_file is still there after exit (stat: %v)", err)
	}
}

// TestCRLFPasswordLine: a configuration written with CRLF line endings
// keeps the carriage return in the password, as stock and send_nsca both
// do, so a pair of CRLF files still match.
func TestCRLFPasswordLine(t *testing.T) {
	dir := t.TempDir()
	cmd := commandFile(t, dir)
	port := freePort(t)
	text := "server_address=127.0.0.1\nserver_port=" + strconv.Itoa(port) + "\ncommand_file=" + cmd +
		"\nappend_to_file=1\r\npassword=secret\r\ndecryption_method=14\r\n"
	cfgPath := filepath.Join(dir, "nsca.cfg")
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(dir, "nsca.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	c := exec.Command(daemonBin(), "-c", cfgPath, "-f")
	c.Dir = dir
	c.Stdout, c.Stderr = stderr, stderr
	p, err := startProc("nsca", c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.terminate(stopTimeout) })
	if err := waitPort(p, port, startTimeout); err != nil {
		t.Fatalf("%v\n%s", err, readFile(t, stderr.Name()))
	}
	// send_nsca keeps the '\r' of a CRLF password line as well.
	lo := now()
	Client{Password: "secret\r", Method: 14}.send(t, port, "crlf\tsvc\t0\tCRLF config\x17", 1)
	waitFileLines(t, cmd, 1)
	hi := now()
	if p.terminate(stopTimeout) || !p.state.Success() {
		t.Errorf("the daemon did not exit 0 on SIGTERM: %v", p.state)
	}
	assertLines(t, stripTimes(t, completeLines(readFile(t, cmd)), lo, hi), []string{serviceLine("crlf", "svc", 0, "CRLF config")})
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
				port := freePort(t)
				cfg := Config{"server_address": "127.0.0.1", "server_port": strconv.Itoa(port),
					"command_file": commandFile(t, dir), "append_to_file": "1",
					"password": shortPassword, "decryption_method": "1"}
				cfgPath := filepath.Join(dir, "nsca.cfg")
				if err := os.WriteFile(cfgPath, []byte(cfg.text()), 0o600); err != nil {
					t.Fatal(err)
				}
				var stderr strings.Builder
				c := exec.Command(daemonBin(), "-c", cfgPath, "-f")
				c.Dir = dir
				c.Stderr = &lockedWriter{w: &stderr}
				p, err := startProc("nsca", c)
				if err != nil {
					t.Fatal(err)
				}
				addr := "127.0.0.1:" + strconv.Itoa(port)
				deadline := time.Now().Add(startTimeout)
				for {
					conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
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
				syscall.Kill(c.Process.Pid, sig)
				if sig == syscall.SIGHUP {
					time.Sleep(300 * time.Millisecond)
					if p.hasExited() {
						t.Fatalf("attempt %d: SIGHUP sent when the port first accepted killed the daemon: %v\nstderr:\n%s", attempt+1, p.state, stderr.String())
					}
					if p.terminate(stopTimeout) || !p.state.Success() {
						t.Fatalf("attempt %d: SIGTERM after SIGHUP: %v", attempt+1, p.state)
					}
					continue
				}
				select {
				case <-p.exited:
				case <-time.After(stopTimeout):
					p.terminate(time.Second)
					t.Fatalf("attempt %d: no exit within %v of SIGTERM", attempt+1, stopTimeout)
				}
				if !p.state.Success() {
					t.Fatalf("attempt %d: SIGTERM sent when the port first accepted: %v, want exit status 0\nstderr:\n%s", attempt+1, p.state, stderr.String())
				}
			}
		})
	}
}

// lockedWriter serialises writes from exec's copying goroutine and reads.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestDropPrivileges: with nsca_user and nsca_group the daemon serves as
// that user and group (it binds the port first), as stock does.
func TestDropPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change user")
	}
	// A directory the unprivileged user can reach, with a command file it
	// can write.
	dir, err := os.MkdirTemp("", "nsca-privs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := filepath.Join(dir, "nsca.cmd")
	if err := os.WriteFile(cmd, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(cmd, 0o666)
	d := startDaemonIn(t, dir, Config{
		"command_file": cmd, "append_to_file": "1",
		"password": shortPassword, "decryption_method": "1",
		"nsca_user": "nobody", "nsca_group": "nogroup",
	})
	status := readFile(t, fmt.Sprintf("/proc/%d/status", d.p.cmd.Process.Pid))
	for _, field := range []string{"Uid:", "Gid:"} {
		for _, l := range strings.Split(status, "\n") {
			if strings.HasPrefix(l, field) {
				ids := strings.Fields(strings.TrimPrefix(l, field))
				for _, id := range ids {
					if id != "65534" {
						t.Errorf("%s %v, want all 65534 (nobody/nogroup)", field, ids)
						break
					}
				}
			}
		}
	}
	if groups := regexp.MustCompile(`(?m)^Groups:\s*(.*)$`).FindStringSubmatch(status); groups != nil && strings.TrimSpace(groups[1]) != "" && strings.TrimSpace(groups[1]) != "65534" {
		t.Errorf("supplementary groups %q kept after dropping privileges", groups[1])
	}
	lo := now()
	Client{Password: shortPassword, Method: 1}.send(t, d.Port, "nobody\tsvc\t0\tserved as nobody\x17", 1)
	deliverAll(t, d, cmd, lo, []string{serviceLine("nobody", "svc", 0, "served as nobody")})
}
