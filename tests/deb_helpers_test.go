package tests

// Helpers of the Debian package tests: building and checking the .deb,
// running dpkg and apt-get, the installed daemon and send_nsca.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"nsca_fast/conf"
)

// debBuild runs scripts/build-deb.sh into dir and returns the package's path.
func debBuild(t *testing.T, root, dir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), debBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "build-deb.sh"), dir)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/build-deb.sh %s: %v\n%s%s", dir, err, stdout, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	deb := lines[len(lines)-1]
	arch := strings.TrimSpace(debRun(t, debCmdTimeout, "dpkg", "--print-architecture"))
	name := regexp.MustCompile(`^nsca-fast_[0-9][A-Za-z0-9.+~]*_` + regexp.QuoteMeta(arch) + `\.deb$`)
	if filepath.Dir(deb) != dir || !name.MatchString(filepath.Base(deb)) {
		t.Fatalf("scripts/build-deb.sh printed %q, want %s/nsca-fast_<version>_%s.deb", deb, dir, arch)
	}
	if _, err := os.Stat(deb); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s", deb)
	return deb
}

// debCheckPackage checks the control fields and the file list of the .deb.
func debCheckPackage(t *testing.T, deb string) {
	t.Helper()
	fields := map[string]string{}
	for _, f := range []string{"Package", "Provides", "Conflicts", "Replaces", "Depends"} {
		fields[f] = strings.TrimSpace(debRun(t, debCmdTimeout, "dpkg-deb", "-f", deb, f))
	}
	if fields["Package"] != debPackage {
		t.Errorf("Package: %q", fields["Package"])
	}
	for _, f := range []string{"Provides", "Conflicts", "Replaces"} {
		if !debListHas(fields[f], debStock) {
			t.Errorf("%s: %q does not name %s", f, fields[f], debStock)
		}
	}
	for _, dep := range []string{"libc6", "libmcrypt4", "libssl3"} {
		if !debListHas(fields["Depends"], dep) {
			t.Errorf("Depends: %q does not name %s", fields["Depends"], dep)
		}
	}
	list := debRun(t, debCmdTimeout, "dpkg-deb", "-c", deb)
	for _, path := range []string{"./usr/sbin/nsca", "./etc/nsca.cfg", "./lib/systemd/system/nsca.service",
		"./lib/systemd/system/nsca.socket", "./usr/share/man/man8/nsca.8.gz", "./usr/share/man/man5/nsca.cfg.5.gz", "./usr/share/doc/nsca-fast/copyright",
		"./usr/share/doc/nsca-fast/README.md.gz", "./etc/logrotate.d/nsca-fast", "." + debInitScript} {
		if !strings.Contains(list, " "+path+"\n") {
			t.Errorf("the package lacks %s; dpkg-deb -c:\n%s", path, list)
		}
	}
	conffiles := debRun(t, debCmdTimeout, "dpkg-deb", "--info", deb, "conffiles")
	if want := debConfig + "\n" + debLogrotate + "\n" + debInitScript; strings.TrimSpace(conffiles) != want {
		t.Errorf("conffiles: %q, want %q", conffiles, want)
	}
	tree := t.TempDir()
	debRun(t, debCmdTimeout, "dpkg-deb", "-x", deb, tree)
	unit := string(debReadFile(t, filepath.Join(tree, "lib/systemd/system/nsca.service")))
	for _, want := range []string{"Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "ExecStart=/usr/sbin/nsca -c /etc/nsca.cfg -f"} {
		if !strings.Contains(unit, want+"\n") {
			t.Errorf("nsca.service lacks %q:\n%s", want, unit)
		}
	}
	// logrotate -d reads the snippet and rotates nothing.
	snippet := filepath.Join(tree, strings.TrimPrefix(debLogrotate, "/"))
	if _, err := os.Stat(rotLogrotate); err == nil {
		out, err := exec.Command(rotLogrotate, "-d", "-s", filepath.Join(t.TempDir(), "state"), snippet).CombinedOutput()
		if err != nil || strings.Contains(string(out), "error:") {
			t.Errorf("logrotate -d %s: %v\n%s", debLogrotate, err, out)
		}
	}
}

