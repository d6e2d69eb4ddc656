package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NSClient++ (NSCP) interoperability: tests/testdata/nscp/nscp_client.cpp
// encrypts and lays out packets as NSClient++'s NSCAClient module does
// (Crypto++ ciphers in CFB with 1-byte feedback, NSCP's key sizes, packets
// of 208 + payload length bytes, several per connection). The tests build
// it with g++ against Debian's libcrypto++-dev.

// Tools the NSCP client needs to be built.
const (
	gxxPath         = "/usr/bin/g++"
	cryptoppHeader  = "/usr/include/cryptopp/modes.h"
	nscpClientSrc   = "testdata/nscp/nscp_client.cpp"
	nscpSendTimeout = 15 * time.Second
)

// buildNSCPClient compiles the NSCP test client into a temporary directory
// of t and returns its path; it skips t (fails it under CI) when g++ or
// libcrypto++-dev is missing.
func buildNSCPClient(t *testing.T) string {
	t.Helper()
	needTool(t, gxxPath, "g++")
	needTool(t, cryptoppHeader, "libcrypto++-dev")
	// Reading the source makes go test's cache depend on it: g++ opens it
	// in a child process, which the cache does not see.
	if _, err := os.ReadFile(nscpClientSrc); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "nscp_client")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gxxPath, "-O2", "-o", bin, nscpClientSrc, "-lcryptopp")
	cmd.WaitDelay = time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the NSCP client (g++ -O2 -o %s %s -lcryptopp): %v\n%s", bin, nscpClientSrc, err, out)
	}
	return bin
}

// nscpResult is one line of the NSCP client's input.
type nscpResult struct {
	host, service string
	code          int
	output        string // sent with -e: the client decodes \n, \\, \xHH
}

// nscpSend runs the NSCP client against 127.0.0.1:port, sending rs with
// NSCP encryption cipher, password and payload length payload, perConn
// packets per connection (0: all on one). It returns the client's output
// and error.
func nscpSend(t testing.TB, bin string, port int, cipher, password string, payload, perConn int, rs []nscpResult) (string, error) {
	t.Helper()
	var in strings.Builder
	for _, r := range rs {
		out := strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(r.output)
		fmt.Fprintf(&in, "%s\t%s\t%d\t%s\n", r.host, r.service, r.code, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nscpSendTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-e", "-n", strconv.Itoa(perConn), "-t", "10",
		"127.0.0.1", strconv.Itoa(port), cipher, password, strconv.Itoa(payload)) // a timeout kills it by its PID
	cmd.Stdin = strings.NewReader(in.String())
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", nscpSendTimeout, err)
	}
	return string(out), err
}

// nscpCase is one row of the NSCP matrix: an NSCP encryption name and the
// server decryption_method that decrypts it.
type nscpCase struct {
	nscp   string // NSCP's name ("encryption" option)
	method string // decryption_method that decrypts it; "" when none does
	// pending, when set, says which part of the daemon is still missing;
	// the row is skipped with this note until it lands.
	pending string
	why     string // for method "": why no existing method matches
}

// nscpMatrix is the NSCP interoperability matrix, as found by running the
// NSCP client against every stock method (see the README's table).
var nscpMatrix = []nscpCase{
	{nscp: "none", method: "0"},
	{nscp: "xor", method: "1"},
	{nscp: "des", method: "2"},
	{nscp: "3des", method: "3"},
	{nscp: "cast128", method: "4"},
	{nscp: "xtea", method: "6"},
	{nscp: "blowfish", method: "8"},
	{nscp: "twofish", method: "9"},
	{nscp: "rc2", method: "11"},
	{nscp: "aes128", method: "aes128"},
	{nscp: "rijndael128", method: "aes128"},
	{nscp: "14", method: "aes128"}, // NSCP's 14 is AES-128, stock's 14 AES-256
	{nscp: "aes192", method: "aes192"},
	{nscp: "rijndael192", method: "aes192"},
	{nscp: "15", method: "aes192"}, // stock's 15 is Rijndael with 192-bit blocks
	{nscp: "aes", method: "14"},
	{nscp: "aes256", method: "14"},
	{nscp: "rijndael256", method: "14"},
	{nscp: "16", method: "14"}, // stock's 16 is Rijndael with 256-bit blocks
	{nscp: "serpent", method: "20"},
	// Crypto++'s GOST (GOST R 34.11-94 test S-boxes), not libmcrypt's 23.
	{nscp: "gost", method: "gost"},
	{nscp: "3way", method: "", why: "libmcrypt cannot open threeway in 8-bit CFB (stock 7), and NSCP itself does not list it"},
}

