package tests

// The Debian package test installs nsca-fast over Debian's stock nsca
// package on this machine, runs the installed daemon on the stock package's
// untouched /etc/nsca.cfg, and purges it again. It changes the system, so it
// runs only with NSCA_DEB_TEST=1 and as root; it puts back what it changed
// (the stock package, /etc/nsca.cfg, policy-rc.d, the nagios user) at the
// end, pass or fail.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"nsca_fast/conf"
)

const (
	debPackage      = "nsca-fast"
	debStock        = "nsca"
	debInstalled    = "/usr/sbin/nsca"
	debConfig       = "/etc/nsca.cfg"
	debLogrotate    = "/etc/logrotate.d/nsca-fast"
	debSendConfig   = "/etc/send_nsca.cfg"
	debPolicyRcD    = "/usr/sbin/policy-rc.d"
	debAptTimeout   = 5 * time.Minute  // apt-get update / install
	debBuildTimeout = 5 * time.Minute  // scripts/build-deb.sh (go build)
	debCmdTimeout   = 2 * time.Minute  // dpkg -i, dpkg --purge, ...
	debWait         = 15 * time.Second // daemon start, result arrival, daemon stop
)

func TestDebInstall(t *testing.T) {
	root := debPrecheck(t)
	state := debSaveState(t)

	// 1. Debian's nsca package with its own /etc/nsca.cfg, without starting
	// its daemon.
	debPolicyDeny(t)
	debApt(t, "install", "-y", "-o", "Dpkg::Options::=--force-confold", "-o", "Dpkg::Options::=--force-confmiss", debStock)
	if got := debStatus(t, debStock); got != "install ok installed" {
		t.Fatalf("after apt-get install %s: status %q", debStock, got)
	}
	// Enabled at boot, as an administrator does it (Debian 12's package
	// leaves it disabled): the package keeps it so (TestDebKeepsBootChoice
	// installs over a disabled one).
	debEnableStock(t)
	sum := debSHA256(t, debConfig)
	t.Logf("%s of %s: sha256 %s", debConfig, debStock, sum)
	cfg, err := conf.Load(debConfig)
	if err != nil {
		t.Fatalf("nsca_fast's parser rejects Debian's %s: %v", debConfig, err)
	}
	if cfg.CommandFile == "" {
		t.Fatalf("%s sets no command_file; this test reads results from it", debConfig)
	}
	if cfg.ServerPort != 5667 && debPortBusy(cfg.ServerPort) {
		t.Fatalf("%s: server_port=%d is in use", debConfig, cfg.ServerPort)
	}
	if _, err := os.Lstat(cfg.CommandFile); err == nil {
		t.Fatalf("%s (command_file of %s) exists: a monitoring core seems to be installed; not touching it", cfg.CommandFile, debConfig)
	}
	// A changed /etc/nsca.cfg makes dpkg ask whether to keep it (the
	// package keeps an unchanged one by itself); answer "keep".
	var dpkgOpts []string
	if !debUnchangedConffile(t, debStock, debConfig) {
		t.Logf("%s differs from the file %s shipped: installing with --force-confold", debConfig, debStock)
		dpkgOpts = append(dpkgOpts, "--force-confold")
	}

	// 2. Our package, built from this checkout.
	deb := debBuild(t, root, t.TempDir())
	debCheckPackage(t, deb)
	out := debRun(t, debCmdTimeout, "dpkg", append(append([]string{"-i"}, dpkgOpts...), deb)...)
	t.Logf("dpkg -i:\n%s", out)
	// dpkg and the package agree: the existing file is kept, and said so
	// once; no daemon was started (policy-rc.d), and the package says so.
	debNoConffileNews(t, out)
	for _, want := range []string{"nsca-fast: kept the existing " + debConfig, "nsca-fast: nsca is not running; start it with: invoke-rc.d nsca start"} {
		if !strings.Contains(out, want) {
			t.Errorf("dpkg -i does not say %q:\n%s", want, out)
		}
	}

	// 3. It replaced the stock package and kept its configuration.
	if got := debSHA256(t, debConfig); got != sum {
		t.Errorf("dpkg -i changed %s: sha256 %s, was %s", debConfig, got, sum)
	}
	if got := debStatus(t, debPackage); got != "install ok installed" {
		t.Fatalf("dpkg -s %s: status %q, want install ok installed", debPackage, got)
	}
	if got := debStatus(t, debStock); strings.HasSuffix(got, " installed") {
		t.Errorf("%s is still installed (%q): Conflicts/Replaces did not remove it", debStock, got)
	}
	if owner := strings.TrimSpace(debRun(t, debCmdTimeout, "dpkg-query", "-S", debInstalled)); !strings.HasPrefix(owner, debPackage+":") {
		t.Errorf("dpkg-query -S %s: %q, want it owned by %s", debInstalled, owner, debPackage)
	}
	if v := debRun(t, debCmdTimeout, debInstalled, "-V"); !strings.Contains(v, "nsca_fast") {
		t.Errorf("%s -V: %q does not say nsca_fast", debInstalled, v)
	}
	check := debRun(t, debCmdTimeout, debInstalled, "--check-config", "-c", debConfig)
	for _, want := range []string{"command_file=" + cfg.CommandFile + "\n", "decryption_method=" + strconv.Itoa(cfg.DecryptionMethod) + "\n"} {
		if !strings.Contains(check, want) {
			t.Errorf("nsca --check-config -c %s does not print %q:\n%s", debConfig, want, check)
		}
	}
	if cfg.Password != "" && strings.Contains(check, cfg.Password) {
		t.Errorf("nsca --check-config prints the password")
	}
	uid, gid := debIdentity(t, cfg)
	if cfg.PidFile != "" {
		if fi, err := os.Stat(filepath.Dir(cfg.PidFile)); err != nil || !fi.IsDir() {
			t.Errorf("the directory of pid_file=%s is missing after installation (tmpfiles): %v", cfg.PidFile, err)
		}
	}

	// 4. The installed daemon on the untouched /etc/nsca.cfg, its command
	// file a FIFO made where that file says.
	fifo := debMakeFIFO(t, state, cfg.CommandFile, uid, gid)
	lines := openFIFOReader(t, fifo)
	daemon := debStartDaemon(t, debInstalled, "-c", debConfig, "-f")
	if cfg.PidFile != "" {
		b, err := os.ReadFile(cfg.PidFile)
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(daemon.pid()) {
			t.Errorf("pid_file %s holds %q (%v), want %d", cfg.PidFile, b, err, daemon.pid())
		}
	}
	if cfg.Workers == 0 && uid >= 0 {
		if got := debProcUID(daemon.pid()); got != uid {
			t.Errorf("the daemon runs as uid %d, want %d (nsca_user=%s)", got, uid, cfg.User)
		}
	}
	nonce := debNonce()
	debSend(t, cfg, fmt.Sprintf("deb-host\tdeb-service\t2\tdeb install test %s", nonce))
	want := regexp.MustCompile(`^\[[0-9]+\] PROCESS_SERVICE_CHECK_RESULT;deb-host;deb-service;2;deb install test ` + nonce + `$`)
	if line, ok := lines.Next(debWait); !ok {
		t.Errorf("no result in %s after %v; daemon log:\n%s", fifo, debWait, daemon.log.String())
	} else if !want.MatchString(line) {
		t.Errorf("%s: got %q, want %v", fifo, line, want)
	}
	if code := daemon.stop(t); code != 0 {
		t.Errorf("the daemon exited with status %d after SIGTERM; log:\n%s", code, daemon.log.String())
	}
	if cfg.PidFile != "" {
		if _, err := os.Stat(cfg.PidFile); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("pid_file %s is still there after the daemon stopped (%v)", cfg.PidFile, err)
		}
	}
	t.Logf("daemon log:\n%s", daemon.log.String())

	// 5. The init script: installed executable, enabled at boot, and it
	// runs the installed daemon with the pid file of /etc/nsca.cfg.
	debCheckInitScript(t, root)
	if cfg.PidFile == "" {
		t.Fatalf("%s sets no pid_file; the init script needs one", debConfig)
	}
	initd := func(action string) string { return debRun(t, debCmdTimeout, debInitScript, action) }
	t.Cleanup(func() { debKillInstalled(t) })
	initd("start")
	first := debRunningPid(t, cfg.PidFile)
	debSendAndRead(t, cfg, lines, "started by the init script")
	if out := initd("status"); !strings.Contains(out, "is running") {
		t.Errorf("%s status: %q", debInitScript, out)
	}
	initd("reload")
	debSendAndRead(t, cfg, lines, "after reload")
	if got := debRunningPid(t, cfg.PidFile); got != first {
		t.Errorf("reload replaced the daemon: pid %d, was %d", got, first)
	}

	// 6. Upgrades. With a running daemon and a policy that lets invoke-rc.d
	// act, the package restarts it: a new process on the new binary.
	debPolicy(t, 0)
	up1 := debRepack(t, deb, "1")
	out = debRun(t, debCmdTimeout, "dpkg", "-i", up1)
	t.Logf("dpkg -i (upgrade, running daemon, restart allowed):\n%s", out)
	debNoConffileNews(t, out)
	second := debRunningPid(t, cfg.PidFile)
	if second == first || !procGone(first) {
		t.Errorf("the upgrade did not restart the daemon: pid %d, was %d (gone: %v)", second, first, procGone(first))
	}
	if strings.Contains(out, "still run the previous") {
		t.Errorf("the upgrade restarted the daemon, but says it still runs the previous binary:\n%s", out)
	}
	debSendAndRead(t, cfg, lines, "after the restarting upgrade")

	// With a policy that forbids it (as in chroots), the daemon keeps the
	// old binary, and the package says so, naming the process.
	debPolicy(t, 101)
	up2 := debRepack(t, deb, "2")
	out = debRun(t, debCmdTimeout, "dpkg", "-i", up2)
	t.Logf("dpkg -i (upgrade, running daemon, restart forbidden):\n%s", out)
	debNoConffileNews(t, out)
	if got := debRunningPid(t, cfg.PidFile); got != second {
		t.Errorf("the forbidden restart happened anyway: pid %d, was %d", got, second)
	}
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", second)); exe != debInstalled+" (deleted)" {
		t.Errorf("/proc/%d/exe is %q after the upgrade, want the replaced binary", second, exe)
	}
	if want := regexp.MustCompile(`process\(es\) ([0-9 ]* )?` + strconv.Itoa(second) + `( [0-9 ]*)? still run the previous /usr/sbin/nsca.*restart`); !want.MatchString(out) {
		t.Errorf("the upgrade left pid %d on the old binary without saying so:\n%s", second, out)
	}
	initd("restart")
	third := debRunningPid(t, cfg.PidFile)
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", third)); third == second || exe != debInstalled {
		t.Errorf("%s restart: pid %d (was %d) runs %q", debInitScript, third, second, exe)
	}
	debSendAndRead(t, cfg, lines, "after restart by hand")

	// Without a running daemon an upgrade says nothing of restarts.
	initd("stop")
	if !waitFor(debWait, func() bool { return procGone(third) }) {
		t.Fatalf("%s stop: pid %d still runs", debInitScript, third)
	}
	out = debRun(t, debCmdTimeout, "dpkg", "-i", debRepack(t, deb, "3"))
	t.Logf("dpkg -i (upgrade, no daemon):\n%s", out)
	debNoConffileNews(t, out)
	if strings.Contains(out, "still run the previous") || len(debProcesses(debInstalled)) > 0 {
		t.Errorf("after an upgrade without a daemon: processes %v; output:\n%s", debProcesses(debInstalled), out)
	}
	if got := debSHA256(t, debConfig); got != sum {
		t.Errorf("the upgrades changed %s: sha256 %s, was %s", debConfig, got, sum)
	}

	// 7. Removing with a running daemon stops it; the conffiles (the init
	// script among them) and its links stay until the purge.
	initd("start")
	running := debRunningPid(t, cfg.PidFile)
	out = debRun(t, debCmdTimeout, "dpkg", "-r", debPackage)
	t.Logf("dpkg -r (running daemon):\n%s", out)
	if !waitFor(debWait, func() bool { return procGone(running) }) || len(debProcesses(debInstalled)) > 0 {
		t.Errorf("dpkg -r left the daemon running: %v", debProcesses(debInstalled))
	}
	if got := debStatus(t, debPackage); got != "deinstall ok config-files" {
		t.Errorf("after dpkg -r: status %q", got)
	}
	if _, err := os.Stat(debInitScript); err != nil {
		t.Errorf("dpkg -r removed the conffile %s: %v", debInitScript, err)
	}
	if len(debRcLinks(t)) == 0 {
		t.Errorf("dpkg -r removed the runlevel links of %s", debInitScript)
	}

	// 8. Purging (no daemon running) removes it all.
	out = debRun(t, debCmdTimeout, "dpkg", "--purge", debPackage)
	t.Logf("dpkg --purge:\n%s", out)
	debCheckPurged(t)

	// 9. Once more from nothing: install (no /etc/nsca.cfg: the sample),
	// remove without a daemon, install again from the kept conffiles, and
	// purge with a running daemon.
	if _, err := os.Lstat(debConfig); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s is still there after the purge (%v)", debConfig, err)
	}
	out = debRun(t, debCmdTimeout, "dpkg", "-i", deb)
	t.Logf("dpkg -i (no configuration):\n%s", out)
	if strings.Contains(out, "kept the existing") || strings.Contains(out, "Installing new version of config file") {
		t.Errorf("a first installation without %s claims to keep or replace one:\n%s", debConfig, out)
	}
	if b, want := debReadFile(t, debConfig), debReadFile(t, filepath.Join(root, "conf", "nsca.cfg")); !bytes.Equal(b, want) {
		t.Errorf("%s is not the sample after a first installation", debConfig)
	}
	out = debRun(t, debCmdTimeout, "dpkg", "-r", debPackage)
	t.Logf("dpkg -r (no daemon):\n%s", out)
	out = debRun(t, debCmdTimeout, "dpkg", "-i", deb)
	t.Logf("dpkg -i (from config-files):\n%s", out)
	debNoConffileNews(t, out)
	// The stock configuration again, whose command file this test reads.
	writeFile(t, debConfig, string(state.config), state.configMode)
	initd("start")
	running = debRunningPid(t, cfg.PidFile)
	debSendAndRead(t, cfg, lines, "before the purge")
	out = debRun(t, debCmdTimeout, "dpkg", "--purge", debPackage)
	t.Logf("dpkg --purge (running daemon):\n%s", out)
	if !waitFor(debWait, func() bool { return procGone(running) }) {
		t.Errorf("dpkg --purge left pid %d running", running)
	}
	debCheckPurged(t)
}

