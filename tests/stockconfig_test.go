package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// stockConfigCase is an nsca.cfg that stock nsca 2.10.2 runs (or, for the
// last ones, cannot run) and that nsca_fast must run with stock's meaning,
// saying once, with FILE:LINE, what stock would have done silently.
type stockConfigCase struct {
	name string
	// edit turns the base lines (see stockBase) into the case's; text, if
	// set, turns the file's text into the case's.
	edit func(lines []string, dir string, port int) []string
	text func(string) string
	// client is the send_nsca password ("": "secret").
	client string
	// warn is a substring of nsca_fast's warning, on line.
	warn string
	line int
	// stockServes is what stock 2.10.2 did with the file (measured with
	// /usr/sbin/nsca -c FILE -f --single and one send_nsca): it served and
	// delivered the check to the command file, or refused to start.
	stockServes bool
}

// stockBase is the configuration every case starts from: one line per
// option, so that a case names its line by number.
func stockBase(dir string, port int) []string {
	return []string{
		"server_address=127.0.0.1",                               // 1
		"server_port=" + strconv.Itoa(port),                      // 2
		"command_file=" + filepath.Join(dir, "nsca.cmd"),         // 3
		"alternate_dump_file=" + filepath.Join(dir, "nsca.dump"), // 4
		"append_to_file=1",                                       // 5
		"decryption_method=1",                                    // 6
		"password=secret",                                        // 7
		"pid_file=" + filepath.Join(dir, "nsca.pid"),             // 8
	}
}

// setLine replaces the line of option name, or appends one (line 9).
func setLine(lines []string, name, value string) []string {
	out := append([]string(nil), lines...)
	for i, l := range out {
		if strings.HasPrefix(l, name+"=") {
			out[i] = name + "=" + value
			return out
		}
	}
	return append(out, name+"="+value)
}

// stockConfigCases are the configurations issue 33 found stock running and
// nsca_fast refusing, and the quirks of stock's parser that nsca_fast now
// reads as stock does (or, for what stock cannot run, as the author meant),
// each with a warning.
var stockConfigCases = []stockConfigCase{
	// Stock's atoi reads 5667 and stops. Before: refused ("is not a decimal integer").
	{name: "inline comment after a number", stockServes: true, line: 2, warn: "reads the number before it",
		edit: func(l []string, _ string, port int) []string {
			return setLine(l, "server_port", strconv.Itoa(port)+" # the port")
		}},
	// atoi("yes") is 0: debug off. Before: refused.
	{name: "debug=yes", stockServes: true, line: 9, warn: "debug=yes is not a number; stock nsca reads only its leading digits",
		edit: func(l []string, _ string, _ int) []string { return setLine(l, "debug", "yes") }},
	// strtoul("30s") is 30. Before: refused.
	{name: "max_packet_age=30s", stockServes: true, line: 9, warn: "max_packet_age=30s is not a number",
		edit: func(l []string, _ string, _ int) []string { return setLine(l, "max_packet_age", "30s") }},
	// Stock logs "Invalid log_facility" and logs to daemon. Before: refused.
	{name: "log_facility=local9", stockServes: true, line: 9, warn: "log_facility=local9 is not a syslog facility; stock nsca logs that and uses daemon",
		edit: func(l []string, _ string, _ int) []string { return setLine(l, "log_facility", "local9") }},
	// Stock logs "Cannot write to pidfile" at err and serves without one.
	// Before: refused ("its directory ...: create it").
	{name: "pid_file directory missing", stockServes: true, line: 8, warn: "runs without a pid file",
		edit: func(l []string, dir string, _ int) []string {
			return setLine(l, "pid_file", filepath.Join(dir, "missing", "nsca.pid"))
		}},
	// The dump file is the last resort: stock starts and delivers to the
	// command file. Before: refused.
	{name: "dump file directory missing", stockServes: true, line: 4, warn: "results that the other sinks cannot take are dropped",
		edit: func(l []string, dir string, _ int) []string {
			return setLine(l, "alternate_dump_file", filepath.Join(dir, "missing", "nsca.dump"))
		}},
	// Stock keeps "\r" in every value: it refuses server_address
	// ("Server address 127.0.0.1\r ...: Name or service not known", exit 2),
	// and without one its password matches no client. Before: refused
	// (server_address kept its "\r"); without server_address, warnings and
	// then every client refused (the password kept its "\r").
	{name: "CRLF line endings", stockServes: false, line: 1, warn: "the file has CRLF (Windows) line endings",
		text: func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }},
	// A UTF-8 byte order mark: stock refuses the first line ("Unknown
	// option"). Before: refused (`option "\ufeffserver_address"`).
	{name: "byte order mark", stockServes: false, line: 1, warn: "the file starts with a UTF-8 byte order mark",
		text: func(s string) string { return "\ufeff" + s }},
	// Stock and send_nsca keep the comment in the password, so the same
	// line on both sides matches. Before: the same, silently.
	{name: "inline comment in the password", stockServes: true, line: 7, client: "secret # the password",
		warn: `password: only a "#" at the start of a line begins a comment`,
		edit: func(l []string, _ string, _ int) []string { return setLine(l, "password", "secret # the password") }},
	// A trailing blank is part of the password in stock and send_nsca.
	// Before: the same, silently.
	{name: "trailing blank in the password", stockServes: true, line: 7, client: "secret ",
		warn: "password ends in a blank (space or tab)",
		edit: func(l []string, _ string, _ int) []string { return setLine(l, "password", "secret ") }},
	// The last line counts, in stock too. Before: the same, silently.
	{name: "option set twice", stockServes: true, line: 9, warn: "server_port is set again: this line replaces line 2's value",
		edit: func(l []string, _ string, port int) []string {
			return append(append([]string(nil), l...), "server_port="+strconv.Itoa(port))
		}},
}

