package tests

// What the Debian package tests change on this machine, saved before and
// put back after them, pass or fail.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// debState is what the test changes on the system, as it was before.
type debState struct {
	stockInstalled bool
	config         []byte // nil: no /etc/nsca.cfg
	configMode     fs.FileMode
	policy         []byte // nil: no policy-rc.d
	policyMode     fs.FileMode
	hadUser        bool
	hadGroup       bool
	hadRunDir      map[string]bool // directories that existed before
	created        []string        // paths the test made, removed in reverse
	boot           map[string]debFile
	runDaemon      string // debconf's nsca/run-nsca-daemon, "" if unset
}

// debBootGlobs are the files that say whether nsca starts at boot, which
// the tests change as an administrator would: the rc links, systemd's
// links and deb-systemd-helper's records of them, and inetd's
// configuration.
var debBootGlobs = []string{
	"/etc/rc[0-6S].d/[SK][0-9][0-9]nsca",
	"/etc/systemd/system/*.wants/nsca.service",
	"/var/lib/systemd/deb-systemd-helper-enabled/nsca.service.dsh-also",
	"/var/lib/systemd/deb-systemd-helper-enabled/*.wants/nsca.service",
	"/etc/inetd.conf",
}

// debFile is a file or symbolic link as it was.
type debFile struct {
	link string // the target of a symbolic link, "" for a file
	data []byte
	mode fs.FileMode
}

// debSnapshot records every file that matches globs.
func debSnapshot(t *testing.T, globs []string) map[string]debFile {
	t.Helper()
	snap := map[string]debFile{}
	for _, path := range debGlob(t, globs) {
		fi, err := os.Lstat(path)
		if err != nil {
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			link, _ := os.Readlink(path)
			snap[path] = debFile{link: link}
			continue
		}
		snap[path] = debFile{data: debReadFile(t, path), mode: fi.Mode().Perm()}
	}
	return snap
}

// debPutBack makes the files that match globs what snap recorded: it
// removes the others and writes back the recorded ones.
func debPutBack(t *testing.T, globs []string, snap map[string]debFile) {
	for _, path := range debGlob(t, globs) {
		if _, keep := snap[path]; !keep {
			if err := os.Remove(path); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	}
	for path, f := range snap {
		os.Remove(path)
		var err error
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			if f.link != "" {
				err = os.Symlink(f.link, path)
			} else {
				err = os.WriteFile(path, f.data, f.mode)
			}
		}
		if err != nil {
			t.Errorf("cleanup: putting back %s: %v", path, err)
		}
	}
}