// debPrecheck skips the test unless it may install packages on this machine
// and port 5667 is free, and returns the checkout's root.
func debPrecheck(t *testing.T) string {
	t.Helper()
	if os.Getenv("NSCA_DEB_TEST") != "1" {
		t.Skip("installs the nsca-fast .deb on this machine in place of the nsca package; " +
			"set NSCA_DEB_TEST=1 to run it (scripts/test.sh does in CI)")
	}
	if os.Geteuid() != 0 {
		t.Skip("NSCA_DEB_TEST=1, but installing packages needs root")
	}
	for _, tool := range []string{"apt-get", "dpkg", "dpkg-deb", "dpkg-query", "bash", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("NSCA_DEB_TEST=1, but %s is not installed", tool)
		}
	}
	root, err := filepath.Abs("..") // go test runs in the package directory
	if err != nil {
		t.Fatal(err)
	}
	// Debian's nsca.cfg listens on port 5667 of every address; a daemon
	// already there would take our results.
	if debPortBusy(5667) {
		t.Skip("NSCA_DEB_TEST=1, but port 5667 is in use (stop the daemon listening there, e.g. scripts/run.sh)")
	}
	return root
}

// debInitScript is the package's init script, under the stock name.
const debInitScript = "/etc/init.d/nsca"

