package tests

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// usableMethods are the encryption methods send_nsca and libmcrypt can use.
var usableMethods = []int{0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 14, 15, 16, 20, 23, 26}

// Passwords of different lengths: shorter than every key (zero padded) and
// longer than every key (rc2's 128 bytes; truncated).
var (
	shortPassword = "secret"
	longPassword  = strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz", 5) // 180 bytes
)

// threeChecks is a service check, a host check and a service check with
// multi-line output, on one connection, and the lines they must produce.
func threeChecks(tag string) (input string, want []string) {
	input = fmt.Sprintf("%s-a\tsvc one\t0\tOK - all good|perf=1;2;3\x17", tag) +
		fmt.Sprintf("%s-b\t1\tWARN host check\x17", tag) +
		fmt.Sprintf("%s-c\tsvc:x\t2\tline1;\nline2 \\ back\\slash\x17", tag)
	want = []string{
		fmt.Sprintf("PROCESS_SERVICE_CHECK_RESULT;%s-a;svc one;0;OK - all good|perf=1;2;3", tag),
		fmt.Sprintf("PROCESS_HOST_CHECK_RESULT;%s-b;1;WARN host check", tag),
		fmt.Sprintf(`PROCESS_SERVICE_CHECK_RESULT;%s-c;svc:x;2;line1;\nline2 \\ back\\slash`, tag),
	}
	return input, want
}

// TestMethodsRoundTrip sends three checks on one connection with the real
// send_nsca for every usable method, in both decryption modes, with a short
// and a long password, and checks the exact lines of the command file.
func TestMethodsRoundTrip(t *testing.T) {
	passwords := []struct{ name, pw string }{{"shortpw", shortPassword}, {"longpw", longPassword}}
	for _, method := range usableMethods {
		for _, mode := range []int{0, 1} {
			for _, pw := range passwords {
				name := fmt.Sprintf("method=%d/mode=%d/%s", method, mode, pw.name)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					d, cmd := startFileDaemon(t, method, pw.pw, Config{"decryption_mode": strconv.Itoa(mode)})
					tag := fmt.Sprintf("m%d-d%d-%s", method, mode, pw.name)
					input, want := threeChecks(tag)
					lo := now()
					Client{Password: pw.pw, Method: method}.send(t, d.Port, input, 3)
					deliverAll(t, d, cmd, lo, want) // stopping drains: nothing more can arrive
				})
			}
		}
	}
}

// TestMethodsTwoConnections checks that a daemon in mode 1 (a keyed
// instance per goroutine, re-aimed at each connection's IV) keeps
// decrypting correctly across several connections in a row.
func TestMethodsTwoConnections(t *testing.T) {
	for _, method := range []int{1, 3, 8, 14, 16, 26} {
		t.Run(fmt.Sprintf("method=%d", method), func(t *testing.T) {
			t.Parallel()
			d, cmd := startFileDaemon(t, method, shortPassword, Config{
				"decryption_mode": "1",
				// one decrypt goroutine: every connection reuses its instance
				"nsca_threads_per_worker": "1",
			})
			cl := Client{Password: shortPassword, Method: method}
			var want []string
			lo := now()
			for i := range 4 {
				input, w := threeChecks(fmt.Sprintf("conn%d", i))
				cl.send(t, d.Port, input, 3)
				want = append(want, w...)
				// Separate connections have no order: wait for each.
				waitFileLines(t, cmd, len(want))
			}
			deliverAll(t, d, cmd, lo, want)
		})
	}
}

// TestUnusableMethodsRefused: methods libmcrypt cannot open in 8-bit CFB
// and numbers stock never assigned must stop the daemon at start, with a
// message naming the method and the reason.
func TestUnusableMethodsRefused(t *testing.T) {
	cases := []struct {
		method int
		why    *regexp.Regexp
	}{
		// libmcrypt refuses these in cfb mode: the message must say so.
		{7, regexp.MustCompile(`(?i)cfb`)},
		{12, regexp.MustCompile(`(?i)cfb`)},
		{19, regexp.MustCompile(`(?i)cfb`)},
		{22, regexp.MustCompile(`(?i)cfb`)},
		{24, regexp.MustCompile(`(?i)cfb`)},
		{25, regexp.MustCompile(`(?i)cfb`)},
	}
	notAMethod := regexp.MustCompile(`(?i)not a (valid )?(de|en)cryption method|unknown|invalid|unassigned|unused|no such`)
	for _, n := range []int{13, 17, 18, 21, 27, -1} {
		cases = append(cases, struct {
			method int
			why    *regexp.Regexp
		}{n, notAMethod})
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("method=%d", c.method), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := Config{
				"server_address":    "127.0.0.1",
				"server_port":       strconv.Itoa(freePort(t)),
				"command_file":      commandFile(t, dir),
				"append_to_file":    "1",
				"password":          shortPassword,
				"decryption_method": strconv.Itoa(c.method),
			}
			_, code, out := runDaemonExpectFailure(t, cfg.text())
			if code == 0 {
				t.Errorf("exit status 0 with decryption_method=%d, want non-zero", c.method)
			}
			names := regexp.MustCompile(`decryption_method\s*=?\s*\(?` + regexp.QuoteMeta(strconv.Itoa(c.method)) + `\b`)
			if !names.MatchString(out) {
				t.Errorf("output does not name decryption_method %d:\n%s", c.method, out)
			}
			if !c.why.MatchString(out) {
				t.Errorf("output does not say why method %d is refused (want %v):\n%s", c.method, c.why, out)
			}
		})
	}
}

// TestPasswordEdgeCases: the password is taken verbatim to the end of the
// line (an '=' inside and a trailing blank are part of it), and an absent
// password means an all-zero key on both sides.
func TestPasswordEdgeCases(t *testing.T) {
	cases := []struct {
		name   string
		pw     string
		method int
	}{
		{"equals-and-trailing-blank/xor", "pa=ss word ", 1},
		{"equals-and-trailing-blank/rijndael-128", "pa=ss word ", 14},
		{"empty/xor", "", 1},
		{"empty/blowfish", "", 8},
		{"max-511/tripledes", strings.Repeat("k", 511), 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d, cmd := startFileDaemon(t, c.method, c.pw, nil) // an empty password is left out
			input, want := threeChecks("pw")
			lo := now()
			Client{Password: c.pw, Method: c.method}.send(t, d.Port, input, 3)
			deliverAll(t, d, cmd, lo, want)
		})
	}
	// A different trailing blank is a different password: nothing may pass.
	t.Run("trailing-blank-matters", func(t *testing.T) {
		t.Parallel()
		d, cmd := startFileDaemon(t, 14, "secret ", nil)
		input, _ := threeChecks("pw")
		// The daemon closes the connection at the first bad packet, so
		// send_nsca may die of SIGPIPE: only a hang would be a problem.
		(Client{Password: "secret", Method: 14}).sendRejected(t, d.Port, input)
		d.Stop()
		if got := readFile(t, cmd); got != "" {
			t.Errorf("a client without the trailing blank got through:\n%s", got)
		}
	})
}
