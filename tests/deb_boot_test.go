package tests

// The package keeps whether nsca starts at boot: installed over a stock nsca
// that an administrator enabled, it is enabled; over one that is disabled
// (as Debian 12's package leaves it, or disabled with update-rc.d, its
// links removed, or run by inetd) nothing starts at boot, and the package
// starts nothing, on the installation and on an upgrade. Like
// TestDebInstall it changes this machine, so it runs only with
// NSCA_DEB_TEST=1 and as root, and puts back what it changed.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// debInetdLine is the line stock's README.Debian has inetd run nsca with.
const debInetdLine = "5667\tstream\ttcp\tnowait\tnagios\t/usr/sbin/tcpd\t/usr/sbin/nsca -c /etc/nsca.cfg --inetd\n"

func TestDebKeepsBootChoice(t *testing.T) {
	root := debPrecheck(t)
	debSaveState(t)
	t.Cleanup(func() { debKillInstalled(t) })
	stock := debDownloadStock(t, t.TempDir())
	deb := debBuild(t, root, t.TempDir())
	const noStart = "no start link in /etc/rc[2-5].d"
	for _, c := range []struct {
		name    string
		admin   func(t *testing.T) // what the administrator did after installing stock
		enabled bool
		why     []string // what the package says keeps it disabled
	}{
		// Debian 12's config script answers nsca/run-nsca-daemon with
		// false on a first installation, also here; an administrator who
		// enables the daemon leaves that answer as it is.
		{"enabled by hand", debEnableStock, true, nil},
		{"as stock installs it", func(*testing.T) {}, false, []string{noStart, "debconf nsca/run-nsca-daemon=false"}},
		{"update-rc.d disable", func(t *testing.T) {
			debEnableStock(t)
			debRun(t, debCmdTimeout, "update-rc.d", "nsca", "disable")
		}, false, []string{noStart}},
		{"rc links removed", func(t *testing.T) {
			debEnableStock(t)
			debRun(t, debCmdTimeout, "update-rc.d", "-f", "nsca", "remove")
		}, false, []string{noStart}},
		{"inetd", func(t *testing.T) {
			debEnableStock(t)
			debAppendFile(t, "/etc/inetd.conf", debInetdLine)
		}, false, []string{"inetd runs nsca (/etc/inetd.conf)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Stock from scratch, its daemon not started.
			for _, pkg := range []string{debPackage, debStock} {
				if got := debStatus(t, pkg); got != "" && !strings.Contains(got, "not-installed") {
					debRun(t, debCmdTimeout, "dpkg", "--purge", pkg)
				}
			}
			debPolicyDeny(t)
			debRun(t, debCmdTimeout, "dpkg", "-i", "--force-confmiss", stock)
			if got := debRunDaemon(); got != "false" {
				t.Logf("debconf's nsca/run-nsca-daemon is %q after installing %s", got, debStock)
			}
			c.admin(t)
			// With a policy that lets invoke-rc.d start anything, a daemon
			// that does not run was not asked to. An enabled one is not
			// started (it would take port 5667): its start is refused.
			if c.enabled {
				debPolicyDeny(t)
			} else {
				debPolicy(t, 0)
			}
			out := debRun(t, debCmdTimeout, "dpkg", "-i", deb)
			t.Logf("dpkg -i:\n%s", out)
			debCheckBoot(t, "the installation", out, c.enabled, c.why)
			out = debRun(t, debCmdTimeout, "dpkg", "-i", debRepack(t, deb, "1"))
			t.Logf("dpkg -i (upgrade):\n%s", out)
			debCheckBoot(t, "an upgrade", out, c.enabled, c.why)
			debRun(t, debCmdTimeout, "dpkg", "--purge", debPackage)
		})
	}
}