// TestStockConfigs: every configuration of stockConfigCases is served by
// nsca_fast, which delivers a check from the real send_nsca to the command
// file, after warning once about the line with the fix; --check-config
// exits 3 on it (0: no warning, 1: refused). Where the stock daemon is
// installed, it is run on the same file to show what it does.
func TestStockConfigs(t *testing.T) {
	for _, c := range stockConfigCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			t.Run("nsca_fast", func(t *testing.T) {
				dir := t.TempDir()
				cfg, port := writeStockCase(t, c, dir)
				var out lockedBuffer
				check := mustStart(t, "nsca --check-config", nscaCmd(dir, &out, "--check-config", "-c", cfg))
				if !check.exitWithin(startTimeout) || check.state.ExitCode() != 3 {
					t.Errorf("--check-config: exit status %v, want 3 (starts, with warnings):\n%s", check.state, out.String())
				}
				want := fmt.Sprintf("conf: %s:%d: ", cfg, c.line)
				if w := warningLines(out.String(), want, c.warn); w != 1 {
					t.Errorf("--check-config: %d warnings on %s saying %q, want 1:\n%s", w, want, c.warn, out.String())
				}
				stderr := serveOneCheck(t, c, daemonBin(), dir, cfg, port, nil)
				if w := warningLines(stderr, want, c.warn); w != 1 {
					t.Errorf("the daemon: %d warnings on %s saying %q, want 1:\n%s", w, want, c.warn, stderr)
				}
			})
			t.Run("stock", func(t *testing.T) {
				requireStock(t)
				dir := t.TempDir()
				cfg, port := writeStockCase(t, c, dir)
				if c.stockServes {
					serveOneCheck(t, c, stockNscaPath, dir, cfg, port, []string{"--single"})
					return
				}
				p := mustStart(t, "stock nsca", exec.Command(stockNscaPath, "-c", cfg, "-f", "--single"))
				if !p.exitWithin(startTimeout) || p.state.ExitCode() == 0 {
					t.Errorf("stock nsca: %v, want it to refuse the file", p.state)
				}
			})
		})
	}
}

// writeStockCase writes c's configuration into dir, with an empty command
// file, and returns its path and port.
func writeStockCase(t *testing.T, c stockConfigCase, dir string) (string, int) {
	t.Helper()
	port := freePort(t)
	lines := stockBase(dir, port)
	if c.edit != nil {
		lines = c.edit(lines, dir, port)
	}
	text := strings.Join(lines, "\n") + "\n"
	if c.text != nil {
		text = c.text(text)
	}
	commandFile(t, dir)
	cfg := filepath.Join(dir, "nsca.cfg")
	writeFile(t, cfg, text, 0o600)
	return cfg, port
}

// serveOneCheck starts bin on cfg in the foreground, sends one check with
// send_nsca and waits for it in the command file, then stops bin by its
// PID; it returns what bin wrote to stderr.
func serveOneCheck(t *testing.T, c stockConfigCase, bin, dir, cfg string, port int, args []string) string {
	t.Helper()
	var out lockedBuffer
	cmd := exec.Command(bin, append([]string{"-c", cfg, "-f"}, args...)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &out
	p := mustStart(t, filepath.Base(bin), cmd)
	defer p.terminate(stopTimeout)
	if err := waitPort(p, port, startTimeout); err != nil {
		t.Fatalf("%s does not serve: %v\n%s", bin, err, out.String())
	}
	password := c.client
	if password == "" {
		password = "secret"
	}
	start := now()
	Client{Password: password, Method: 1}.send(t, port, "stock-cfg\tsvc\t0\tdelivered\n", 1)
	got := stripTimes(t, waitFileLines(t, filepath.Join(dir, "nsca.cmd"), 1), start, now()+1)
	if want := "PROCESS_SERVICE_CHECK_RESULT;stock-cfg;svc;0;delivered"; len(got) != 1 || got[0] != want {
		t.Errorf("%s wrote %q to the command file, want %q", bin, got, want)
	}
	p.terminate(stopTimeout) // the log is complete once it has exited
	return out.String()
}

// warningLines counts the lines of log that hold where and then what.
func warningLines(log, where, what string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if i := strings.Index(l, where); i >= 0 && strings.Contains(l[i:], what) {
			n++
		}
	}
	return n
}
