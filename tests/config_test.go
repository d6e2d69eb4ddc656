package tests

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
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