// nscpPayloads are the payload lengths the matrix is checked with: 512 and
// 4096 (720- and 4304-byte packets) are accepted by default, the others
// with payload_length.
var nscpPayloads = []int{512, 1024, 4096, 8192}

// nscpChecks are the results each matrix cell sends on one connection: a
// service check, a host check, multi-line output with a Windows path, and
// an output filling the whole field of a payload length (no NUL: the
// server cuts it to length-1 bytes as stock cuts plugin_output).
func nscpChecks(tag string, payload int) (rs []nscpResult, want []string) {
	long := strings.Repeat("0123456789", payload/10+1)[:payload]
	rs = []nscpResult{
		{tag + "-a", "svc one", 0, "OK - all good|'C:\\ used'=42%;80;90"},
		{tag + "-b", "", 1, "WARN host check"},
		{tag + "-c", "disk C:", 2, "CRIT C:\\ - 99% used\nline2 C:\\new\\temp"},
		{tag + "-d", "long", 3, long},
	}
	want = []string{
		serviceLine(tag+"-a", "svc one", 0, rs[0].output),
		hostLine(tag+"-b", 1, rs[1].output),
		serviceLine(tag+"-c", "disk C:", 2, rs[2].output),
		serviceLine(tag+"-d", "long", 3, long[:payload-1]),
	}
	return rs, want
}

// TestNSCPMatrix checks, for every NSCP encryption name and payload length,
// that the daemon configured with the matrix's decryption_method writes
// exactly the expected lines for several packets on one connection, with a
// short password and one longer than every key.
func TestNSCPMatrix(t *testing.T) {
	bin := buildNSCPClient(t)
	passwords := []struct{ name, pw string }{{"shortpw", shortPassword}, {"longpw", longPassword}}
	for _, c := range nscpMatrix {
		for _, pl := range nscpPayloads {
			for _, pw := range passwords {
				name := fmt.Sprintf("%s/payload=%d/%s", c.nscp, pl, pw.name)
				t.Run(name, func(t *testing.T) {
					if c.method == "" {
						t.Skipf("NSCP %s: no server method decrypts it: %s", c.nscp, c.why)
					}
					if c.pending != "" {
						t.Skipf("waiting for %s", c.pending)
					}
					t.Parallel()
					cfg := Config{"decryption_method": c.method, "password": pw.pw}
					if pl != 512 && pl != 4096 {
						cfg["payload_length"] = strconv.Itoa(pl)
					}
					cmd := commandFile(t, t.TempDir())
					d := startDaemon(t, merge(Config{"command_file": cmd, "append_to_file": "1"}, cfg))
					tag := fmt.Sprintf("%s-%d-%s", c.nscp, pl, pw.name)
					rs, want := nscpChecks(tag, pl)
					lo := now()
					if out, err := nscpSend(t, bin, d.Port, c.nscp, pw.pw, pl, 0, rs); err != nil {
						t.Fatalf("nscp_client: %v\n%s", err, out)
					}
					deliverAll(t, d, cmd, lo, want)
				})
			}
		}
	}
}

// TestNSCPReconnects sends the same results over several connections of
// two packets each, as NSCP does for successive submissions, with the
// default NSCP encryption (aes = stock 14) and xor.
func TestNSCPReconnects(t *testing.T) {
	bin := buildNSCPClient(t)
	for _, c := range []struct{ nscp, method string }{{"aes", "14"}, {"xor", "1"}} {
		t.Run(c.nscp, func(t *testing.T) {
			t.Parallel()
			cmd := commandFile(t, t.TempDir())
			d := startDaemon(t, Config{"command_file": cmd, "append_to_file": "1", "decryption_method": c.method, "password": shortPassword})
			var rs []nscpResult
			var want []string
			for i := range 6 {
				host := fmt.Sprintf("reconn-%s-%d", c.nscp, i)
				rs = append(rs, nscpResult{host, "svc", i % 4, fmt.Sprintf("result %d C:\\x", i)})
				want = append(want, serviceLine(host, "svc", i%4, fmt.Sprintf("result %d C:\\x", i)))
			}
			lo := now()
			if out, err := nscpSend(t, bin, d.Port, c.nscp, shortPassword, 512, 2, rs); err != nil {
				t.Fatalf("nscp_client: %v\n%s", err, out)
			}
			waitFileLines(t, cmd, len(want))
			hi := now()
			d.Stop()
			// Separate connections may be written in any order.
			got := commandsIn(t, cmd, lo, hi)
			assertSameSet(t, got, want)
		})
	}
}