// debCheckInitScript checks the installed init script: the package's, mode
// 0755 although the stock package's removal takes the execute bit off its
// own, and enabled in the runlevels its LSB header names.
func debCheckInitScript(t *testing.T, root string) {
	t.Helper()
	fi, err := os.Stat(debInitScript)
	if err != nil {
		t.Fatalf("%s: %v", debInitScript, err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("%s has mode %v, want 0755", debInitScript, fi.Mode().Perm())
	}
	if !bytes.Equal(debReadFile(t, debInitScript), debReadFile(t, filepath.Join(root, "conf", "debian", "nsca.init"))) {
		t.Errorf("%s is not conf/debian/nsca.init", debInitScript)
	}
	links := debRcLinks(t)
	for _, rl := range []string{"2", "3", "4", "5"} {
		if !slices.ContainsFunc(links, func(l string) bool { return strings.HasPrefix(l, "/etc/rc"+rl+".d/S") }) {
			t.Errorf("no start link in /etc/rc%s.d: %v", rl, links)
		}
	}
	for _, rl := range []string{"0", "1", "6"} {
		if !slices.ContainsFunc(links, func(l string) bool { return strings.HasPrefix(l, "/etc/rc"+rl+".d/K") }) {
			t.Errorf("no stop link in /etc/rc%s.d: %v", rl, links)
		}
	}
}

// debRcLinks lists the runlevel links to the init script.
func debRcLinks(t *testing.T) []string {
	t.Helper()
	links, err := filepath.Glob("/etc/rc[0-6S].d/[SK][0-9][0-9]nsca")
	if err != nil {
		t.Fatal(err)
	}
	return links
}

// debCheckPurged checks that a purge left nothing: no package, binary,
// init script, runlevel links or process.
func debCheckPurged(t *testing.T) {
	t.Helper()
	if got := debStatus(t, debPackage); strings.HasSuffix(got, " installed") || strings.Contains(got, "config-files") {
		t.Errorf("after dpkg --purge %s: status %q", debPackage, got)
	}
	for _, path := range []string{debInstalled, debInitScript} {
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there after dpkg --purge (%v)", path, err)
		}
	}
	if links := debRcLinks(t); len(links) > 0 {
		t.Errorf("runlevel links left after dpkg --purge: %v", links)
	}
	if pids := debProcesses(debInstalled); len(pids) > 0 {
		t.Errorf("%s processes still running after dpkg --purge: %v", debInstalled, pids)
	}
}

