package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// validationCase is one configuration of TestOneValidation: lines appended
// to a base that starts (line 5 on), the line expected to be named, and
// whether the daemon must refuse it.
type validationCase struct {
	name   string
	lines  func(d string) []string // d: a directory every user may enter
	bad    int                     // 1-based index into lines of the line to name; 0: accepted
	root   bool                    // needs root (it checks as nsca_user=nobody)
	option string                  // named in the message ("" = the bad line's option)
	warn   string                  // a warning both must print
}

// validationCases are the configurations of TestOneValidation: each
// refused one names its line, and the accepted ones show that the check
// does not refuse what the daemon runs with.
func validationCases() []validationCase {
	one := func(line string) func(string) []string {
		return func(string) []string { return []string{line} }
	}
	in := func(format string) func(string) []string {
		return func(d string) []string { return []string{fmt.Sprintf(format, d)} }
	}
	gearman := func(key string) func(string) []string {
		return func(d string) []string {
			return []string{"gearman_server=127.0.0.1:1", "gearman_encryption=1", "gearman_keyfile=" + filepath.Join(d, key)}
		}
	}
	icinga := func(extra string) func(string) []string {
		return func(d string) []string {
			return []string{"icinga2_api_url=https://127.0.0.1:1", "icinga2_api_user=u", "icinga2_api_password=p",
				strings.ReplaceAll(extra, "D", d)}
		}
	}
	return []validationCase{
		// Options the file alone gets wrong.
		{name: "unknown option", lines: one("no_such_option=1"), bad: 1},
		{name: "line without =", lines: one("debug"), bad: 1, option: `no "=" on this line`},
		{name: "empty value", lines: one("debug="), bad: 1},
		{name: "server_port=0", lines: one("server_port=0"), bad: 1},
		{name: "server_port=70000", lines: one("server_port=70000"), bad: 1},
		{name: "max_packet_age=901", lines: one("max_packet_age=901"), bad: 1},
		{name: "decryption_method=99", lines: one("decryption_method=99"), bad: 1},
		{name: "decryption_mode=2", lines: one("decryption_mode=2"), bad: 1},
		{name: "password of 512 bytes", lines: one("password=" + strings.Repeat("p", 512)), bad: 1},
		{name: "allowed_hosts /33", lines: one("allowed_hosts=10.0.0.0/33"), bad: 1},
		{name: "payload_length=100", lines: one("payload_length=100"), bad: 1},
		{name: "queue_fsync=sometimes", lines: one("queue_fsync=sometimes"), bad: 1},
		{name: "metrics_address without port", lines: one("metrics_address=127.0.0.1"), bad: 1},
		{name: "proxy_protocol untrusted", lines: one("proxy_protocol=1"), bad: 1},
		{name: "max files without spool", lines: one("check_result_path_max_files=10"), bad: 1},
		{name: "age enabled at 0", lines: func(string) []string { return []string{"max_packet_age=0", "max_packet_age_enabled=1"} }, bad: 2},
		{name: "icinga2 without credentials", lines: one("icinga2_api_url=https://127.0.0.1:1"), bad: 1},
		{name: "gearman_fallback=spool without spool", lines: func(string) []string {
			return []string{"gearman_server=127.0.0.1:1", "gearman_key=k", "gearman_fallback=spool"}
		}, bad: 3},
		{name: "decryption_method=7 (threeway, no 8-bit cfb)", lines: one("decryption_method=7"), bad: 1},
		{name: "decryption_engine=fast", lines: one("decryption_engine=fast"), bad: 1},
		// What the machine must provide.
		{name: "nsca_user unknown", lines: one("nsca_user=nsca-no-such-user"), bad: 1},
		{name: "nsca_group unknown", lines: one("nsca_group=nsca-no-such-group"), bad: 1},
		{name: "nsca_chroot missing", lines: in("nsca_chroot=%s/no-chroot"), bad: 1},
		{name: "nsca_chroot a file", lines: in("nsca_chroot=%s/file"), bad: 1},
		{name: "server_address not this machine's", lines: one("server_address=192.0.2.1"), bad: 1},
		{name: "server_address unresolvable", lines: one("server_address=nsca-no-such-host.invalid"), bad: 1},
		{name: "command_file a directory", lines: in("command_file=%s"), bad: 1},
		{name: "check_result_path missing", lines: in("check_result_path=%s/no-spool"), bad: 1},
		{name: "check_result_path a file", lines: in("check_result_path=%s/file"), bad: 1},
		{name: "check_result_path not nsca_user's", root: true, lines: func(d string) []string {
			return []string{"nsca_user=nobody", "check_result_path=" + d + "/root-only"}
		}, bad: 2},
		{name: "check_result_path not nsca_user's, workers", root: true, lines: func(d string) []string {
			return []string{"nsca_user=nobody", "nsca_workers=1", "check_result_path=" + d + "/root-only"}
		}, bad: 3},
		{name: "check_result_path missing in nsca_chroot", root: true, lines: func(d string) []string {
			return []string{"nsca_chroot=" + d, "command_file=/nsca.cmd", "check_result_path=/no-spool"}
		}, bad: 3},
		{name: "gearman_keyfile missing", lines: gearman("no-key"), bad: 3},
		{name: "gearman_keyfile empty", lines: gearman("empty"), bad: 3},
		{name: "gearman_keyfile not nsca_user's", root: true, lines: func(d string) []string {
			return append([]string{"nsca_user=nobody"}, gearman("key-0600")(d)...)
		}, bad: 4},
		{name: "icinga2_ca_file missing", lines: icinga("icinga2_ca_file=D/no-ca.pem"), bad: 4},
		{name: "icinga2_ca_file not PEM", lines: icinga("icinga2_ca_file=D/file"), bad: 1, option: "icinga2_api_url"},
		{name: "icinga2_client_cert missing", lines: func(d string) []string {
			return []string{"icinga2_api_url=https://127.0.0.1:1", "icinga2_client_cert=" + d + "/no-cert.pem", "icinga2_client_key=" + d + "/file"}
		}, bad: 2},

		// Accepted by both.
		{name: "good: the base", lines: func(string) []string { return nil }},
		{name: "good: new dump file", lines: in("alternate_dump_file=%s/nsca.dump")},
		{name: "good: nsca_user=nobody, file 0600 (a warning)", root: true, lines: one("nsca_user=nobody"),
			warn: "nsca_user=nobody cannot read this file"},
		// What stock starts with: a warning (before, refused).
		{name: "good: log_facility=lrp, stock's spelling of lpr", lines: one("log_facility=lrp")},
		{name: "good: pid_file directory missing (a warning)", lines: in("pid_file=%s/run/nsca.pid"),
			warn: "runs without a pid file"},
		{name: "good: pid_file directory missing, workers (a warning)", lines: func(d string) []string {
			return []string{"nsca_workers=2", "pid_file=" + d + "/run/nsca.pid"}
		}, warn: "runs without a pid file"},
		{name: "good: pid_file a directory (a warning)", lines: in("pid_file=%s"), warn: "is a directory"},
		{name: "good: alternate_dump_file directory missing (a warning)", lines: in("alternate_dump_file=%s/no-dir/nsca.dump"),
			warn: "results that the other sinks cannot take are dropped"},
		{name: "good: alternate_dump_file a directory (a warning)", lines: in("alternate_dump_file=%s"),
			warn: "results that the other sinks cannot take are dropped"},
		{name: "good: alternate_dump_file not nsca_user's (a warning)", root: true, lines: func(d string) []string {
			return []string{"nsca_user=nobody", "alternate_dump_file=" + d + "/root-only/nsca.dump"}
		}, warn: "results that the other sinks cannot take are dropped"},
		{name: "good: gearman_keyfile", lines: gearman("key-0644")},
		{name: "good: nsca_chroot", root: true, lines: func(d string) []string {
			return []string{"nsca_chroot=" + d, "command_file=/nsca.cmd"}
		}},
	}
}

