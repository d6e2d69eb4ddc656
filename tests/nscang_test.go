package tests

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The real nsca-ng programs come from Debian's packages, downloaded once
// into ngDebCache (NSCA_NG_DEBS overrides it) and extracted into each
// test's directory: the client's send_nsca would replace nsca-client's if
// installed.
var ngDebCache = func() string {
	if d := os.Getenv("NSCA_NG_DEBS"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "nsca_fast-nsca-ng-debs")
}()

var ngDownload sync.Mutex

// ngPrograms is an extracted nsca-ng: its send_nsca and its server.
type ngPrograms struct{ client, server string }

// ngExtract extracts nsca-ng-client and nsca-ng-server into a directory of
// t's, downloading the packages first if the cache lacks them; it skips t
// when they cannot be had (no apt), and the server part when its
// libraries (libconfuse2, libev4: scripts/deps.sh) are missing.
func ngExtract(t testing.TB, needServer bool) ngPrograms {
	t.Helper()
	ngDownload.Lock()
	debs, _ := filepath.Glob(filepath.Join(ngDebCache, "nsca-ng-*.deb"))
	if len(debs) < 2 {
		os.MkdirAll(ngDebCache, 0o755)
		cmd := exec.Command("apt-get", "download", "nsca-ng-client", "nsca-ng-server")
		cmd.Dir = ngDebCache
		out, err := cmd.CombinedOutput()
		debs, _ = filepath.Glob(filepath.Join(ngDebCache, "nsca-ng-*.deb"))
		if err != nil || len(debs) < 2 {
			ngDownload.Unlock()
			ngSkip(t, "cannot download nsca-ng-client and nsca-ng-server: %v\n%s", err, out)
		}
	}
	ngDownload.Unlock()
	root := filepath.Join(t.TempDir(), "nsca-ng")
	for _, deb := range debs {
		if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, out)
		}
	}
	p := ngPrograms{client: filepath.Join(root, "usr/sbin/send_nsca"), server: filepath.Join(root, "usr/sbin/nsca-ng")}
	if needServer {
		out, _ := exec.Command("ldd", p.server).CombinedOutput()
		if bytes.Contains(out, []byte("not found")) {
			ngSkip(t, "nsca-ng's server lacks libraries (scripts/deps.sh installs libconfuse2 and libev4):\n%s", out)
		}
	}
	return p
}

// ngSkip skips t for want of the real nsca-ng programs, except in CI, whose
// machine scripts/deps.sh has prepared: there a missing program fails, so
// that a green run never hides nsca-ng tests that did not run.
func ngSkip(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// ngClient is one nsca-ng client configuration.
type ngClient struct {
	bin, identity, password string
	port                    int
}

// run pipes input into the real send_nsca with args (-C for commands).
func (c ngClient) run(t testing.TB, input string, args ...string) (string, error) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "send_nsca.cfg")
	writeFile(t, cfg, fmt.Sprintf("identity = %q\npassword = %q\nserver = \"127.0.0.1\"\nport = %d\ntimeout = 10\n",
		c.identity, c.password, c.port), 0o600)
	cmd := exec.Command(c.bin, append([]string{"-c", cfg}, args...)...)
	cmd.Stdin = strings.NewReader(input)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ngIdentities is an nsca-ng.cfg that the real server reads, and that ours
// reads as identities_file: its command_file and listen are nsca-ng's.
func ngIdentities(cmdFile string, port int) string {
	return fmt.Sprintf(`# nsca-ng.cfg: the server's settings, then the clients
command_file = "%s"
listen = "127.0.0.1:%d"
timeout = 30.0
authorize "alice" {
	password = "alice-secret"
	hosts = "web[0-9]+"
	services = { "disk@web[0-9]+", "load", "multi" }
	commands = "ENABLE_NOTIFICATIONS"
}
authorize "root" {
	password = "root-secret"
	commands = ".*"
}
`, cmdFile, port)
}

