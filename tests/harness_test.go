package tests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Paths of the real programs the tests drive.
const (
	sendNscaPath  = "/usr/sbin/send_nsca"
	stockNscaPath = "/usr/sbin/nsca"
)

// Bounds on everything the tests wait for.
const (
	startTimeout  = 5 * time.Second  // daemon start until the port accepts
	stopTimeout   = 10 * time.Second // SIGTERM until exit (the drain grace is 2 s)
	sendTimeout   = 15 * time.Second // one send_nsca run
	arriveTimeout = 10 * time.Second // results appearing in a sink
)

// nscaBin is the daemon under test, built once by TestMain; tests reach it
// through daemonBin. moduleRoot is set when TestMain built it.
var (
	nscaBin    string
	moduleRoot string
	cacheOnce  sync.Once
)

// daemonBin returns the daemon under test. go test caches a passing run
// keyed on the files and environment variables the tests used, as logged
// while tests run (not in TestMain): so the first call reads NSCA_BIN and
// opens the daemon's sources (when TestMain built it) or the NSCA_BIN
// binary. A changed daemon is then never answered from the cache.
func daemonBin() string {
	cacheOnce.Do(func() {
		os.Getenv("NSCA_BIN")
		if moduleRoot != "" {
			touchSources(moduleRoot)
		} else if f, err := os.Open(nscaBin); err == nil {
			f.Close()
		}
	})
	return nscaBin
}

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if _, err := os.Stat(sendNscaPath); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\nThese tests drive the real send_nsca: install nsca-client (apt-get install nsca-client).\n", err)
		return 1
	}
	root, err := filepath.Abs("..") // go test runs in the package directory
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	if bin := os.Getenv("NSCA_BIN"); bin != "" {
		// A relative NSCA_BIN may be meant from the module root, where
		// `go test ./tests/` is usually typed, or from tests/.
		abs := bin
		if !filepath.IsAbs(bin) {
			abs = filepath.Join(root, bin)
			if _, err := os.Stat(abs); err != nil {
				abs, _ = filepath.Abs(bin)
			}
		}
		if _, err := os.Stat(abs); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: NSCA_BIN=%s: %v\n", bin, err)
			return 1
		}
		nscaBin = abs
		return m.Run()
	}
	moduleRoot = root
	dir, err := os.MkdirTemp("", "nsca-tests-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	nscaBin = filepath.Join(dir, "nsca")
	build := exec.Command("go", "build", "-o", nscaBin, "nsca_fast/src")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: building the daemon (go build -o %s nsca_fast/src in %s): %v\n%s", nscaBin, root, err, out)
		return 1
	}
	return m.Run()
}

// touchSources opens every file the daemon's build reads (Go and C sources,
// go.mod, go.sum, embedded configuration) under root.
func touchSources(root string) {
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "tests") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".c", ".h", ".cfg", ".mod", ".sum":
			if f, err := os.Open(path); err == nil {
				f.Close()
			}
		}
		return nil
	})
}

// Config is an nsca.cfg as option → value; text writes it in sorted order.
type Config map[string]string

func (c Config) text() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, c[k])
	}
	return b.String()
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// proc is a process started by a test, ended by its PID.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	state  *os.ProcessState
	err    error
}

func startProc(name string, cmd *exec.Cmd) (*proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// terminate sends SIGTERM to the PID and waits; after timeout it sends
// SIGKILL to the PID. It reports whether the process had to be killed.
func (p *proc) terminate(timeout time.Duration) (killed bool) {
	if p.hasExited() {
		return false
	}
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
		return false
	case <-time.After(timeout):
	}
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	return true
}