// debListHas reports whether a relationship field names pkg.
func debListHas(field, pkg string) bool {
	for _, alt := range strings.FieldsFunc(field, func(r rune) bool { return r == ',' || r == '|' }) {
		name, _, _ := strings.Cut(strings.TrimSpace(alt), " ")
		if name == pkg {
			return true
		}
	}
	return false
}

// debUnchangedConffile reports whether path still has the content pkg
// shipped (its md5sum in dpkg's conffile record).
func debUnchangedConffile(t *testing.T, pkg, path string) bool {
	t.Helper()
	out := debRun(t, debCmdTimeout, "dpkg-query", "-W", "-f=${Conffiles}\n", pkg)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == path {
			sum := strings.TrimSpace(debRun(t, debCmdTimeout, "md5sum", path))
			return strings.HasPrefix(sum, f[1]+" ")
		}
	}
	return false
}

// debIdentity looks up nsca_user and nsca_group, which the package must have
// made available (it creates nagios); -1 for an option left empty.
func debIdentity(t *testing.T, cfg *conf.Config) (uid, gid int) {
	t.Helper()
	uid, gid = -1, -1
	if cfg.User != "" {
		u, err := user.Lookup(cfg.User)
		if err != nil {
			t.Fatalf("nsca_user=%s of %s does not exist after installing %s: %v", cfg.User, debConfig, debPackage, err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	if cfg.Group != "" {
		g, err := user.LookupGroup(cfg.Group)
		if err != nil {
			t.Fatalf("nsca_group=%s of %s does not exist: %v", cfg.Group, debConfig, err)
		}
		gid, _ = strconv.Atoi(g.Gid)
	}
	return uid, gid
}

// debMakeFIFO makes a FIFO at path that the daemon's user may write, with
// the directories above it; the state's cleanup removes what it made.
func debMakeFIFO(t *testing.T, s *debState, path string, uid, gid int) string {
	t.Helper()
	var missing []string
	for d := filepath.Dir(path); d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil {
			t.Fatal(err)
		}
		s.created = append(s.created, missing[i])
	}
	if err := syscall.Mkfifo(path, 0o660); err != nil {
		t.Fatalf("mkfifo %s: %v", path, err)
	}
	s.created = append(s.created, path)
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		t.Fatal(err)
	}
	return path
}

type debDaemon struct {
	p   *proc
	log *lockedBuffer
}

func (d *debDaemon) pid() int { return d.p.cmd.Process.Pid }

// debStartDaemon starts the daemon and waits until it says it listens.
func debStartDaemon(t *testing.T, bin string, args ...string) *debDaemon {
	t.Helper()
	d := &debDaemon{log: &lockedBuffer{}}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = d.log, d.log
	d.p = mustStart(t, bin, cmd)
	t.Cleanup(func() {
		if !d.p.hasExited() {
			d.p.cmd.Process.Kill()
			<-d.p.exited
		}
	})
	listening := func() bool { return strings.Contains(d.log.String(), " listening on ") }
	waitFor(debWait, func() bool { return listening() || d.p.hasExited() })
	switch {
	case listening():
	case d.p.hasExited():
		t.Fatalf("%s %s exited at start (%v); log:\n%s", bin, strings.Join(args, " "), d.p.err, d.log.String())
	default:
		t.Fatalf("%s did not report listening within %v; log:\n%s", bin, debWait, d.log.String())
	}
	return d
}

// stop sends SIGTERM to the daemon's PID and returns its exit status.
func (d *debDaemon) stop(t *testing.T) int {
	t.Helper()
	if d.p.terminate(debWait) {
		t.Errorf("the daemon did not stop within %v of SIGTERM; it was killed", debWait)
	}
	return d.p.state.ExitCode()
}

// debSend sends one result with Debian's send_nsca, using
// /etc/send_nsca.cfg when its settings match the daemon's.
func debSend(t *testing.T, cfg *conf.Config, input string) {
	t.Helper()
	cl := Client{Password: cfg.Password, Method: cfg.DecryptionMethod}
	method, password, err := debClientSettings(debSendConfig)
	if err != nil || method != cfg.DecryptionMethod || password != cfg.Password {
		t.Logf("%s does not match %s (%v); using encryption_method=%d and its password", debSendConfig, debConfig, err, cfg.DecryptionMethod)
	} else {
		cl.CfgPath = debSendConfig
		t.Logf("sending with %s (encryption_method=%d, matching %s)", debSendConfig, method, debConfig)
	}
	cl.send(t, cfg.ServerPort, input, 1)
}

// debClientSettings reads encryption_method and password from a
// send_nsca.cfg, with send_nsca's defaults (1, empty).
func debClientSettings(path string) (method int, password string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, "", err
	}
	method = 1
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch name {
		case "encryption_method":
			if method, err = strconv.Atoi(strings.TrimSpace(value)); err != nil {
				return 0, "", fmt.Errorf("encryption_method=%q", value)
			}
		case "password":
			password = value
		}
	}
	return method, password, nil
}