// ngServer runs the real nsca-ng server on cfg in the foreground.
func ngServer(t testing.TB, bin, cfg string, port int) *proc {
	t.Helper()
	var out lockedBuffer
	cmd := exec.Command(bin, "-c", cfg, "-F")
	cmd.Stdout, cmd.Stderr = &out, &out
	p := mustStart(t, "nsca-ng", cmd)
	t.Cleanup(func() {
		p.terminate(5 * time.Second)
		if t.Failed() {
			t.Logf("nsca-ng's output:\n%s", out.String())
		}
	})
	if !waitFor(10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("nsca-ng did not listen on %d:\n%s", port, out.String())
	}
	return p
}

// ngStartDaemon starts ours with an nsca-ng listener on the identities.
func ngStartDaemon(t testing.TB, dir, cmdFile, ids string, extra Config) (d *Daemon, ngPort int, metrics string) {
	t.Helper()
	return ngStartDaemonWith(t, cmdFile, ids, extra, daemonOpts{dir: dir})
}

// ngStartDaemonWith is ngStartDaemon as o says (its directory, its
// environment).
func ngStartDaemonWith(t testing.TB, cmdFile, ids string, extra Config, o daemonOpts) (d *Daemon, ngPort int, metrics string) {
	t.Helper()
	ngPort = freePort(t)
	metrics = "127.0.0.1:" + strconv.Itoa(freePort(t))
	d = startDaemonWith(t, merge(Config{"command_file": cmdFile, "password": "legacy-secret", "decryption_method": "1",
		"identities_file": ids, "nsca_ng_listen": "127.0.0.1:" + strconv.Itoa(ngPort), "metrics_address": metrics}, extra), o)
	if !waitFor(10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ngPort)), 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("nsca-ng listener not up on %d:\n%s", ngPort, d.Stderr())
	}
	return d, ngPort, metrics
}

// ngSession is the client input of TestNscaNG, the same for both servers:
// what each step sends, and whether the server must take it.
type ngStep struct {
	name, identity, password, input string
	args                            []string
	ok                              bool
}

var ngSteps = []ngStep{
	{"service result", "alice", "alice-secret", "web1\tdisk\t0\tdisk ok\x17", nil, true},
	{"host result", "alice", "alice-secret", "web2\t1\thost down\x17", nil, true},
	{"multi-line output", "alice", "alice-secret", "web1\tmulti\t2\tfirst line\nsecond \\ line\nthird|perf=1\x17", nil, true},
	{"many results per session", "alice", "alice-secret", strings.Repeat("web3\tload\t0\tload ok\x17", 50), nil, true},
	{"other command", "root", "root-secret", "ENABLE_NOTIFICATIONS\nSCHEDULE_FORCED_SVC_CHECK;web1;disk;1700000000\n", []string{"-C"}, true},
	{"allowed command", "alice", "alice-secret", "ENABLE_NOTIFICATIONS\n", []string{"-C"}, true},
	{"unauthorized host", "alice", "alice-secret", "db1\tdisk\t0\tnot alice's\x17", nil, false},
	{"unauthorized command", "alice", "alice-secret", "DISABLE_NOTIFICATIONS\n", []string{"-C"}, false},
	{"wrong password", "alice", "wrong-secret", "web1\tdisk\t0\twrong password\x17", nil, false},
	{"unknown identity", "mallory", "alice-secret", "web1\tdisk\t0\tunknown identity\x17", nil, false},
}

// ngRunSteps sends every step to port and checks each one's outcome.
func ngRunSteps(t *testing.T, bin string, port int, server string) {
	t.Helper()
	for _, st := range ngSteps {
		out, err := ngClient{bin: bin, identity: st.identity, password: st.password, port: port}.run(t, st.input, st.args...)
		if st.ok && err != nil {
			t.Errorf("%s: %s: send_nsca failed: %v\n%s", server, st.name, err, out)
		}
		if !st.ok && err == nil {
			t.Errorf("%s: %s: send_nsca succeeded, want a refusal\n%s", server, st.name, out)
		}
	}
}

