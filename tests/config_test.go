package tests

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestBadConfigRefused: options stock refuses make the daemon exit
// non-zero, naming the file, the line and the option.
func TestBadConfigRefused(t *testing.T) {
	cases := []struct {
		name   string
		line   string // the bad line, written as line 5
		option string
	}{
		{"unknown-option", "no_such_option=1", "no_such_option"},
		{"max_packet_age=901", "max_packet_age=901", "max_packet_age"},
		{"misspelt-option", "decryption_methd=1", "decryption_methd"},
		{"server_port=0", "server_port=0", "server_port"},
		{"decryption_mode=2", "decryption_mode=2", "decryption_mode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			lines := []string{
				"# a comment",
				"server_address=127.0.0.1",
				fmt.Sprintf("server_port=%d", freePort(t)),
				"command_file=" + commandFile(t, dir),
				c.line, // line 5
				"decryption_method=1",
			}
			if strings.HasPrefix(c.line, "server_port=") {
				lines[2] = "# port below"
			}
			cfgPath, code, out := runDaemonExpectFailure(t, strings.Join(lines, "\n")+"\n")
			if code == 0 {
				t.Errorf("exit status 0 with %q, want non-zero", c.line)
			}
			// FILE:LINE, with FILE as given on the command line or its base name.
			fileLine := regexp.MustCompile(`(` + regexp.QuoteMeta(cfgPath) + `|` + regexp.QuoteMeta(filepath.Base(cfgPath)) + `):5\b`)
			if !fileLine.MatchString(out) {
				t.Errorf("output does not name %s:5:\n%s", cfgPath, out)
			}
			if !strings.Contains(out, c.option) {
				t.Errorf("output does not name the option %s:\n%s", c.option, out)
			}
		})
	}
}

// TestBadConfigSecretsAndPaths: a password over 511 bytes is refused
// without printing it, and a check_result_path that does not exist is
// refused at start (stock checks it too).
func TestBadConfigSecretsAndPaths(t *testing.T) {
	secret := "TOPSECRET" + strings.Repeat("x", 503) // 512 bytes
	cases := []struct {
		name, line, option string
	}{
		{"password-512", "password=" + secret, "password"},
		{"check_result_path-missing", "check_result_path=/nonexistent/nsca/spool", "check_result_path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			text := strings.Join([]string{
				"server_address=127.0.0.1",
				fmt.Sprintf("server_port=%d", freePort(t)),
				"command_file=" + commandFile(t, dir),
				"decryption_method=1",
				c.line,
			}, "\n") + "\n"
			_, code, out := runDaemonExpectFailure(t, text)
			if code == 0 {
				t.Errorf("exit status 0, want non-zero")
			}
			if !strings.Contains(out, c.option) {
				t.Errorf("output does not name %s:\n%s", c.option, out)
			}
			if strings.Contains(out, "TOPSECRET") {
				t.Errorf("output shows the password:\n%s", out)
			}
		})
	}
}

// TestBadPathsRefusedLikeCheckConfig: a command_file that is a directory,
// and a check_result_path that is missing or read-only, are refused by
// --check-config and by the daemon alike, with the same message naming the
// file, the line and the option (before, --check-config passed them: the
// daemon then dropped every result, or refused without a line number).
func TestBadPathsRefusedLikeCheckConfig(t *testing.T) {
	cases := []struct {
		name, option string
		value        func(t *testing.T) string
	}{
		{"command_file-directory", "command_file", func(t *testing.T) string { return t.TempDir() }},
		{"check_result_path-missing", "check_result_path", func(t *testing.T) string { return filepath.Join(t.TempDir(), "missing") }},
		{"check_result_path-read-only", "check_result_path", func(t *testing.T) string {
			dir := t.TempDir()
			if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_RDONLY, "size=64k"); err != nil {
				t.Skipf("skipped: cannot mount a read-only tmpfs (needs root): %v", err)
			}
			t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
			return dir
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			value := c.value(t)
			text := strings.Join([]string{
				"server_address=127.0.0.1",
				fmt.Sprintf("server_port=%d", freePort(t)),
				"command_file=" + commandFile(t, dir),
				"decryption_method=1",
				c.option + "=" + value, // line 5
			}, "\n") + "\n"
			cfgPath, code, daemonOut := runDaemonExpectFailure(t, text)
			if code == 0 {
				t.Errorf("the daemon exited 0, want non-zero")
			}
			var out lockedBuffer
			p := mustStart(t, "nsca", nscaCmd(dir, &out, "--check-config", "-c", cfgPath))
			if !p.exitWithin(startTimeout) {
				t.Fatalf("--check-config did not exit within %v", startTimeout)
			}
			if p.state.ExitCode() == 0 {
				t.Errorf("--check-config exited 0, want 1:\n%s", out.String())
			}
			want := regexp.MustCompile(`nsca: conf: ` + regexp.QuoteMeta(cfgPath) + `:5: ` + c.option + `=` + regexp.QuoteMeta(value) + `: [^\n]*`)
			checkLine, daemonLine := want.FindString(out.String()), want.FindString(daemonOut)
			if checkLine == "" || daemonLine == "" {
				t.Fatalf("want a line matching %q from both;\n--check-config said:\n%s\nthe daemon said:\n%s", want, out.String(), daemonOut)
			}
			if checkLine != daemonLine {
				t.Errorf("--check-config and the daemon disagree:\n%s\n%s", checkLine, daemonLine)
			}
			t.Logf("both say: %s", checkLine)
		})
	}
}