// debCheckBoot checks what the package did after step (its dpkg output is
// out): an enabled daemon has its start links and systemd link, a disabled
// one neither, says why, and does not run.
func debCheckBoot(t *testing.T, step, out string, enabled bool, why []string) {
	t.Helper()
	links := debRcLinks(t)
	starts := slices.ContainsFunc(links, func(l string) bool {
		return strings.Contains(l, ".d/S") && !strings.HasPrefix(l, "/etc/rc0.d/") && !strings.HasPrefix(l, "/etc/rc6.d/")
	})
	wants, err := filepath.Glob("/etc/systemd/system/*.wants/nsca.service")
	if err != nil {
		t.Fatal(err)
	}
	systemd := "(no systemctl)"
	if _, err := exec.LookPath("systemctl"); err == nil {
		// Without a running systemd it reads the unit files and links.
		b, _ := exec.Command("systemctl", "is-enabled", "nsca.service").Output()
		systemd = strings.TrimSpace(string(b))
	}
	if enabled {
		for _, rl := range []string{"2", "3", "4", "5"} {
			if !slices.Contains(links, "/etc/rc"+rl+".d/S01nsca") {
				t.Errorf("after %s: no start link in /etc/rc%s.d: %v", step, rl, links)
			}
		}
		if len(wants) == 0 || (systemd != "enabled" && systemd != "(no systemctl)") {
			t.Errorf("after %s: nsca.service is not enabled (links %v, systemctl is-enabled: %s)", step, wants, systemd)
		}
		if strings.Contains(out, "stays disabled") {
			t.Errorf("after %s: the package says the daemon stays disabled:\n%s", step, out)
		}
		return
	}
	if starts || len(wants) > 0 || (systemd != "disabled" && systemd != "(no systemctl)") {
		t.Errorf("after %s: something starts nsca at boot: rc links %v, systemd links %v, systemctl is-enabled: %s", step, links, wants, systemd)
	}
	want := "nsca-fast: nsca stays disabled at boot, as it was ("
	if !strings.Contains(out, want) {
		t.Errorf("after %s: dpkg's output does not say %q:\n%s", step, want, out)
	}
	for _, w := range why {
		if !strings.Contains(out, w) {
			t.Errorf("after %s: dpkg's output does not give the reason %q:\n%s", step, w, out)
		}
	}
	if pids := debProcesses(debInstalled); len(pids) > 0 {
		t.Errorf("after %s: the package started the disabled daemon: pids %v", step, pids)
	}
}

// debEnableStock enables the installed stock nsca at boot as an
// administrator does: systemctl enable, which makes the systemd link and,
// through systemd-sysv-install, the rc links.
func debEnableStock(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("systemctl"); err == nil {
		debRun(t, debCmdTimeout, "systemctl", "enable", "nsca.service")
		return
	}
	debRun(t, debCmdTimeout, "update-rc.d", "nsca", "defaults")
	debRun(t, debCmdTimeout, "update-rc.d", "nsca", "enable")
}

// debAppendFile appends text to path (creating it) and puts the file back
// as it was when the test ends.
func debAppendFile(t *testing.T, path, text string) {
	t.Helper()
	before, err := os.ReadFile(path)
	existed := err == nil
	t.Cleanup(func() {
		if existed {
			os.WriteFile(path, before, 0o644)
		} else {
			os.Remove(path)
		}
	})
	writeFile(t, path, string(before)+text, 0o644)
}

// debDownloadStock fetches the stock nsca package into dir with apt-get
// download (once; each case installs it with dpkg), updating the package
// lists if the first attempt fails.
func debDownloadStock(t *testing.T, dir string) string {
	t.Helper()
	download := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), debAptTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "apt-get", "-q", "download", debStock)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("apt-get download %s: %v\n%s", debStock, err, out)
			return err
		}
		return nil
	}
	if download() != nil {
		if err := debAptTry("update"); err != nil {
			t.Fatalf("apt-get update: %v", err)
		}
		if err := download(); err != nil {
			t.Fatalf("apt-get download %s: %v", debStock, err)
		}
	}
	debs, _ := filepath.Glob(filepath.Join(dir, debStock+"_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("apt-get download %s left %v in %s", debStock, debs, dir)
	}
	return debs[0]
}