var ngStamp = regexp.MustCompile(`^\[(\d+)\] `)

// ngLines is what a command file got, without the timestamps, which are
// the client's and differ between two runs.
func ngLines(t testing.TB, lines []string) []string {
	t.Helper()
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		if !ngStamp.MatchString(l) {
			t.Errorf("line without a timestamp: %q", l)
		}
		out = append(out, ngStamp.ReplaceAllString(l, ""))
	}
	return out
}

// TestNscaNG: the real nsca-ng client against ours and against the real
// nsca-ng server with the same nsca-ng.cfg (ours reads it as
// identities_file): check results, a host result, multi-line output, many
// results per session, other commands, and refusals (a host and a command
// the identity may not send, a wrong password, an unknown identity). Our
// command file gets exactly the lines nsca-ng's gets; refusals are counted.
func TestNscaNG(t *testing.T) {
	progs := ngExtract(t, true)
	dir := t.TempDir()

	theirFIFO := filepath.Join(dir, "nsca-ng.fifo")
	if err := syscall.Mkfifo(theirFIFO, 0o600); err != nil {
		t.Fatal(err)
	}
	theirs := openFIFOReader(t, theirFIFO)
	theirPort := freePort(t)
	theirCfg := filepath.Join(dir, "nsca-ng.cfg")
	writeFile(t, theirCfg, ngIdentities(theirFIFO, theirPort), 0o600)
	ngServer(t, progs.server, theirCfg, theirPort)
	ngRunSteps(t, progs.client, theirPort, "nsca-ng")

	ourFIFO := makeFIFO(t, dir)
	ours := openFIFOReader(t, ourFIFO)
	d, ngPort, metrics := ngStartDaemon(t, dir, ourFIFO, theirCfg, nil)
	lo := now()
	ngRunSteps(t, progs.client, ngPort, "nsca_fast")
	hi := now()

	want := 3 + 50 + 3
	theirLines := theirs.Collect(t, want)
	ourLines := ours.Collect(t, want)
	if extra, ok := ours.Next(500 * time.Millisecond); ok {
		t.Errorf("a line more than nsca-ng wrote: %q", extra)
	}
	assertLines(t, ngLines(t, ourLines), ngLines(t, theirLines))
	for _, l := range ourLines {
		m := ngStamp.FindStringSubmatch(l)
		if ts, _ := strconv.ParseInt(m[1], 10, 64); ts < lo || ts > hi {
			t.Errorf("timestamp of %q is not the client's (%d..%d)", l, lo, hi)
		}
	}
	if !strings.Contains(strings.Join(ourLines, "\n"), `PROCESS_SERVICE_CHECK_RESULT;web1;multi;2;first line\nsecond \\ line\nthird|perf=1`) {
		t.Errorf("multi-line output not escaped as nsca-ng escapes it:\n%s", strings.Join(ourLines, "\n"))
	}
	for name, want := range map[string]float64{
		// The result and the command: both are submissions, refused
		// by the one authorization.
		`nsca_results_dropped_total{reason="unauthorized"}`: 2,
		`nsca_identity_refused_total{identity="alice"}`:     2,
		// The wrong password and the unknown identity: the listener's
		// probe closed without a word, which is incomplete, not refused.
		`nsca_connections_refused_total`: 2,
	} {
		if got := identWaitMetric(t, metrics, name, want); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	d.Stop()
	log := d.Stderr()
	for _, re := range []string{
		`nsca-ng: refused check from alice@127\.0\.0\.1:\d+ \(ID: [^)]+\): validate: not authorized: identity "alice" \([^)]+\) may not submit results for host "db1" service "disk"`,
		`nsca-ng: refused command from alice@.*: not authorized: identity "alice" .* may not submit the command "DISABLE_NOTIFICATIONS"`,
		`TLS handshake with 127\.0\.0\.1:\d+ \(identity "alice", wrong password\?\) failed`,
		`TLS handshake with 127\.0\.0\.1:\d+ \(identity "mallory", unknown\) failed`,
		`nsca-ng\.cfg:3: listen is not an identities setting \(nsca-ng's own\?\): ignored`,
	} {
		if !regexp.MustCompile(re).MatchString(log) {
			t.Errorf("the log has no line matching %s", re)
		}
	}
}

// TestNscaNGPing: PING is answered PONG 1 and the session ends, by ours as
// by nsca-ng; requests out of place, bad versions, a PUSH over
// max_command_size and a line far over the limit get nsca-ng's answers.
func TestNscaNGPing(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl command")
	}
	progs := ngExtract(t, true)
	dir := t.TempDir()
	cmdFile := commandFile(t, dir)
	ids := filepath.Join(dir, "nsca-ng.cfg")
	theirPort := freePort(t)
	writeFile(t, ids, ngIdentities(cmdFile, theirPort), 0o600)
	ngServer(t, progs.server, ids, theirPort)
	_, ngPort, _ := ngStartDaemon(t, dir, cmdFile, ids, nil)
	sessions := [][]string{
		{"PING 1"},
		// NOOP last: nsca-ng 1.6 reads nothing more after it (its session
		// then waits for the timeout), which ours does not copy.
		{"NOOP", "MOIN 0 abc", "MOIN 1 abc", "PUSH 99999", "MOIN 1 abc", "NOOP"},
		{"MOIN 1 abc", "QUIT"},
		{"MOIN 1 abcdef", strings.Repeat("x", 3000)},
	}
	for _, requests := range sessions {
		theirs := ngOpenSSL(t, theirPort, requests)
		ours := ngOpenSSL(t, ngPort, requests)
		if strings.Join(ours, "|") != strings.Join(theirs, "|") {
			t.Errorf("%.40q answered %q, nsca-ng answers %q", requests, ours, theirs)
		}
	}
	if got := ngOpenSSL(t, ngPort, []string{"PING 1"}); len(got) != 1 || got[0] != "PONG 1" {
		t.Errorf("PING answered %q", got)
	}
	// TLS 1.2 with the suite nsca-ng's protocol requires, on both.
	for _, port := range []int{theirPort, ngPort} {
		if got := ngOpenSSL(t, port, []string{"PING 1"}, "-tls1_2", "-cipher", "PSK-AES256-CBC-SHA"); len(got) != 1 || got[0] != "PONG 1" {
			t.Errorf("port %d: PING over TLS 1.2 PSK-AES256-CBC-SHA answered %q", port, got)
		}
	}
	if got := ngOpenSSL(t, ngPort, []string{"MOIN 1 abc", "NOOP", "NOOP", "QUIT"}); strings.Join(got, "|") != "MOIN 1|OKAY|OKAY|OKAY" {
		t.Errorf("NOOP, NOOP, QUIT answered %q", got)
	}
}