// debStatus is dpkg's status of pkg ("install ok installed", ...), or "" if
// dpkg has never heard of it.
func debStatus(t *testing.T, pkg string) string {
	t.Helper()
	out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", pkg).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// debApt runs apt-get non-interactively, updating the package lists once
// if the first attempt fails (a fresh container has none).
func debApt(t *testing.T, args ...string) {
	t.Helper()
	if err := debAptTry(args...); err != nil {
		t.Logf("apt-get %s: %v; running apt-get update", strings.Join(args, " "), err)
		if err := debAptTry("update"); err != nil {
			t.Fatalf("apt-get update: %v", err)
		}
		if err := debAptTry(args...); err != nil {
			t.Fatalf("apt-get %s: %v", strings.Join(args, " "), err)
		}
	}
}

func debTryApt(t *testing.T, args ...string) {
	t.Helper()
	if err := debAptTry(args...); err != nil {
		t.Errorf("cleanup: apt-get %s: %v", strings.Join(args, " "), err)
	}
}

func debAptTry(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), debAptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-q", "-o", "DPkg::Lock::Timeout=120"}, args...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

// debRun runs a command to completion within timeout (standard input is
// /dev/null, so dpkg cannot wait for an answer) and returns its output.
func debRun(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	out, err := debExec(timeout, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func debTry(t *testing.T, timeout time.Duration, name string, args ...string) {
	t.Helper()
	if out, err := debExec(timeout, name, args...); err != nil {
		t.Errorf("cleanup: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// debExec runs a command within timeout. dpkg is run again while another
// dpkg or apt holds its lock (on a shared machine or an image with
// unattended upgrades), since dpkg itself does not wait for it.
func debExec(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err == nil || name != "dpkg" || !bytes.Contains(out, []byte("lock was locked by another process")) {
			return string(out), err
		}
		select {
		case <-ctx.Done():
			return string(out), err
		case <-time.After(2 * time.Second):
		}
	}
}

func debSHA256(t *testing.T, path string) string {
	t.Helper()
	sum := sha256.Sum256(debReadFile(t, path))
	return hex.EncodeToString(sum[:])
}

func debReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// debPortBusy reports whether something accepts connections on the port.
func debPortBusy(port int) bool {
	c, err := dialLocal(port, "", time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// debProcUID is the real uid of a process, -1 if it cannot be read.
func debProcUID(pid int) int {
	ids := procStatus(pid, "Uid:")
	if len(ids) == 0 {
		return -1
	}
	n, _ := strconv.Atoi(ids[0])
	return n
}

// debProcesses lists the processes running the program at path (also after
// it was deleted).
func debProcesses(path string) []int {
	var pids []int
	for _, pid := range procPIDs() {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err == nil && (exe == path || exe == path+" (deleted)") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func debNonce() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}