// assertSameSet compares got and want as multisets of lines.
func assertSameSet(t testing.TB, got, want []string) {
	t.Helper()
	count := map[string]int{}
	for _, w := range want {
		count[w]++
	}
	for _, g := range got {
		count[g]--
	}
	for l, n := range count {
		if n != 0 {
			t.Errorf("line %s: %+d more wanted than got", abbrev(l), n)
		}
	}
}

// TestNSCPMismatches pins down the pairs that look alike but do not
// interoperate: the daemon with the stock method of the same number or name
// writes nothing for them (the first packet fails its CRC check and the
// connection is closed).
func TestNSCPMismatches(t *testing.T) {
	bin := buildNSCPClient(t)
	cases := []struct{ nscp, method, why string }{
		{"aes128", "14", "stock 14 is AES with a 32-byte key"},
		{"14", "14", "NSCP's 14 is AES-128, stock's AES-256"},
		{"aes192", "15", "stock 15 is Rijndael with 192-bit blocks"},
		{"16", "16", "stock 16 is Rijndael with 256-bit blocks"},
		{"gost", "23", "libmcrypt's gost has other S-boxes than Crypto++'s"},
	}
	for _, c := range cases {
		t.Run(c.nscp+"/method="+c.method, func(t *testing.T) {
			t.Parallel()
			cmd := commandFile(t, t.TempDir())
			d := startDaemon(t, Config{"command_file": cmd, "append_to_file": "1", "decryption_method": c.method, "password": longPassword})
			rs, _ := nscpChecks("mismatch", 512)
			// The daemon closes the connection at the first packet, so the
			// client may fail to write the rest; only a hang matters.
			if out, err := nscpSend(t, bin, d.Port, c.nscp, longPassword, 512, 0, rs); err != nil && strings.Contains(err.Error(), "timed out") {
				t.Fatalf("nscp_client: %v\n%s", err, out)
			}
			time.Sleep(500 * time.Millisecond)
			d.Stop()
			if got := readFile(t, cmd); got != "" {
				t.Errorf("NSCP %s against decryption_method=%s (%s) delivered:\n%s", c.nscp, c.method, c.why, got)
			}
		})
	}
}

// TestPayloadLengthsTogether: one daemon with payload_length=512,1024,4096,8192
// takes NSClient++ clients of every one of those lengths (several packets on
// each connection) and send_nsca's 4304-byte packets side by side; a payload
// length it does not list delivers nothing.
func TestPayloadLengthsTogether(t *testing.T) {
	bin := buildNSCPClient(t)
	for _, mode := range []string{"0", "1"} {
		t.Run("mode="+mode, func(t *testing.T) {
			t.Parallel()
			cmd := commandFile(t, t.TempDir())
			d := startDaemon(t, Config{"command_file": cmd, "append_to_file": "1", "decryption_method": "aes",
				"password": shortPassword, "payload_length": "8192,1024,512,4096", "decryption_mode": mode})
			var want []string
			lo := now()
			for _, pl := range nscpPayloads {
				rs, w := nscpChecks(fmt.Sprintf("together-%s-%d", mode, pl), pl)
				if out, err := nscpSend(t, bin, d.Port, "aes", shortPassword, pl, 0, rs); err != nil {
					t.Fatalf("nscp_client, payload length %d: %v\n%s", pl, err, out)
				}
				want = append(want, w...)
				waitFileLines(t, cmd, len(want)) // separate connections have no order
			}
			input, w := threeChecks("together-send_nsca-" + mode)
			Client{Password: shortPassword, Method: 14}.send(t, d.Port, input, 3)
			want = append(want, w...)
			waitFileLines(t, cmd, len(want))

			// 2048 is not listed: the packet fails at every accepted size.
			rs, _ := nscpChecks("unlisted", 2048)
			if out, err := nscpSend(t, bin, d.Port, "aes", shortPassword, 2048, 0, rs); err != nil && strings.Contains(err.Error(), "timed out") {
				t.Fatalf("nscp_client: %v\n%s", err, out)
			}
			time.Sleep(300 * time.Millisecond)
			deliverAll(t, d, cmd, lo, want)
		})
	}
}
