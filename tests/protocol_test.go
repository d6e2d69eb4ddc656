package tests

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// escape is the command file's escaping of plugin output: `\` → `\\`,
// newline → `\n`.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func serviceLine(host, svc string, rc int, output string) string {
	return fmt.Sprintf("PROCESS_SERVICE_CHECK_RESULT;%s;%s;%d;%s", host, svc, rc, escape(output))
}

func hostLine(host string, rc int, output string) string {
	return fmt.Sprintf("PROCESS_HOST_CHECK_RESULT;%s;%d;%s", host, rc, escape(output))
}

// startFileDaemon starts a daemon writing to a regular command file with
// append_to_file=1 and returns it with the file's path. An empty password
// leaves the option out.
func startFileDaemon(t *testing.T, method int, password string, extra Config) (*Daemon, string) {
	t.Helper()
	cmd := commandFile(t, t.TempDir())
	d, _ := startKeyed(t, method, password, merge(Config{"command_file": cmd, "append_to_file": "1"}, extra))
	return d, cmd
}

// startKeyed starts a daemon with cfg plus password (an empty one leaves
// the option out) and decryption_method, and returns it with a send_nsca
// client that matches it.
func startKeyed(t *testing.T, method int, password string, cfg Config) (*Daemon, Client) {
	t.Helper()
	c := merge(cfg, Config{"decryption_method": strconv.Itoa(method)})
	if password != "" {
		c["password"] = password
	}
	return startDaemon(t, c), Client{Password: password, Method: method}
}

// deliverAll waits for want lines in cmd, stops the daemon (draining it)
// and compares the whole file with want.
func deliverAll(t *testing.T, d *Daemon, cmd string, lo int64, want []string) {
	t.Helper()
	waitFileLines(t, cmd, len(want))
	hi := now()
	d.Stop()
	assertLines(t, commandsIn(t, cmd, lo, hi), want)
}

// TestLegacyPackets: 720-byte packets from send_nsca --legacy-2-7-mode,
// alone and several on one connection (stock loses all of those), with
// output cut at 511 bytes, and ordinary clients on the same daemon.
func TestLegacyPackets(t *testing.T) {
	legacy := []string{"--legacy-2-7-mode"}
	for _, method := range []int{0, 1, 3, 14} {
		for _, mode := range []int{0, 1} {
			t.Run(fmt.Sprintf("method=%d/mode=%d", method, mode), func(t *testing.T) {
				t.Parallel()
				d, cmd := startFileDaemon(t, method, shortPassword, Config{"decryption_mode": strconv.Itoa(mode)})
				cl := Client{Password: shortPassword, Method: method, Args: legacy}
				var want []string
				lo := now()

				// A lone legacy packet.
				cl.send(t, d.Port, "lone\tsvc\t1\tlone legacy\\packet\nsecond line\x17", 1)
				want = append(want, serviceLine("lone", "svc", 1, "lone legacy\\packet\nsecond line"))
				waitFileLines(t, cmd, len(want))

				// Five on one connection, host and service checks mixed.
				var in strings.Builder
				for i := range 5 {
					if i%2 == 0 {
						fmt.Fprintf(&in, "multi%d\tsvc%d\t%d\tlegacy %d of 5\x17", i, i, i%4, i+1)
						want = append(want, serviceLine(fmt.Sprintf("multi%d", i), fmt.Sprintf("svc%d", i), i%4, fmt.Sprintf("legacy %d of 5", i+1)))
					} else {
						fmt.Fprintf(&in, "multi%d\t%d\tlegacy host %d of 5\x17", i, i%4, i+1)
						want = append(want, hostLine(fmt.Sprintf("multi%d", i), i%4, fmt.Sprintf("legacy host %d of 5", i+1)))
					}
				}
				cl.send(t, d.Port, in.String(), 5)
				waitFileLines(t, cmd, len(want)) // separate connections have no order

				// Output longer than the legacy field: send_nsca keeps 511 bytes.
				long := strings.Repeat("0123456789", 60)
				cl.send(t, d.Port, "long\tsvc\t2\t"+long+"\x17long2\t3\t"+long+"\x17", 2)
				want = append(want, serviceLine("long", "svc", 2, long[:511]), hostLine("long2", 3, long[:511]))
				waitFileLines(t, cmd, len(want))

				// A current (4304-byte) client on the same daemon.
				Client{Password: shortPassword, Method: method}.send(t, d.Port, "modern\tsvc\t0\tnot legacy\x17", 1)
				want = append(want, serviceLine("modern", "svc", 0, "not legacy"))

				deliverAll(t, d, cmd, lo, want)
			})
		}
	}
}