// debNoConffileNews fails when dpkg says it installed a new version of
// /etc/nsca.cfg: the package keeps the administrator's file, and says so
// itself.
func debNoConffileNews(t *testing.T, out string) {
	t.Helper()
	if strings.Contains(out, "Installing new version of config file "+debConfig) {
		t.Errorf("dpkg says it installs a new %s:\n%s", debConfig, out)
	}
}

// debRunningPid waits for the pid file to name a running installed daemon
// and returns its pid.
func debRunningPid(t *testing.T, pidFile string) int {
	t.Helper()
	var pid int
	ok := waitFor(debWait, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0 && slices.Contains(debProcesses(debInstalled), pid)
	})
	if !ok {
		t.Fatalf("pid_file %s does not name a running %s (pid %d; running: %v)", pidFile, debInstalled, pid, debProcesses(debInstalled))
	}
	return pid
}

// debSendAndRead sends one result and waits for it in the command file.
func debSendAndRead(t *testing.T, cfg *conf.Config, lines *FIFOReader, what string) {
	t.Helper()
	nonce := debNonce()
	debSend(t, cfg, fmt.Sprintf("deb-host\tdeb-service\t0\t%s %s", what, nonce))
	want := regexp.MustCompile(`^\[[0-9]+\] PROCESS_SERVICE_CHECK_RESULT;deb-host;deb-service;0;` + regexp.QuoteMeta(what+" "+nonce) + `$`)
	line, ok := lines.Next(debWait)
	if !ok || !want.MatchString(line) {
		t.Errorf("%s: command file line %q (%v), want %v", what, line, ok, want)
	}
}

// debRepack makes a copy of deb whose version has suffix "+upN", for an
// upgrade; dpkg replaces the binary (a new inode) as in a real upgrade.
func debRepack(t *testing.T, deb, n string) string {
	t.Helper()
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	debRun(t, debCmdTimeout, "dpkg-deb", "-R", deb, tree)
	control := filepath.Join(tree, "DEBIAN", "control")
	text := string(debReadFile(t, control))
	version := strings.TrimSpace(debRun(t, debCmdTimeout, "dpkg-deb", "-f", deb, "Version"))
	text = strings.Replace(text, "Version: "+version+"\n", "Version: "+version+"+up"+n+"\n", 1)
	writeFile(t, control, text, 0o644)
	out := filepath.Join(dir, "nsca-fast_up"+n+".deb")
	debRun(t, debCmdTimeout, "dpkg-deb", "--root-owner-group", "-Zgzip", "--build", tree, out)
	return out
}

// debKillInstalled ends, by pid, any installed daemon a failed step left.
func debKillInstalled(t *testing.T) {
	for _, pid := range debProcesses(debInstalled) {
		t.Logf("cleanup: killing %s pid %d", debInstalled, pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	waitGone(debProcesses(debInstalled), debWait)
}
