package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requireStock skips the test unless /usr/sbin/nsca is the stock daemon
// (a package test may have put nsca_fast there).
func requireStock(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(stockNscaPath); err != nil {
		t.Skipf("no stock daemon: %v", err)
	}
	out, _ := exec.Command(stockNscaPath, "-V").CombinedOutput()
	if !strings.Contains(string(out), "Nagios Service Check Acceptor") || strings.Contains(string(out), "nsca_fast") {
		t.Skipf("%s is not the stock daemon; its -V says: %q", stockNscaPath, out)
	}
}

// startStock starts the stock daemon (`nsca -c CFG -f --single`: no fork,
// one process) with cfg on a free loopback port and its own pid_file, and
// stops it by its PID at cleanup. It returns the port.
func startStock(t *testing.T, cfg Config) int {
	t.Helper()
	dir := t.TempDir()
	d := launchDaemon(t, merge(Config{"pid_file": filepath.Join(dir, "nsca.pid")}, cfg),
		daemonOpts{dir: dir, bin: stockNscaPath, args: []string{"--single"}})
	t.Cleanup(func() { d.p.terminate(5 * time.Second) })
	return d.Port
}

// stockInputs are sent to both daemons, one connection each; refused
// are the packets whose names no core can hold, which stock writes and we
// refuse (README, "Where we differ from stock").
var stockInputs = []struct {
	input   string
	packets int
	legacy  bool
	refused int
}{
	{"cmp-host\tcmp svc\t2\tCRITICAL - disk\\share full\nline two\\n not a newline\nline three;semi|perf=1;2;3\x17" +
		"cmp-host\t1\thost is DOWN\x17" +
		"cmp\nhost\tsvc\nname\t-1\tnewlines in names\x17" +
		"cmp-host\tneg\t40000\twraps to negative\x17" +
		"cmp-long\t" + strings.Repeat("S", 150) + "\t3\t" + longText(4500) + "\x17", 5, false, 0},
	{"cmp-legacy\tlegacy svc\t0\tlone legacy\\packet\nline 2\x17", 1, true, 0},
	{"cmp-second\t0\tsecond connection\x17" +
		"cmp-bytes\xc3\xa9\x01\tsvc\r\x7f\t1\t  lead\ra\tb;c\\\xff\x17" +
		strings.Repeat("h", 63) + "\t" + strings.Repeat("s", 127) + "\t0\t" + longText(4095) + "\x17" +
		"cmp-host-long\t3\t" + longText(4400) + "\x17", 4, false, 1},
}

// sendStockInputs sends stockInputs, calling wait with the running total
// of results written after each connection (ours: without those whose
// names we refuse): results of separate connections have no order.
func sendStockInputs(t *testing.T, port int, password string, method int, ours bool, wait func(total int)) int {
	t.Helper()
	total := 0
	for _, in := range stockInputs {
		cl := Client{Password: password, Method: method}
		if in.legacy {
			cl.Args = []string{"--legacy-2-7-mode"}
		}
		cl.send(t, port, in.input, in.packets)
		total += in.packets
		if ours {
			total -= in.refused
		}
		wait(total)
	}
	return total
}

// controlByte finds what no core can hold in a name.
var controlByte = regexp.MustCompile(`[\x00-\x1f\x7f]`)