// TestManyChecksPerConnection: 200 results on one connection arrive
// complete and in order, for XOR and an mcrypt method in both modes.
func TestManyChecksPerConnection(t *testing.T) {
	const n = 200
	for _, tc := range []struct{ method, mode int }{{1, 1}, {14, 0}, {14, 1}, {8, 1}} {
		t.Run(fmt.Sprintf("method=%d/mode=%d", tc.method, tc.mode), func(t *testing.T) {
			t.Parallel()
			d, cmd := startFileDaemon(t, tc.method, shortPassword, Config{"decryption_mode": strconv.Itoa(tc.mode)})
			var in strings.Builder
			var want []string
			for i := range n {
				if i%3 == 2 {
					fmt.Fprintf(&in, "host%03d\t%d\thost result %d\x17", i, i%4, i)
					want = append(want, hostLine(fmt.Sprintf("host%03d", i), i%4, fmt.Sprintf("host result %d", i)))
				} else {
					fmt.Fprintf(&in, "host%03d\tsvc%03d\t%d\tresult %d\nline 2 of %d\x17", i, i, i%4, i, i)
					want = append(want, serviceLine(fmt.Sprintf("host%03d", i), fmt.Sprintf("svc%03d", i), i%4, fmt.Sprintf("result %d\nline 2 of %d", i, i)))
				}
			}
			lo := now()
			Client{Password: shortPassword, Method: tc.method}.send(t, d.Port, in.String(), n)
			deliverAll(t, d, cmd, lo, want)
		})
	}
}

// longText returns n bytes of printable text with a backslash every 97
// bytes and a newline every 211, so that escaping changes the length.
func longText(n int) string {
	b := make([]byte, n)
	for i := range b {
		switch {
		case i%97 == 50:
			b[i] = '\\'
		case i%211 == 100:
			b[i] = '\n'
		default:
			b[i] = 'a' + byte(i%26)
		}
	}
	return string(b)
}

// TestFieldEdgeCases: escaping, newlines in host and service names, fields
// at and beyond their maximum length, tabs and semicolons in the output,
// and return codes including negative ones.
func TestFieldEdgeCases(t *testing.T) {
	type check struct {
		in   string
		want string
	}
	host100 := strings.Repeat("h", 37) + strings.Repeat("H", 63) // send_nsca keeps 63 bytes
	svc200 := strings.Repeat("s", 73) + strings.Repeat("S", 127)
	out4400 := longText(4400)
	checks := []check{
		// The example of the brief: a\b newline c.
		{"esc\tsvc\t0\ta\\b\nc\x17", `PROCESS_SERVICE_CHECK_RESULT;esc;svc;0;a\\b\nc`},
		{"esc2\t1\t\\\\x\\n\n\n\x17", `PROCESS_HOST_CHECK_RESULT;esc2;1;\\\\x\\n`}, // trailing newlines are stripped by send_nsca
		// A newline in the host name cuts it; the rest is lost.
		{"ho\nst\tsvc\t0\tnewline in host\x17", "PROCESS_SERVICE_CHECK_RESULT;ho;svc;0;newline in host"},
		{"ho\nst2\t2\tnewline in host, host check\x17", "PROCESS_HOST_CHECK_RESULT;ho;2;newline in host, host check"},
		{"svcnl\tsv\nc\t1\tnewline in service\x17", "PROCESS_SERVICE_CHECK_RESULT;svcnl;sv;1;newline in service"},
		// Semicolons and tabs in the output pass through unchanged (a
		// service check's output runs to the end of the set, tabs included).
		{"semi\tsvc\t0\tOK; a=1;b=2\tafter tab|perf=1;2;3;;\x17", "PROCESS_SERVICE_CHECK_RESULT;semi;svc;0;OK; a=1;b=2\tafter tab|perf=1;2;3;;"},
		{"lead\tsvc\t0\t  leading blanks kept\x17", "PROCESS_SERVICE_CHECK_RESULT;lead;svc;0;  leading blanks kept"},
		// Maximum lengths: 63, 127 and 4095 bytes arrive whole ...
		{host100[37:] + "\t" + svc200[73:] + "\t3\t" + out4400[:4095] + "\x17",
			serviceLine(host100[37:], svc200[73:], 3, out4400[:4095])},
		// ... and longer input is truncated to them by send_nsca.
		{host100 + "\t" + svc200 + "\t2\t" + out4400 + "\x17",
			serviceLine(host100[:63], svc200[:127], 2, out4400[:4095])},
		{host100 + "\t1\t" + strings.ReplaceAll(out4400, "\t", " ") + "\x17",
			hostLine(host100[:63], 1, out4400[:4095])},
	}
	// Return codes: send_nsca sends atoi(code) as an int16, printed signed.
	for _, rc := range []struct {
		in   string
		want int
	}{{"0", 0}, {"1", 1}, {"2", 2}, {"3", 3}, {"4", 4}, {"-1", -1}, {"-32768", -32768}, {"32767", 32767}, {"65535", -1}, {"40000", -25536}, {"255", 255}} {
		checks = append(checks,
			check{fmt.Sprintf("rc\tsvc\t%s\trc %s\x17", rc.in, rc.in), serviceLine("rc", "svc", rc.want, "rc "+rc.in)},
			check{fmt.Sprintf("rchost\t%s\trc %s\x17", rc.in, rc.in), hostLine("rchost", rc.want, "rc "+rc.in)})
	}
	for _, method := range []int{1, 16} {
		t.Run(fmt.Sprintf("method=%d", method), func(t *testing.T) {
			t.Parallel()
			d, cmd := startFileDaemon(t, method, shortPassword, nil)
			var in strings.Builder
			var want []string
			for _, c := range checks {
				in.WriteString(c.in)
				want = append(want, c.want)
			}
			lo := now()
			Client{Password: shortPassword, Method: method}.send(t, d.Port, in.String(), len(checks))
			deliverAll(t, d, cmd, lo, want)
		})
	}
}