// ngOpenSSL opens a session as alice with openssl s_client and sends the
// requests one by one, each once the previous one is answered, as the
// real client does; it returns the answers, and stops at the first
// request not answered within 3 s (the server ended the session, or
// waits).
// An empty request sends nothing and waits up to 6 s for what the server
// says by itself (a BAIL at the idle timeout). args are more s_client
// options (-tls1_2).
func ngOpenSSL(t testing.TB, port int, requests []string, args ...string) []string {
	t.Helper()
	return ngOpenSSLAs(t, port, "alice", "alice-secret", requests, args...)
}

// ngOpenSSLAs is ngOpenSSL as identity with password. A request that
// ends in a newline is written as it is (a pushed command), any other
// with CRLF.
func ngOpenSSLAs(t testing.TB, port int, identity, password string, requests []string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("openssl", append([]string{"s_client", "-quiet", "-connect", "127.0.0.1:" + strconv.Itoa(port),
		"-psk_identity", identity, "-psk", hex.EncodeToString([]byte(password))}, args...)...)
	in, _ := cmd.StdinPipe()
	// A pipe of our own: StdoutPipe's is closed by Wait, which runs at
	// once (mustStart), and would lose the answer of a session the server
	// ends at once (PONG).
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout = w
	p := mustStart(t, "openssl", cmd)
	w.Close()
	defer p.terminate(time.Second)
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		r := bufio.NewReader(out)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			lines <- strings.TrimSuffix(l, "\r\n")
		}
	}()
	var answers []string
	for _, req := range requests {
		wait := 3 * time.Second
		if req == "" {
			wait = 6 * time.Second
		} else if !strings.HasSuffix(req, "\n") {
			req += "\r\n"
		}
		if _, err := io.WriteString(in, req); req != "" && err != nil {
			break
		}
		select {
		case l, ok := <-lines:
			if !ok {
				return answers
			}
			answers = append(answers, l)
		case <-time.After(wait):
			return answers
		}
	}
	in.Close()
	return answers
}