func debGlob(t *testing.T, globs []string) []string {
	t.Helper()
	var paths []string
	for _, g := range globs {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	return paths
}

// debRunDaemon reads the stock package's debconf answer to "Should the nsca
// daemon be enabled by default?"; "" when it has none.
func debRunDaemon() string {
	out, _ := exec.Command("debconf-show", debStock).Output()
	for _, line := range strings.Split(string(out), "\n") {
		if _, v, ok := strings.Cut(line, "nsca/run-nsca-daemon: "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// debSaveState records the system's state and registers the cleanup that
// restores it, which runs after every other cleanup of the test.
func debSaveState(t *testing.T) *debState {
	t.Helper()
	s := &debState{hadRunDir: map[string]bool{}}
	if got := debStatus(t, debPackage); got != "" && !strings.Contains(got, "not-installed") {
		// Left by an interrupted run: start from a clean slate.
		t.Logf("%s is present (%q); purging it first", debPackage, got)
		debRun(t, debCmdTimeout, "dpkg", "--purge", debPackage)
	}
	s.stockInstalled = debStatus(t, debStock) == "install ok installed"
	if fi, err := os.Stat(debConfig); err == nil {
		s.config, s.configMode = debReadFile(t, debConfig), fi.Mode().Perm()
	}
	if fi, err := os.Lstat(debPolicyRcD); err == nil {
		s.policy, s.policyMode = debReadFile(t, debPolicyRcD), fi.Mode().Perm()
	}
	_, err := user.Lookup("nagios")
	s.hadUser = err == nil
	_, err = user.LookupGroup("nagios")
	s.hadGroup = err == nil
	for _, d := range []string{"/run/nagios"} {
		_, err := os.Stat(d)
		s.hadRunDir[d] = err == nil
	}
	s.boot, s.runDaemon = debSnapshot(t, debBootGlobs), debRunDaemon()
	t.Cleanup(func() { s.restore(t) })
	return s
}

func (s *debState) restore(t *testing.T) {
	for i := len(s.created) - 1; i >= 0; i-- {
		if err := os.Remove(s.created[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("cleanup: %v", err)
		}
	}
	// Whatever policy the test left, reinstalling the stock package must
	// not start its daemon; the saved policy comes back last.
	debPolicyDeny(t)
	if got := debStatus(t, debPackage); got != "" && !strings.Contains(got, "not-installed") {
		debTry(t, debCmdTimeout, "dpkg", "--purge", debPackage)
	}
	stock := debStatus(t, debStock) == "install ok installed"
	switch {
	case s.stockInstalled && !stock:
		// Reinstall the stock package, with its /etc/nsca.cfg if the purge
		// above removed it (policy-rc.d is still in place).
		debTryApt(t, "install", "-y", "-o", "Dpkg::Options::=--force-confold", "-o", "Dpkg::Options::=--force-confmiss", debStock)
	case !s.stockInstalled && stock:
		debTry(t, debCmdTimeout, "dpkg", "--purge", debStock)
	}
	// After the packages, whose scripts change them.
	debPutBack(t, debBootGlobs, s.boot)
	if s.runDaemon != "" && debRunDaemon() != s.runDaemon {
		cmd := exec.Command("debconf-set-selections")
		cmd.Stdin = strings.NewReader(debStock + " nsca/run-nsca-daemon boolean " + s.runDaemon + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("cleanup: debconf-set-selections: %v\n%s", err, out)
		}
	}
	if s.config != nil {
		if cur, err := os.ReadFile(debConfig); err != nil || !bytes.Equal(cur, s.config) {
			if err := os.WriteFile(debConfig, s.config, s.configMode); err != nil {
				t.Errorf("cleanup: restoring %s: %v", debConfig, err)
			}
		}
	}
	if !s.hadUser {
		if _, err := user.Lookup("nagios"); err == nil {
			debTry(t, debCmdTimeout, "userdel", "nagios")
		}
	}
	if !s.hadGroup {
		if _, err := user.LookupGroup("nagios"); err == nil {
			debTry(t, debCmdTimeout, "groupdel", "nagios")
		}
	}
	for d, had := range s.hadRunDir {
		if !had {
			os.Remove(d) // only if empty
		}
	}
	switch {
	case s.policy == nil:
		os.Remove(debPolicyRcD)
	default:
		if err := os.WriteFile(debPolicyRcD, s.policy, s.policyMode); err != nil {
			t.Errorf("cleanup: restoring %s: %v", debPolicyRcD, err)
		}
		os.Chmod(debPolicyRcD, s.policyMode)
	}
}

// debPolicyDeny installs a policy-rc.d that forbids starting services, so
// installing the stock package does not start its daemon. The state's
// cleanup puts the previous one back.
func debPolicyDeny(t *testing.T) { debPolicy(t, 101) }

// debPolicy installs a policy-rc.d that answers every invoke-rc.d query
// with code: 101 forbids, 0 allows (also where invoke-rc.d finds no
// runlevel, as on this machine).
func debPolicy(t *testing.T, code int) {
	t.Helper()
	writeFile(t, debPolicyRcD, fmt.Sprintf("#!/bin/sh\n# written by nsca_fast's tests/deb_install_test.go\nexit %d\n", code), 0o755)
}
