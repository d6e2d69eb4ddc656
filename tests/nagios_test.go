package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A real Nagios Core 4 (Debian's nagios4-core) fed by nsca_fast through its
// command FIFO and its check_result_path (issue 4.8). Helpers here are
// prefixed ng. The configuration is in testdata/nagios.

const ngNagiosBin = "/usr/sbin/nagios4"

// ngWait bounds every wait on Nagios.
const ngWait = 30 * time.Second

var ngHosts = []string{"host-a", "host-b", "host-c"}

// ngNagios is a Nagios started by the test, by its PID.
type ngNagios struct {
	t       *testing.T
	dir     string
	cfg     string
	logPath string
	status  string
	fifo    string
	spool   string
	out     *os.File
	p       *proc
	// children are the processes Nagios forked (check workers, the command
	// file worker): ended by their PIDs should Nagios leave any behind.
	children []int
	starts   int
}

// ngSetup writes the configuration into a temporary directory and checks
// it with `nagios4 -v`. Without nagios4 the test is skipped, except in CI.
func ngSetup(t *testing.T) *ngNagios {
	t.Helper()
	needTool(t, ngNagiosBin, "nagios4-core")
	dir := t.TempDir()
	n := &ngNagios{t: t, dir: dir, cfg: filepath.Join(dir, "nagios.cfg"), logPath: filepath.Join(dir, "nagios.log"),
		status: filepath.Join(dir, "status.dat"), fifo: filepath.Join(dir, "nagios.cmd"), spool: filepath.Join(dir, "checkresults")}
	for _, sub := range []string{"tmp", "archives", "checkresults"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tmpl, err := os.ReadFile(filepath.Join("testdata", "nagios", "nagios.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, n.cfg, strings.ReplaceAll(string(tmpl), "@DIR@", dir), 0o644)
	objects, err := os.ReadFile(filepath.Join("testdata", "nagios", "objects.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "objects.cfg"), string(objects), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), ngWait)
	defer cancel()
	out, err := exec.CommandContext(ctx, ngNagiosBin, "-v", n.cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Total Errors:   0") {
		t.Fatalf("nagios4 -v %s: %v\n%s", n.cfg, err, out)
	}
	n.out, err = os.Create(filepath.Join(dir, "nagios.out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.stop()
		n.out.Close()
		if t.Failed() {
			t.Logf("nagios.log (last 3000 bytes):\n%s", ngTail(readFile(t, n.logPath), 3000))
			t.Logf("nagios output (last 2000 bytes):\n%s", ngTail(readFile(t, n.out.Name()), 2000))
		}
	})
	return n
}

func ngTail(s string, n int) string { return s[max(0, len(s)-n):] }

// start runs `nagios4 CFG` in the foreground and waits until its command
// file worker has the FIFO open.
func (n *ngNagios) start() {
	t := n.t
	t.Helper()
	cmd := exec.Command(ngNagiosBin, n.cfg)
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = n.out, n.out
	p := mustStart(t, "nagios4", cmd)
	n.p = p
	n.starts++
	ready := func() bool {
		var st syscall.Stat_t
		if syscall.Stat(n.fifo, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
			return false
		}
		return strings.Count(readFile(t, n.logPath), "Successfully launched command file worker") >= n.starts
	}
	if !waitFor(ngWait, func() bool { return ready() || p.hasExited() }) || p.hasExited() {
		t.Fatalf("Nagios did not become ready (FIFO %s and its command file worker) within %v (exited: %v)\n%s", n.fifo, ngWait, p.state, ngTail(readFile(t, n.logPath), 2000))
	}
	n.children = append(n.children, childPIDs(p.cmd.Process.Pid)...)
}

// stop sends SIGTERM to Nagios by its PID and waits for it; then it ends
// any child it left behind, by PID.
func (n *ngNagios) stop() {
	if n.p == nil {
		return
	}
	if n.p.terminate(ngWait) {
		n.t.Errorf("Nagios did not exit within %v of SIGTERM and was killed", ngWait)
	}
	if !n.p.state.Success() {
		n.t.Errorf("Nagios exited with %v", n.p.state)
	}
	n.p = nil
	for _, c := range waitGone(n.children, 5*time.Second) {
		n.t.Logf("Nagios left its child %d behind; killing it", c)
		syscall.Kill(c, syscall.SIGKILL)
	}
	n.children = nil
}

// logSize is the current length of the log, to read only what follows.
func (n *ngNagios) logSize() int64 {
	st, err := os.Stat(n.logPath)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSince returns the complete log lines after offset.
func (n *ngNagios) logSince(offset int64) []string {
	f, err := os.Open(n.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	f.Seek(offset, io.SeekStart)
	b, _ := io.ReadAll(f)
	return completeLines(string(b))
}

var (
	ngPassiveRe  = regexp.MustCompile(`^\[\d+\] PASSIVE SERVICE CHECK: ([^;]+);([^;]+);(\d+);(.*)$`)
	ngExternalRe = regexp.MustCompile(`^\[\d+\] EXTERNAL COMMAND: PROCESS_SERVICE_CHECK_RESULT;([^;]+);([^;]+);(-?\d+);(.*)$`)
)

// ngProcessed reads what Nagios processed after offset. Nagios 4.4 logs
// one "PASSIVE SERVICE CHECK" line for every passive service result it
// processes, from the FIFO or from the spool, but with the state and output
// the service had before the result (checks.c, service_is_passive). So the
// number of those lines counts the results, and the outputs they show, plus
// the outputs of the FIFO's "EXTERNAL COMMAND" lines and the last output of
// each service in status.dat, name them.
func (n *ngNagios) processed(offset int64) (count int, ids map[string]int) {
	ids = map[string]int{}
	for _, l := range n.logSince(offset) {
		if m := ngPassiveRe.FindStringSubmatch(l); m != nil {
			count++
			if id := relIDRe.FindStringSubmatch(m[4]); id != nil {
				ids[id[1]] |= 1
			}
		} else if m := ngExternalRe.FindStringSubmatch(l); m != nil {
			if id := relIDRe.FindStringSubmatch(m[4]); id != nil {
				ids[id[1]] |= 2
			}
		}
	}
	for _, s := range ngReadStatus(n.status) {
		if s["type"] == "servicestatus" {
			if id := relIDRe.FindStringSubmatch(s["plugin_output"]); id != nil {
				ids[id[1]] |= 4
			}
		}
	}
	return count, ids
}

// externalCount counts the FIFO's commands per id after offset.
func (n *ngNagios) externalCount(offset int64) map[string]int {
	c := map[string]int{}
	for _, l := range n.logSince(offset) {
		if m := ngExternalRe.FindStringSubmatch(l); m != nil {
			if id := relIDRe.FindStringSubmatch(m[4]); id != nil {
				c[id[1]]++
			}
		}
	}
	return c
}

// ngReadStatus parses status.dat into its blocks, each with its "type".
func ngReadStatus(path string) []map[string]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]string
	var cur map[string]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasSuffix(line, " {"):
			cur = map[string]string{"type": strings.TrimSuffix(line, " {")}
		case strings.TrimSpace(line) == "}":
			if cur != nil {
				out = append(out, cur)
			}
			cur = nil
		case cur != nil:
			if k, v, ok := strings.Cut(strings.TrimLeft(line, "\t"), "="); ok {
				cur[k] = v
			}
		}
	}
	return out
}

// ngFind returns the status block of a host (svc "") or service.
func ngFind(blocks []map[string]string, host, svc string) map[string]string {
	for _, b := range blocks {
		switch {
		case svc == "" && b["type"] == "hoststatus" && b["host_name"] == host:
			return b
		case svc != "" && b["type"] == "servicestatus" && b["host_name"] == host && b["service_description"] == svc:
			return b
		}
	}
	return nil
}

// ngTarget spreads checks over the 3 hosts × 10 services.
func ngTarget(_, seq int) (string, string) {
	return ngHosts[seq%3], fmt.Sprintf("svc-%02d", (seq/3)%10)
}

// ngCheckAll waits until Nagios has processed want results after offset,
// then a moment longer, and checks that it processed each sent id exactly
// once: as many PASSIVE SERVICE CHECK lines as ids sent, every id seen, no
// id twice in the FIFO's commands.
func (n *ngNagios) checkAll(offset int64, sent []string) {
	t := n.t
	t.Helper()
	count := 0
	waitFor(ngWait, func() bool { count, _ = n.processed(offset); return count >= len(sent) })
	time.Sleep(1500 * time.Millisecond) // a result processed twice would show now
	count, ids := n.processed(offset)
	if count != len(sent) {
		t.Errorf("Nagios logged %d passive service results, want %d (one per check sent)", count, len(sent))
	}
	var missing []string
	for _, id := range sent {
		if ids[id] == 0 {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Errorf("%d of %d checks sent are not among those Nagios processed, e.g. %v", len(missing), len(sent), missing[:min(len(missing), 10)])
	}
	sentSet := map[string]bool{}
	for _, id := range sent {
		sentSet[id] = true
	}
	for id, c := range n.externalCount(offset) {
		if c > 1 {
			t.Errorf("%s reached Nagios through the FIFO %d times", id, c)
		}
		if !sentSet[id] {
			t.Errorf("Nagios processed %s, which was not sent in full", id)
		}
	}
}

// ngBatch sends conns connections of per checks each, concurrency at a
// time, and returns the ids sent.
func ngBatch(t *testing.T, port int, prefix string, conns, per, concurrency int) []string {
	t.Helper()
	s := &relStream{port: port, prefix: prefix, perConn: per, fill: "batch", target: ngTarget}
	return relParallel(t, conns, concurrency, "connection", func(c int) ([]string, error) { return s.conn(c, c*per) })
}

// TestNagios: nsca_fast delivers to a real Nagios Core 4 through its
// command FIFO and its check_result_path spool.
func TestNagios(t *testing.T) {
	n := ngSetup(t)
	n.start()
	metrics := relMetricsAddr(t)
	d := startDaemon(t, relCfg(Config{
		"command_file":      n.fifo,
		"aggregate_writes":  "1",
		"check_result_path": n.spool,
		"metrics_address":   metrics,
	}))

	t.Run("status", func(t *testing.T) {
		// (a) Service and host results with multi-line output and a
		// backslash, through the FIFO and through the spool, as status.dat
		// shows them. A second daemon writes only to the spool.
		n.t = t
		spoolOnly := startDaemon(t, relCfg(Config{"check_result_path": n.spool}))
		cl := Client{Password: relPassword, Method: 1}
		offset := n.logSize()
		cl.send(t, d.Port, "host-a\tsvc-00\t2\tCRITICAL - disk full\nsecond line with a \\ backslash\nthird line|used=99%\x17"+
			"host-b\t1\tDOWN - no route\nhost detail \\ here\x17"+
			"host-c\tsvc-01\t1\tWARNING - load 5\x17"+
			"host-a\tsvc-02\t3\tUNKNOWN - plugin timed out\x17", 4)
		cl.send(t, spoolOnly.Port, "host-b\tsvc-03\t2\tCRITICAL via spool\nspool \\ line 2\x17"+
			"host-c\t1\tDOWN via spool\nspool host \\ detail\x17", 2)
		type want struct {
			host, svc, state, output, long, perf string
		}
		wants := []want{
			{"host-a", "svc-00", "2", "CRITICAL - disk full", `second line with a \\ backslash\nthird line`, "used=99%"},
			{"host-b", "", "1", "DOWN - no route", `host detail \\ here`, ""},
			{"host-c", "svc-01", "1", "WARNING - load 5", "", ""},
			{"host-a", "svc-02", "3", "UNKNOWN - plugin timed out", "", ""},
			{"host-b", "svc-03", "2", "CRITICAL via spool", `spool \\ line 2`, ""},
			{"host-c", "", "1", "DOWN via spool", `spool host \\ detail`, ""},
		}
		var diffs []string
		ok := waitFor(ngWait, func() bool {
			blocks := ngReadStatus(n.status)
			diffs = nil
			for _, w := range wants {
				b := ngFind(blocks, w.host, w.svc)
				got := want{w.host, w.svc, b["current_state"], b["plugin_output"], b["long_plugin_output"], b["performance_data"]}
				if b == nil || got != w {
					diffs = append(diffs, fmt.Sprintf("%s/%s: got state=%q output=%q long=%q perf=%q, want state=%q output=%q long=%q perf=%q",
						w.host, w.svc, got.state, got.output, got.long, got.perf, w.state, w.output, w.long, w.perf))
				}
			}
			return len(diffs) == 0
		})
		if !ok {
			t.Errorf("status.dat does not show the results within %v:\n%s", ngWait, strings.Join(diffs, "\n"))
		}
		// The command line Nagios read from the FIFO is stock's, escaped.
		line := `EXTERNAL COMMAND: PROCESS_SERVICE_CHECK_RESULT;host-a;svc-00;2;CRITICAL - disk full\nsecond line with a \\ backslash\nthird line|used=99%`
		if !strings.Contains(strings.Join(n.logSince(offset), "\n"), line) {
			t.Errorf("nagios.log has no line %q", line)
		}
	})

	t.Run("batch", func(t *testing.T) {
		// (b) 3000 checks from 300 connections, 12 at a time: Nagios processes
		// every one exactly once.
		n.t = t
		offset := n.logSize()
		began := time.Now()
		sent := ngBatch(t, d.Port, "b", 300, 10, 12)
		n.checkAll(offset, sent)
		t.Logf("%d checks processed by Nagios in %v", len(sent), time.Since(began).Round(time.Millisecond))
	})

	t.Run("restart", func(t *testing.T) {
		// (c) Nagios restarts in the middle of a stream of checks: while it is
		// down the FIFO has no reader and results go to its spool; once it is
		// back it takes them from there and the FIFO again. Every check sent
		// is processed once.
		//
		// The stream pauses (no connection in flight) around the SIGTERM
		// until Nagios has exited: lines Nagios' command file worker has read
		// from the FIFO but the core had not processed when it was told to
		// stop are lost inside Nagios, whoever wrote them. It goes on while
		// Nagios is down and while it starts again.
		n.t = t
		offset := n.logSize()
		s := relNewStream(d.Port, "r", 5, 0, 40*time.Millisecond)
		s.fill = "restart"
		s.target = ngTarget
		s.Start(4)
		time.Sleep(1500 * time.Millisecond)
		s.Pause()
		upTo := s.Sent()
		if !waitFor(ngWait, func() bool { c, _ := n.processed(offset); return c >= upTo }) {
			c, _ := n.processed(offset)
			t.Fatalf("Nagios processed %d of the %d checks sent before the restart within %v", c, upTo, ngWait)
		}
		n.stop()
		downAt := time.Now()
		s.Resume()
		spooled := 0
		waitFor(ngWait, func() bool {
			_, spooled = relSpoolIDs(t, n.spool)
			return spooled > 0 && time.Since(downAt) >= 2*time.Second
		})
		if spooled == 0 {
			t.Errorf("nothing reached the spool while Nagios was down (%s)", s.summary())
		}
		sentWhileDown := s.Sent() - upTo
		n.start()
		time.Sleep(2 * time.Second)
		sent := s.Stop()
		t.Logf("%d checks before the restart, %d while Nagios was down (%d spool files then), %d in all (%s)", upTo, sentWhileDown, spooled, len(sent), s.summary())
		n.checkAll(offset, sent)
		m, err := relScrape(metrics)
		if err != nil {
			t.Fatal(err)
		}
		if m[`nsca_results_emitted_total{sink="spool"}`] == 0 || m[`nsca_results_emitted_total{sink="fifo"}`] == 0 {
			t.Errorf("want results through both the FIFO and the spool: emitted fifo=%v spool=%v", m[`nsca_results_emitted_total{sink="fifo"}`], m[`nsca_results_emitted_total{sink="spool"}`])
		}
	})

	n.t = t
	m, err := relScrape(metrics)
	if err != nil {
		t.Fatal(err)
	}
	var dropped []string
	for k, v := range m {
		if strings.HasPrefix(k, "nsca_results_dropped_total") && v != 0 {
			dropped = append(dropped, fmt.Sprintf("%s=%v", k, v))
		}
	}
	if len(dropped) > 0 {
		t.Errorf("nsca_fast dropped results: %v", dropped)
	}
	d.Stop()
	relParseDrained(t, d.Stderr())
}