// TestNscaNGConcurrent: 100 real nsca-ng clients at once, 10 results each
// per session, all delivered once, with nsca_ng_max_sessions above that.
func TestNscaNGConcurrent(t *testing.T) {
	progs := ngExtract(t, false)
	dir := t.TempDir()
	fifo := makeFIFO(t, dir)
	reader := openFIFOReader(t, fifo)
	ids := filepath.Join(dir, "nsca-ng.cfg")
	writeFile(t, ids, ngIdentities(fifo, 0), 0o600)
	_, ngPort, _ := ngStartDaemon(t, dir, fifo, ids, Config{"nsca_ng_threads": "2"})
	const clients, each = 100, 10
	var wg sync.WaitGroup
	errs := make(chan string, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var in strings.Builder
			for i := 0; i < each; i++ {
				fmt.Fprintf(&in, "web%d\tload\t0\tclient %d result %d\x17", c, c, i)
			}
			if out, err := (ngClient{bin: progs.client, identity: "alice", password: "alice-secret", port: ngPort}).run(t, in.String()); err != nil {
				errs <- fmt.Sprintf("client %d: %v: %s", c, err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	lines := ngLines(t, reader.Collect(t, clients*each))
	sort.Strings(lines)
	var want []string
	for c := 0; c < clients; c++ {
		for i := 0; i < each; i++ {
			want = append(want, fmt.Sprintf("PROCESS_SERVICE_CHECK_RESULT;web%d;load;0;client %d result %d", c, c, i))
		}
	}
	sort.Strings(want)
	assertLines(t, lines, want)
}

// TestNscaNGHostile: clients that connect to the nsca-ng port and never
// finish a TLS handshake hold no more than nsca_ng_max_sessions sessions
// (the rest are refused at once, counted), are closed after
// nsca_ng_handshake_timeout, and meanwhile send_nsca clients on the
// legacy port and an nsca-ng client within the cap are served.
func TestNscaNGHostile(t *testing.T) {
	progs := ngExtract(t, false)
	dir := t.TempDir()
	cmd := commandFile(t, dir)
	ids := filepath.Join(dir, "nsca-ng.cfg")
	writeFile(t, ids, ngIdentities(cmd, 0), 0o600)
	d, ngPort, metrics := ngStartDaemon(t, dir, cmd, ids, Config{"append_to_file": "1",
		"nsca_ng_max_sessions": "8", "nsca_ng_handshake_timeout": "2", "nsca_ng_timeout": "2"})
	// The probe that found the listener up was one handshake that failed.
	base, _ := relScrape(metrics)
	const hostile = 20
	var conns []net.Conn
	for i := 0; i < hostile; i++ {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ngPort)), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			c.Write([]byte{0x16, 0x03}) // the start of a TLS record, and no more
		}
		conns = append(conns, c)
		defer c.Close()
	}
	lo := now()
	Client{Password: "legacy-secret", Method: 1}.send(t, d.Port, "legacy\tsvc\t0\tserved beside the hostile clients\n", 1)
	refused := `nsca_connections_refused_total`
	if got := identWaitMetric(t, metrics, refused, base[refused]+hostile-8); got < base[refused]+hostile-8 {
		t.Errorf("%s = %v, want at least %v: the sessions over nsca_ng_max_sessions=8 were not refused", refused, got, base[refused]+hostile-8)
	}
	// Every hostile connection ends: at once over the cap, after the
	// handshake timeout within it.
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(15 * time.Second))
		// A reset is a close too: the server did not read what was sent.
		if _, err := io.ReadAll(c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("hostile connection %d still open after the handshake timeout: %v", i, err)
		}
	}
	// An idle session is bailed out of after nsca_ng_timeout.
	if got := ngOpenSSL(t, ngPort, []string{"MOIN 1 idle", ""}); strings.Join(got, "|") != "MOIN 1|BAIL Connection timed out" {
		t.Errorf("an idle session got %q, want MOIN 1 and BAIL Connection timed out", got)
	}
	if out, err := (ngClient{bin: progs.client, identity: "alice", password: "alice-secret", port: ngPort}).run(t, "web1\tdisk\t0\tafter the hostile ones\x17"); err != nil {
		t.Errorf("nsca-ng client after the hostile ones: %v\n%s", err, out)
	}
	waitFileLines(t, cmd, 2)
	hi := now()
	d.Stop()
	assertLines(t, commandsIn(t, cmd, lo, hi), []string{
		"PROCESS_SERVICE_CHECK_RESULT;legacy;svc;0;served beside the hostile clients",
		"PROCESS_SERVICE_CHECK_RESULT;web1;disk;0;after the hostile ones",
	})
	if !strings.Contains(d.Stderr(), "no TLS handshake within 2s") || !strings.Contains(d.Stderr(), "nsca_ng_max_sessions=8 reached") {
		t.Errorf("the log does not say why the hostile connections were closed")
	}
}