// waitPort waits until the daemon serves port: a connection gets the
// 132-byte init packet, or is closed by the daemon at once (allowed_hosts),
// rather than just sitting in the listen backlog. It fails if p exits or
// the deadline passes.
func waitPort(p *proc, port int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for {
		if p.hasExited() {
			return fmt.Errorf("%s exited before accepting connections: %v", p.name, p.state)
		}
		c, err := dialLocal(port, "", 200*time.Millisecond)
		if err == nil {
			_, err = readInit(c, 500*time.Millisecond)
			c.Close()
			if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
				if listensOn(p.cmd.Process.Pid, port) {
					return nil
				}
				// Someone else's listener: ours may still bind, or exit
				// on "address already in use" (launchDaemon retries).
				err = fmt.Errorf("port %d answers, but not from %s", port, p.name)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not serve on %s within %v: %v", p.name, addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Daemon is a running nsca under test.
type Daemon struct {
	t          testing.TB
	Dir        string // temporary directory holding the config and stderr
	Port       int
	CfgPath    string
	stderrPath string
	p          *proc
	stopOnce   sync.Once
	termSent   bool // the test sent SIGTERM itself
}

// daemonOpts says how to start a daemon; the zero value starts the daemon
// under test as `nsca -c CFG -f` in a new temporary directory on a free
// port and waits until the port serves.
type daemonOpts struct {
	dir     string                                    // "": a new temporary directory
	port    int                                       // 0: a free port (and a retry should it be taken meanwhile)
	bin     string                                    // "": the daemon under test
	args    []string                                  // after -c CFG -f
	env     []string                                  // added to the environment
	wrap    func(bin string, args []string) *exec.Cmd // builds the command (default: bin itself)
	extra   []*os.File                                // descriptors from 3 on
	noWait  bool                                      // do not wait until the port serves
	cfgMode os.FileMode                               // 0: 0600
	cfgTail string                                    // raw text after the options of the config
}

// listenConfig is cfg listening on 127.0.0.1:port, unless cfg says
// otherwise.
func listenConfig(cfg Config, port int) Config {
	return merge(Config{"server_address": "127.0.0.1", "server_port": strconv.Itoa(port)}, cfg)
}

// startDaemon writes cfg (server_address and server_port filled in) into a
// temporary directory, starts `nsca -c CFG -f`, and waits until the port
// accepts. Cleanup stops it and asserts exit status 0.
func startDaemon(t testing.TB, cfg Config) *Daemon {
	t.Helper()
	return startDaemonWith(t, cfg, daemonOpts{})
}

// startDaemonWith is startDaemon as o says.
func startDaemonWith(t testing.TB, cfg Config, o daemonOpts) *Daemon {
	t.Helper()
	d := launchDaemon(t, cfg, o)
	t.Cleanup(func() {
		d.Stop()
		if t.Failed() {
			t.Logf("daemon stderr (%s):\n%s", d.stderrPath, d.Stderr())
		}
	})
	return d
}

// launchDaemon starts a daemon as o says, without any cleanup: the caller
// ends it.
func launchDaemon(t testing.TB, cfg Config, o daemonOpts) *Daemon {
	t.Helper()
	for attempt := 1; ; attempt++ {
		d, err := tryStartDaemon(t, cfg, o)
		if err == nil {
			return d
		}
		// A port found free can be taken by someone else before the daemon
		// binds it; only that is worth a retry.
		if attempt < 4 && o.port == 0 && strings.Contains(d.Stderr(), "address already in use") {
			continue
		}
		t.Fatalf("starting the daemon: %v\nconfig:\n%s\nstderr:\n%s", err, readFile(t, d.CfgPath), d.Stderr())
	}
}

func tryStartDaemon(t testing.TB, cfg Config, o daemonOpts) (*Daemon, error) {
	t.Helper()
	dir, port, bin, mode := o.dir, o.port, o.bin, o.cfgMode
	if dir == "" {
		dir = t.TempDir()
	}
	if port == 0 {
		port = freePort(t)
	}
	if bin == "" {
		bin = daemonBin()
	}
	if mode == 0 {
		mode = 0o600
	}
	c := merge(Config{"server_address": "127.0.0.1"}, cfg, Config{"server_port": strconv.Itoa(port)})
	d := &Daemon{t: t, Dir: dir, Port: port,
		CfgPath:    filepath.Join(dir, fmt.Sprintf("nsca-%d.cfg", port)),
		stderrPath: filepath.Join(dir, fmt.Sprintf("nsca-%d.stderr", port))}
	writeFile(t, d.CfgPath, c.text()+o.cfgTail, mode)
	stderr, err := os.Create(d.stderrPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	args := append([]string{"-c", d.CfgPath, "-f"}, o.args...)
	var cmd *exec.Cmd
	if o.wrap != nil {
		cmd = o.wrap(bin, args)
	} else {
		cmd = exec.Command(bin, args...)
	}
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.Env = append(append(os.Environ(), lifecycleGOGC(t)...), o.env...)
	cmd.ExtraFiles = o.extra
	d.p = mustStart(t, filepath.Base(bin), cmd)
	if o.noWait {
		return d, nil
	}
	if err := waitPort(d.p, port, startTimeout); err != nil {
		d.p.terminate(time.Second)
		return d, err
	}
	return d, nil
}

// lifecycleTests are the tests whose daemons run with GOGC=1 by default:
// collecting garbage all the time makes a finalizer that closes a
// descriptor still in use, or any other GC-timing bug, show in seconds.
var lifecycleTests = regexp.MustCompile(`^Test(Lifecycle|Rel|Supervisor|FullDisk|Reload|Drain|SIGHUP|Workers)`)

// lifecycleGOGC is the GOGC setting for t's daemons: NSCA_TEST_GOGC if set
// ("default" leaves Go's own), else 1 for the lifecycle and reliability
// tests. scripts/test.sh runs those tests once more with the default.
func lifecycleGOGC(t testing.TB) []string {
	if !lifecycleTests.MatchString(t.Name()) {
		return nil
	}
	switch v := os.Getenv("NSCA_TEST_GOGC"); v {
	case "default":
		return []string{"GOGC=100"}
	case "":
		return []string{"GOGC=1"}
	default:
		return []string{"GOGC=" + v}
	}
}

// Pid is the daemon's PID.
func (d *Daemon) Pid() int { return d.p.cmd.Process.Pid }

// Stderr is what the daemon has logged so far.
func (d *Daemon) Stderr() string {
	b, _ := os.ReadFile(d.stderrPath)
	return string(b)
}

// Stop sends SIGTERM (once), waits for the drain and asserts exit status 0.
func (d *Daemon) Stop() {
	d.stopOnce.Do(func() {
		if d.p.hasExited() && !d.termSent {
			d.t.Errorf("the daemon exited before it was stopped: %v\nstderr:\n%s", d.p.state, d.Stderr())
			return
		}
		if d.p.terminate(stopTimeout) {
			d.t.Errorf("the daemon did not exit within %v of SIGTERM and was killed\nstderr:\n%s", stopTimeout, d.Stderr())
			return
		}
		if !d.p.state.Success() {
			d.t.Errorf("the daemon exited with %v after SIGTERM, want status 0\nstderr:\n%s", d.p.state, d.Stderr())
		}
	})
}

// Signal sends sig to the daemon's PID; after SIGTERM, Stop only waits
// for the exit and checks its status.
func (d *Daemon) Signal(sig syscall.Signal) {
	d.t.Helper()
	if sig == syscall.SIGTERM {
		d.termSent = true
	}
	if err := syscall.Kill(d.Pid(), sig); err != nil {
		d.t.Fatalf("kill -%d %d: %v", sig, d.Pid(), err)
	}
}

// rewriteConfig replaces the daemon's configuration file with cfg, keeping
// its address and port.
func (d *Daemon) rewriteConfig(cfg Config) {
	d.t.Helper()
	writeFile(d.t, d.CfgPath, listenConfig(cfg, d.Port).text(), 0o600)
}

// waitLog waits until the daemon's log has a line matching re and returns
// it.
func (d *Daemon) waitLog(re *regexp.Regexp, timeout time.Duration) string {
	d.t.Helper()
	lines, ok := waitLines(d.Stderr, re, 1, timeout)
	if !ok {
		d.t.Fatalf("no log line matching %q within %v", re, timeout)
	}
	return lines[0]
}

// waitWorkers waits until the daemon has exactly n live worker processes,
// none of them in not, and returns them.
func (d *Daemon) waitWorkers(n int, timeout time.Duration, not ...int) []int {
	d.t.Helper()
	kids, ok := waitChildren(d.Pid(), n, timeout, not...)
	if !ok {
		d.t.Fatalf("the daemon %d has the children %v after %v, want %d workers (other than %v); exited: %v\nstderr:\n%s", d.Pid(), kids, timeout, n, not, d.p.hasExited(), d.Stderr())
	}
	return kids
}

// runDaemonExpectFailure starts the daemon with the config text, which must
// make it refuse to start, and returns its exit code and output.
func runDaemonExpectFailure(t testing.TB, cfgText string) (cfgPath string, code int, output string) {
	t.Helper()
	dir := t.TempDir()
	cfgPath = filepath.Join(dir, "nsca.cfg")
	writeFile(t, cfgPath, cfgText, 0o600)
	var out lockedBuffer
	p := mustStart(t, "nsca", nscaCmd(dir, &out, "-c", cfgPath, "-f"))
	if !p.exitWithin(startTimeout) {
		t.Fatalf("the daemon did not exit on a bad configuration within %v; it was stopped\nconfig:\n%s\noutput:\n%s", startTimeout, cfgText, out.String())
	}
	return cfgPath, p.state.ExitCode(), out.String()
}

// Client is a send_nsca configuration.
type Client struct {
	Password string
	Method   int
	Args     []string // extra arguments, e.g. --legacy-2-7-mode
	CfgPath  string   // a send_nsca.cfg to use instead of Password and Method
	Env      []string // added to send_nsca's environment
}

// send runs the real send_nsca against 127.0.0.1:port with input on its
// standard input and returns its output. It fails the test unless
// send_nsca reports wantPackets packets sent.
func (cl Client) send(t testing.TB, port int, input string, wantPackets int) string {
	t.Helper()
	out, err := cl.run(t, port, input)
	if err != nil {
		t.Fatalf("send_nsca: %v\noutput:\n%s", err, out)
	}
	want := fmt.Sprintf("%d data packet(s) sent to host successfully.", wantPackets)
	if !strings.Contains(out, want) {
		t.Fatalf("send_nsca output %q does not say %q", out, want)
	}
	return out
}

// sendRejected runs send_nsca with input that the daemon rejects: it
// closes the connection at the first bad packet, so send_nsca may die of
// SIGPIPE and its exit status is no concern; only a hang fails the test.
func (cl Client) sendRejected(t testing.TB, port int, input string) {
	t.Helper()
	if out, err := cl.run(t, port, input); err != nil && strings.Contains(err.Error(), "timed out") {
		t.Fatalf("send_nsca: %v\n%s", err, out)
	}
}

func (cl Client) run(t testing.TB, port int, input string) (string, error) {
	t.Helper()
	cfgPath := cl.CfgPath
	if cfgPath == "" {
		cfgPath = filepath.Join(t.TempDir(), "send_nsca.cfg")
		var cfg strings.Builder
		if cl.Password != "" {
			fmt.Fprintf(&cfg, "password=%s\n", cl.Password)
		}
		fmt.Fprintf(&cfg, "encryption_method=%d\n", cl.Method)
		writeFile(t, cfgPath, cfg.String(), 0o600)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	args := append([]string{"-H", "127.0.0.1", "-p", strconv.Itoa(port), "-to", "10", "-c", cfgPath}, cl.Args...)
	cmd := exec.CommandContext(ctx, sendNscaPath, args...) // a timeout kills it by its PID
	cmd.Stdin = strings.NewReader(input)
	if len(cl.Env) > 0 {
		cmd.Env = append(os.Environ(), cl.Env...)
	}
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", sendTimeout, err)
	}
	return string(out), err
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// completeLines splits text into its newline-terminated lines.
func completeLines(text string) []string {
	lines := strings.SplitAfter(text, "\n")
	var out []string
	for _, l := range lines {
		if strings.HasSuffix(l, "\n") {
			out = append(out, strings.TrimSuffix(l, "\n"))
		}
	}
	return out
}

// waitFileLines polls path until it holds at least n complete lines.
func waitFileLines(t testing.TB, path string, n int) []string {
	t.Helper()
	var lines []string
	if !waitFor(arriveTimeout, func() bool { lines = completeLines(readFile(t, path)); return len(lines) >= n }) {
		t.Fatalf("%s holds %d complete lines after %v, want %d:\n%s", path, len(lines), arriveTimeout, n, strings.Join(lines, "\n"))
	}
	return lines
}

var commandLine = regexp.MustCompile(`^\[(\d+)\] (.*)$`)

// stripTimes removes the `[time] ` prefix of command lines, checking that
// each time lies in [lo-slack, hi+slack]. Lines without it fail the test.
func stripTimes(t testing.TB, lines []string, lo, hi int64) []string {
	t.Helper()
	const slack = 1
	out := make([]string, len(lines))
	for i, l := range lines {
		m := commandLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("line %d %q is not `[time] COMMAND`", i+1, l)
			out[i] = l
			continue
		}
		ts, _ := strconv.ParseInt(m[1], 10, 64)
		if ts < lo-slack || ts > hi+slack {
			t.Errorf("line %d has time %d, want between %d and %d (the send's window): %q", i+1, ts, lo, hi, l)
		}
		out[i] = m[2]
	}
	return out
}

// commandsIn returns the command lines of the file at path without their
// `[time] ` prefix, checking that each time lies in [lo-1, hi+1].
func commandsIn(t testing.TB, path string, lo, hi int64) []string {
	t.Helper()
	return stripTimes(t, completeLines(readFile(t, path)), lo, hi)
}

// assertLines compares got and want line by line, reporting every difference.
func assertLines(t testing.TB, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	var b strings.Builder
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		} else {
			g = "<missing>"
		}
		if i < len(want) {
			w = want[i]
		} else {
			w = "<none>"
		}
		if g != w {
			fmt.Fprintf(&b, "line %d:\n  got  %s\n  want %s\n", i+1, abbrev(g), abbrev(w))
		}
	}
	t.Errorf("got %d lines, want %d:\n%s", len(got), len(want), b.String())
}

// abbrev quotes s, eliding the middle of very long strings.
func abbrev(s string) string {
	if len(s) > 300 {
		return strconv.Quote(s[:150]) + fmt.Sprintf(" ...(%d bytes)... ", len(s)-300) + strconv.Quote(s[len(s)-150:])
	}
	return strconv.Quote(s)
}

// commandFile creates an empty regular command file in dir.
func commandFile(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "nsca.cmd")
	writeFile(t, path, "", 0o644)
	return path
}

// makeFIFO creates a FIFO in dir.
func makeFIFO(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "nsca.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatalf("mkfifo %s: %v", path, err)
	}
	return path
}