// coreCanHold is stock's command-file lines without those whose host is
// empty or whose host or service holds a control character: what ours
// writes of the same input.
func coreCanHold(lines []string) []string {
	var out []string
	for _, l := range lines {
		f := strings.SplitN(l, ";", 4)
		names := f[1:2]
		if strings.HasPrefix(l, "PROCESS_SERVICE_CHECK_RESULT;") {
			names = f[1:3]
		}
		if names[0] == "" || controlByte.MatchString(strings.Join(names, "")) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// spoolCanHold is coreCanHold for spool files.
func spoolCanHold(files []string) []string {
	name := regexp.MustCompile(`(?m)^(host_name|service_description)=(.*)$`)
	var out []string
	for _, f := range files {
		ok := true
		for _, m := range name.FindAllStringSubmatch(f, -1) {
			if m[2] == "" && m[1] == "host_name" || controlByte.MatchString(m[2]) {
				ok = false
			}
		}
		if ok {
			out = append(out, f)
		}
	}
	return out
}

// TestStockComparison sends the same inputs to the stock daemon and to
// ours and requires identical command files, times aside: XOR, and the
// methods our default engine serves natively.
func TestStockComparison(t *testing.T) {
	requireStock(t)
	for _, method := range []int{1, 2, 3, 4, 5, 6, 8, 9, 11, 14, 20} {
		t.Run(fmt.Sprintf("method=%d", method), func(t *testing.T) {
			t.Parallel()
			base := Config{"append_to_file": "1", "password": shortPassword, "decryption_method": strconv.Itoa(method)}

			stockCmd := commandFile(t, t.TempDir())
			stockPort := startStock(t, merge(Config{"command_file": stockCmd}, base))

			oursCmd := commandFile(t, t.TempDir())
			d := startDaemon(t, merge(Config{"command_file": oursCmd}, base))

			lo := now()
			n := sendStockInputs(t, stockPort, shortPassword, method, false, func(k int) { waitFileLines(t, stockCmd, k) })
			nOurs := sendStockInputs(t, d.Port, shortPassword, method, true, func(k int) { waitFileLines(t, oursCmd, k) })
			stockLines := waitFileLines(t, stockCmd, n)
			waitFileLines(t, oursCmd, nOurs)
			hi := now()
			d.Stop()
			ours := commandsIn(t, oursCmd, lo, hi)
			stock := stripTimes(t, stockLines, lo, hi)
			assertLines(t, ours, coreCanHold(stock))
		})
	}
}

var spoolTimes = []*regexp.Regexp{
	regexp.MustCompile(`(?m)^# Time: .*$`),
	regexp.MustCompile(`(?m)^(file_time|start_time|finish_time)=\d+`),
}

// normaliseSpool blanks the times of a spool file.
func normaliseSpool(s string) string {
	s = spoolTimes[0].ReplaceAllString(s, "# Time: T")
	return spoolTimes[1].ReplaceAllString(s, "${1}=T")
}

// TestStockComparisonSpool compares check_result_path files of the stock
// daemon and ours: same names pattern, same modes, same content apart from
// the times.
func TestStockComparisonSpool(t *testing.T) {
	requireStock(t)
	base := Config{"password": shortPassword, "decryption_method": "1"}
	stockSpool := t.TempDir()
	stockPort := startStock(t, merge(Config{"check_result_path": stockSpool, "command_file": filepath.Join(t.TempDir(), "unused.cmd")}, base))
	oursSpool := t.TempDir()
	d := startDaemon(t, merge(Config{"check_result_path": oursSpool}, base))

	lo := now()
	n := sendStockInputs(t, stockPort, shortPassword, 1, false, func(k int) { readSpool(t, stockSpool, k) })
	nOurs := sendStockInputs(t, d.Port, shortPassword, 1, true, func(k int) { readSpool(t, oursSpool, k) })
	stockFiles := readSpool(t, stockSpool, n)
	readSpool(t, oursSpool, nOurs)
	hi := now()
	d.Stop()
	oursFiles := listSpool(t, oursSpool)
	if len(oursFiles) != nOurs || len(stockFiles) != n {
		t.Fatalf("%d result files from ours, %d from stock, want %d and %d", len(oursFiles), len(stockFiles), nOurs, n)
	}
	norm := func(files []spoolResult) []string {
		var out []string
		for _, f := range files {
			out = append(out, normaliseSpool(f.content))
		}
		sort.Strings(out)
		return out
	}
	assertLines(t, norm(oursFiles), spoolCanHold(norm(stockFiles)))
	// Our times are well formed as well.
	timeRe := regexp.MustCompile(`(?m)^file_time=(\d+)$`)
	for _, f := range oursFiles {
		m := timeRe.FindStringSubmatch(f.content)
		if m == nil {
			t.Errorf("%s has no file_time", f.name)
			continue
		}
		if ft, _ := strconv.ParseInt(m[1], 10, 64); ft < lo-1 || ft > hi+1 {
			t.Errorf("%s: file_time=%d, want between %d and %d", f.name, ft, lo, hi)
		}
	}
}

// TestStockComparisonRaw sends packets send_nsca cannot produce (empty and
// unterminated fields, control and non-ASCII bytes) to both daemons and
// requires identical command files but for the names no core can hold,
// which stock writes and we refuse.
func TestStockComparisonRaw(t *testing.T) {
	requireStock(t)
	cases := []rawCheck{
		{0, "", "svc", "empty host"},
		{0, "emptyout", "", ""},
		{1, "emptysvcout", "svc", ""},
		{2, strings.Repeat("A", 64), "svc", "unterminated host"},
		{3, "longsvc", strings.Repeat("S", 128), "unterminated service"},
		{0, "longout", "svc", strings.Repeat("o", 4096)},
		{1, "bytes\x01\x7f\xff\xc3\xa9", "svc\r", "a\rb\x01c\xffd\te;f"},
		{-32768, "neg", "svc", "most negative"},
		{-1, "ho\nst", "s\nv", "\n\nleading newlines\\"},
		{2, "tab\thost", "tab\tsvc", "x"},
	}
	send := func(port int) {
		r := dialRaw(t, port, "")
		r.write(t, r.packets(shortPassword, cases), 0)
		r.c.Close()
	}
	sendLegacy := func(port int) {
		r := dialRaw(t, port, "")
		r.write(t, r.packet(legacyPacketSize, r.ts, 1, "legacy", "svc", strings.Repeat("L", 512), 1, shortPassword), 0)
		r.c.Close()
	}
	base := Config{"append_to_file": "1", "password": shortPassword, "decryption_method": "1"}
	stockCmd := commandFile(t, t.TempDir())
	oursCmd := commandFile(t, t.TempDir())
	stockPort := startStock(t, merge(Config{"command_file": stockCmd}, base))
	d := startDaemon(t, merge(Config{"command_file": oursCmd}, base))
	lo := now()
	send(stockPort)
	send(d.Port)
	// The empty host, the control bytes and the tabs in names: stock
	// writes them, we refuse them (bad_name).
	const refused = 3
	waitFileLines(t, stockCmd, len(cases))
	waitFileLines(t, oursCmd, len(cases)-refused)
	sendLegacy(stockPort)
	sendLegacy(d.Port)
	stockLines := waitFileLines(t, stockCmd, len(cases)+1)
	waitFileLines(t, oursCmd, len(cases)+1-refused)
	hi := now()
	d.Stop()
	ours := commandsIn(t, oursCmd, lo, hi)
	stock := stripTimes(t, stockLines, lo, hi)
	if len(coreCanHold(stock)) != len(stock)-refused {
		t.Errorf("stock wrote %d lines whose names no core can hold, want %d", len(stock)-len(coreCanHold(stock)), refused)
	}
	assertLines(t, ours, coreCanHold(stock))
}

// TestStrictModeSpoofing: with strict_mode_spoofing=1 a result whose host
// name does not resolve to the peer's address is dropped, the connection
// goes on, and the outcome is the same as stock's. Only names that need no
// DNS are used: address literals and localhost.
func TestStrictModeSpoofing(t *testing.T) {
	input := "127.0.0.1\tsvc\t0\tliteral peer address\x17" +
		"127.0.0.2\tsvc\t1\tother address: dropped\x17" +
		"localhost\tsvc\t2\tlocalhost\x17" +
		"127.0.0.1\t3\thost check after a drop\x17"
	want := []string{
		serviceLine("127.0.0.1", "svc", 0, "literal peer address"),
		serviceLine("localhost", "svc", 2, "localhost"),
		hostLine("127.0.0.1", 3, "host check after a drop"),
	}
	d, cmd := startFileDaemon(t, 1, shortPassword, Config{"strict_mode_spoofing": "1"})
	lo := now()
	Client{Password: shortPassword, Method: 1}.send(t, d.Port, input, 4)
	waitFileLines(t, cmd, len(want))
	time.Sleep(200 * time.Millisecond)
	hi := now()
	d.Stop()
	ours := commandsIn(t, cmd, lo, hi)
	assertLines(t, ours, want)

	if _, err := os.Stat(stockNscaPath); err != nil {
		return
	}
	requireStock(t)
	stockCmd := commandFile(t, t.TempDir())
	port := startStock(t, Config{"command_file": stockCmd, "append_to_file": "1", "password": shortPassword,
		"decryption_method": "1", "strict_mode_spoofing": "1"})
	Client{Password: shortPassword, Method: 1}.send(t, port, input, 4)
	waitFileLines(t, stockCmd, len(want))
	time.Sleep(200 * time.Millisecond)
	assertLines(t, ours, commandsIn(t, stockCmd, lo, now()))
}