// TestNscaNGNetworks: an identity's networks (ours, beside nsca-ng's keys)
// restrict where its nsca-ng clients may connect from, as for send_nsca
// clients; "*" lends its key and rights to identities without a block.
func TestNscaNGNetworks(t *testing.T) {
	progs := ngExtract(t, false)
	dir := t.TempDir()
	cmd := commandFile(t, dir)
	ids := filepath.Join(dir, "identities.cfg")
	writeFile(t, ids, `authorize "near" {
	password = "near-secret"
	services = ".*"
	networks = { "127.0.0.0/8" }
}
authorize "far" {
	password = "far-secret"
	services = ".*"
	networks = { "10.99.0.0/16" }
}
authorize "*" {
	password = "anyone-secret"
	services = "ping"
}
`, 0o600)
	d, ngPort, metrics := ngStartDaemon(t, dir, cmd, ids, Config{"append_to_file": "1"})
	base, _ := relScrape(metrics)
	lo := now()
	send := func(identity, password, input string) error {
		out, err := ngClient{bin: progs.client, identity: identity, password: password, port: ngPort}.run(t, input)
		if err != nil {
			t.Logf("%s: %v: %s", identity, err, out)
		}
		return err
	}
	if err := send("near", "near-secret", "h\tdisk\t0\tfrom near\x17"); err != nil {
		t.Errorf("near, from its network: refused")
	}
	if err := send("far", "far-secret", "h\tdisk\t0\tfrom far\x17"); err == nil {
		t.Errorf("far, from outside its networks: accepted")
	}
	if err := send("somebody", "anyone-secret", "h\tping\t0\tthe fallback's key\x17"); err != nil {
		t.Errorf("an identity without a block, with the fallback's key: refused")
	}
	if err := send("somebody", "anyone-secret", "h\tdisk\t0\tnot the fallback's right\x17"); err == nil {
		t.Errorf("the fallback's identity sent a result outside its rights")
	}
	waitFileLines(t, cmd, 2)
	refused := `nsca_connections_refused_total`
	if got := identWaitMetric(t, metrics, refused, base[refused]+1); got != base[refused]+1 {
		t.Errorf("%s = %v, want %v", refused, got, base[refused]+1)
	}
	if got := identWaitMetric(t, metrics, `nsca_identity_refused_total{identity="*"}`, 1); got != 1 {
		t.Errorf(`refusals counted for "*": %v, want 1`, got)
	}
	hi := now()
	d.Stop()
	assertLines(t, commandsIn(t, cmd, lo, hi), []string{
		"PROCESS_SERVICE_CHECK_RESULT;h;disk;0;from near",
		"PROCESS_SERVICE_CHECK_RESULT;h;ping;0;the fallback's key",
	})
	if !strings.Contains(d.Stderr(), `identity "far" may not connect from 127.0.0.1`) {
		t.Errorf("the refusal of far is not logged")
	}
}