// FIFOReader plays the monitoring core: it holds a FIFO open for reading
// and collects the lines written into it.
type FIFOReader struct {
	f     *os.File
	lines chan string
	done  chan struct{}
}

// openFIFOReader opens path O_RDWR, which never blocks and never sees EOF
// when a writer closes, so the daemon's open-write-close cycles all land in
// one reader. Cleanup closes it.
func openFIFOReader(t testing.TB, path string) *FIFOReader {
	t.Helper()
	return newFIFOReader(t, openRDWR(t, path))
}

// openRDWR opens the FIFO at path for reading and writing, as a monitoring
// core does: the open never blocks, and reads never see end-of-file when a
// writer closes.
func openRDWR(t testing.TB, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("opening FIFO %s: %v", path, err)
	}
	return f
}

// newFIFOReader collects the newline-terminated lines read from f, already
// open, until f is closed; a partial line at the end is not a line. Cleanup
// closes f.
func newFIFOReader(t testing.TB, f *os.File) *FIFOReader {
	r := &FIFOReader{f: f, lines: make(chan string, 100000), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil
		})
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	t.Cleanup(r.Close)
	return r
}

// Close closes the reader's descriptor, which ends its goroutine.
func (r *FIFOReader) Close() {
	r.f.Close()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
	}
}

// Collect returns the next n lines, failing after arriveTimeout.
func (r *FIFOReader) Collect(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	timeout := time.After(arriveTimeout)
	for len(out) < n {
		select {
		case l := <-r.lines:
			out = append(out, l)
		case <-timeout:
			t.Fatalf("got %d lines from the FIFO within %v, want %d:\n%s", len(out), arriveTimeout, n, strings.Join(out, "\n"))
		}
	}
	return out
}

// Next returns the next line, or false after timeout.
func (r *FIFOReader) Next(timeout time.Duration) (string, bool) {
	select {
	case l := <-r.lines:
		return l, true
	case <-time.After(timeout):
		return "", false
	}
}

// Pending returns the lines that arrived but were not collected yet.
func (r *FIFOReader) Pending() []string {
	var out []string
	for {
		select {
		case l := <-r.lines:
			out = append(out, l)
		default:
			return out
		}
	}
}

// grepLines returns the lines of text matching re.
func grepLines(text string, re *regexp.Regexp) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// now is the current Unix time in seconds.
func now() int64 { return time.Now().Unix() }