// validationRow is one line of TestOneValidation's table.
type validationRow struct{ name, check, daemon string }

// TestOneValidation: every configuration the daemon refuses at start,
// --check-config refuses too, and every one it starts with --check-config
// passes: each case runs both and compares their verdicts; each refusal
// names FILE:LINE of the option to fix. (Before, --check-config passed a
// missing nsca_chroot, pid_file directory or gearman_keyfile, an
// unresolvable server_address and a spool nsca_user cannot write, which
// the daemon then refused, or did not refuse but failed on.)
func TestOneValidation(t *testing.T) {
	d, _ := sharedDir(t, "nsca-validation-")
	writeFile(t, filepath.Join(d, "file"), "not a certificate\n", 0o644)
	writeFile(t, filepath.Join(d, "empty"), "", 0o644)
	writeFile(t, filepath.Join(d, "key-0600"), "secret-key\n", 0o600)
	writeFile(t, filepath.Join(d, "key-0644"), "secret-key\n", 0o644)
	writeFile(t, filepath.Join(d, "nsca.cmd"), "", 0o666)
	if err := os.Mkdir(filepath.Join(d, "root-only"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := validationCases()
	refused := 0
	for _, c := range cases {
		if c.bad > 0 {
			refused++
		}
	}
	if refused < 30 {
		t.Fatalf("%d bad configurations, want at least 30", refused)
	}
	var mu sync.Mutex
	rows := map[string]validationRow{}
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if c.root && os.Geteuid() != 0 {
					t.Skip("needs root to check as nsca_user=nobody")
				}
				t.Parallel()
				row := runValidationCase(t, d, c)
				mu.Lock()
				rows[c.name] = row
				mu.Unlock()
			})
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%-50s  %-14s  %s\n", "case", "--check-config", "daemon")
	for _, c := range cases {
		if r, ok := rows[c.name]; ok {
			fmt.Fprintf(&b, "%-50s  %-14s  %s\n", r.name, r.check, r.daemon)
		}
	}
	t.Logf("verdicts:\n%s", b.String())
}

