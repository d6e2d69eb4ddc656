package tests

// What the Debian package tests change on this machine, saved before and
// put back after them, pass or fail.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
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
	t.Cleanup(func() { s.restore(t) })
	return s
}

func (s *debState) restore(t *testing.T) {
	for i := len(s.created) - 1; i >= 0; i-- {
		if err := os.Remove(s.created[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("cleanup: %v", err)
		}
	}
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