// TestNscaNGNoCommandFile: with no command_file (results go to the spool),
// a check result is taken and written as a spool file, and another command
// is refused with FAIL and the reason, as nothing could take it.
func TestNscaNGNoCommandFile(t *testing.T) {
	progs := ngExtract(t, false)
	dir := t.TempDir()
	spool := makeSpoolDir(t, dir)
	ids := filepath.Join(dir, "nsca-ng.cfg")
	writeFile(t, ids, ngIdentities("/nonexistent", 0), 0o600)
	ngPort := freePort(t)
	d := startDaemonWith(t, Config{"check_result_path": spool, "password": "legacy-secret", "identities_file": ids,
		"nsca_ng_listen": "127.0.0.1:" + strconv.Itoa(ngPort)}, daemonOpts{dir: dir})
	root := ngClient{bin: progs.client, identity: "root", password: "root-secret", port: ngPort}
	waitFor(10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ngPort)), 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if out, err := root.run(t, "spooled\tdisk\t0\tto the spool\x17"); err != nil {
		t.Fatalf("check result: %v\n%s", err, out)
	}
	if got := readSpool(t, spool, 1); len(got) != 1 || got[0].host != "spooled" {
		t.Errorf("spool holds %+v, want the one result of host spooled", got)
	}
	out, err := root.run(t, "ENABLE_NOTIFICATIONS\n", "-C")
	if err == nil || !strings.Contains(out, "FAIL No command_file for commands other than check results") {
		t.Errorf("another command without a command file: err %v, output %q; want FAIL with the reason", err, out)
	}
	d.Stop()
	if !regexp.MustCompile(`refused command from root@.*: intake: no destination can write external commands`).MatchString(d.Stderr()) {
		t.Errorf("the refusal is not logged")
	}
}