// TestWrongPassword: a client with the wrong password or method delivers
// nothing, the daemon logs why with the peer address, and serves the next
// client normally.
func TestWrongPassword(t *testing.T) {
	cases := []struct {
		name         string
		serverMethod int
		serverPW     string
		client       Client
		serverMode0  bool
	}{
		{"xor/wrong-password", 1, "secret", Client{Password: "Secret", Method: 1}, false},
		{"tripledes/wrong-password", 3, "secret", Client{Password: "secreT", Method: 3}, false},
		{"rijndael-128/wrong-password", 14, "secret", Client{Password: "wrong", Method: 14}, false},
		{"rijndael-128/mode0/wrong-password", 14, "secret", Client{Password: "wrong", Method: 14}, true},
		{"wrong-method/server-14-client-1", 14, "secret", Client{Password: "secret", Method: 1}, false},
		{"wrong-method/server-1-client-0", 1, "secret", Client{Password: "secret", Method: 0}, false},
		{"legacy/wrong-password", 1, "secret", Client{Password: "wrong", Method: 1, Args: []string{"--legacy-2-7-mode"}}, false},
	}
	reason := regexp.MustCompile(`127\.0\.0\.1.*(?i:crc|version)|(?i:crc|version).*127\.0\.0\.1`)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			extra := Config{}
			if c.serverMode0 {
				extra["decryption_mode"] = "0"
			}
			d, cmd := startFileDaemon(t, c.serverMethod, c.serverPW, extra)
			// The daemon closes the connection at the first bad packet, so
			// send_nsca may die of SIGPIPE on the next one: its exit status
			// is no concern here, only a hang would be.
			c.client.sendRejected(t, d.Port, "bad1\tsvc\t0\tmust not arrive\x17bad2\t1\tnor this\x17bad3\tsvc\t2\tnor this\x17")
			if _, ok := waitLines(d.Stderr, reason, 1, arriveTimeout); !ok {
				t.Fatalf("no log line naming the peer 127.0.0.1 and crc or version within %v; stderr:\n%s", arriveTimeout, d.Stderr())
			}
			// The daemon keeps serving: a correct client gets through.
			lo := now()
			Client{Password: c.serverPW, Method: c.serverMethod}.send(t, d.Port, "good\tsvc\t0\tright password\x17good\t1\thost too\x17", 2)
			deliverAll(t, d, cmd, lo, []string{
				serviceLine("good", "svc", 0, "right password"),
				hostLine("good", 1, "host too"),
			})
		})
	}
}