// runValidationCase runs --check-config and the daemon on c's
// configuration and compares their verdicts and messages.
func runValidationCase(t *testing.T, d string, c validationCase) validationRow {
	dir := t.TempDir()
	port := freePort(t)
	lines := append([]string{
		"server_address=127.0.0.1",
		"server_port=" + strconv.Itoa(port),
		"command_file=" + filepath.Join(d, "nsca.cmd"),
		"decryption_method=1",
	}, c.lines(d)...)
	cfgPath := filepath.Join(dir, "nsca.cfg")
	writeFile(t, cfgPath, strings.Join(lines, "\n")+"\n", 0o600)

	var checkOut lockedBuffer
	check := mustStart(t, "nsca --check-config", nscaCmd(dir, &checkOut, "-c", cfgPath, "--check-config"))
	if !check.exitWithin(startTimeout) {
		t.Fatalf("--check-config did not exit within %v", startTimeout)
	}
	// 1: refused; 3: starts, with warnings.
	checkRefused := check.state.ExitCode() == 1
	if c.warn != "" && check.state.ExitCode() != 3 {
		t.Errorf("--check-config exited %d on a configuration it warns about, want 3", check.state.ExitCode())
	}

	var daemonOut lockedBuffer
	daemon := mustStart(t, "nsca", nscaCmd(dir, &daemonOut, "-c", cfgPath, "-f"))
	daemonRefused := false
	if err := waitPort(daemon, port, 2*startTimeout); err != nil {
		if !daemon.hasExited() {
			daemon.terminate(stopTimeout)
			t.Fatalf("the daemon neither served nor exited within %v: %v\n%s", 2*startTimeout, err, daemonOut.String())
		}
		daemonRefused = daemon.state.ExitCode() != 0
	} else if daemon.terminate(stopTimeout) {
		t.Errorf("the daemon did not stop within %v of SIGTERM", stopTimeout)
	}

	verdict := func(refused bool) string {
		if refused {
			return "refused"
		}
		return "accepted"
	}
	row := validationRow{c.name, verdict(checkRefused), verdict(daemonRefused)}
	if checkRefused != daemonRefused {
		t.Errorf("--check-config %s it, the daemon %s it\n--check-config:\n%s\ndaemon:\n%s", row.check, row.daemon, checkOut.String(), daemonOut.String())
	}
	if want := c.bad > 0; checkRefused != want {
		t.Errorf("--check-config %s it, want %s:\n%s", row.check, verdict(want), checkOut.String())
	}
	if c.warn != "" {
		for who, out := range map[string]string{"--check-config": checkOut.String(), "the daemon": daemonOut.String()} {
			if !strings.Contains(out, c.warn) {
				t.Errorf("%s does not warn %q:\n%s", who, c.warn, out)
			}
		}
	}
	if c.bad == 0 {
		return row
	}
	line := 4 + c.bad
	option := c.option
	if option == "" {
		option, _, _ = strings.Cut(lines[line-1], "=")
	}
	want := regexp.MustCompile(`nsca: conf: ` + regexp.QuoteMeta(cfgPath) + `:` + strconv.Itoa(line) + `: [^\n]*` + regexp.QuoteMeta(option) + `[^\n]*`)
	for who, out := range map[string]string{"--check-config": checkOut.String(), "the daemon": daemonOut.String()} {
		if !want.MatchString(out) {
			t.Errorf("%s does not name %s:%d and %s:\n%s", who, cfgPath, line, option, out)
		}
	}
	t.Logf("refused: %s", want.FindString(checkOut.String()))
	return row
}