// TestNscaNGReload: after SIGHUP the new pipeline listens on the nsca-ng
// port beside the old one while it drains (SO_REUSEPORT), so nsca-ng
// clients are served before, during and after, each result once; a
// session left idle across the reload is bailed out of by the old
// pipeline once its grace is up, as send_nsca connections are closed.
func TestNscaNGReload(t *testing.T) {
	progs := ngExtract(t, false)
	dir := t.TempDir()
	cmd := commandFile(t, dir)
	ids := filepath.Join(dir, "nsca-ng.cfg")
	writeFile(t, ids, ngIdentities(cmd, 0), 0o600)
	d, ngPort, _ := ngStartDaemon(t, dir, cmd, ids, Config{"append_to_file": "1"})
	alice := ngClient{bin: progs.client, identity: "alice", password: "alice-secret", port: ngPort}
	lo := now()
	if out, err := alice.run(t, "web1\tload\t0\tbefore\x17"); err != nil {
		t.Fatalf("before the reload: %v\n%s", err, out)
	}
	// A session that stays open across the reload.
	var open []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		open = ngOpenSSL(t, ngPort, []string{"MOIN 1 across", "", "NOOP", "QUIT"})
	}()
	time.Sleep(500 * time.Millisecond)
	d.Signal(syscall.SIGHUP)
	d.waitLog(regexp.MustCompile(`SIGHUP: configuration reloaded`), 10*time.Second)
	for i := 0; i < 5; i++ {
		if out, err := alice.run(t, fmt.Sprintf("web1\tload\t0\tafter %d\x17", i)); err != nil {
			t.Errorf("after the reload: %v\n%s", err, out)
		}
	}
	<-done
	if strings.Join(open, "|") != "MOIN 1|BAIL Server shutting down" {
		t.Errorf("the idle session across the reload got %q, want MOIN 1, then BAIL Server shutting down", open)
	}
	waitFileLines(t, cmd, 6)
	hi := now()
	d.Stop()
	want := []string{"PROCESS_SERVICE_CHECK_RESULT;web1;load;0;before"}
	for i := 0; i < 5; i++ {
		want = append(want, fmt.Sprintf("PROCESS_SERVICE_CHECK_RESULT;web1;load;0;after %d", i))
	}
	assertLines(t, commandsIn(t, cmd, lo, hi), want)
}

// TestNscaNGHandshakesPerSource: one address that opens 60 connections
// and says nothing, with nsca_ng_max_sessions=50, gets no more once half
// the sessions are open and it has max_handshakes_per_source (8) in their
// handshake: the rest are refused at once, counted and logged
// (rate-limited), and an nsca-ng client from another address is served at
// once, not after the handshake timeout. A stop does not wait for the
// silent ones' handshake timeout.
func TestNscaNGHandshakesPerSource(t *testing.T) {
	progs := ngExtract(t, false)
	dir := t.TempDir()
	cmd := commandFile(t, dir)
	ids := filepath.Join(dir, "nsca-ng.cfg")
	writeFile(t, ids, ngIdentities(cmd, 0), 0o600)
	d, ngPort, metrics := ngStartDaemon(t, dir, cmd, ids, Config{"append_to_file": "1",
		"nsca_ng_max_sessions": "50", "nsca_ng_handshake_timeout": "60"})
	base, _ := relScrape(metrics)
	const hostile = 60
	for i := 0; i < hostile; i++ {
		c, err := dialLocal(ngPort, "127.0.0.2", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	// Up to half of the 50 sessions anyone may start; from then on the
	// address with 8 or more in their handshake gets no more: 25 held.
	refused := `nsca_connections_refused_total`
	if got := identWaitMetric(t, metrics, refused, base[refused]+hostile-25); got != base[refused]+hostile-25 {
		t.Errorf("%s = %v, want %v: all but 25 of one address's silent connections refused", refused, got, base[refused]+hostile-25)
	}
	start := time.Now()
	if out, err := (ngClient{bin: progs.client, identity: "alice", password: "alice-secret", port: ngPort}).run(t, "web1\tdisk\t0\tbeside a silent address\x17"); err != nil {
		t.Errorf("nsca-ng client beside the silent address: %v\n%s", err, out)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the client waited %v: it was held back by the silent address", took)
	}
	waitFileLines(t, cmd, 1)
	d.Stop()
	// The rate-limited log says it at most 5 times per address in 10 s,
	// and counts the rest in its summary.
	n := 0
	for _, l := range strings.Split(d.Stderr(), "\n") {
		if strings.Contains(l, "max_handshakes_per_source=8 reached with over half of nsca_ng_max_sessions=50 open") && !strings.Contains(l, "suppressed by the rate limit") {
			n++
		}
	}
	if n < 1 || n > 5 {
		t.Errorf("the per-source refusal was logged %d times for %d refusals, want it rate-limited", n, hostile-25)
	}
}
