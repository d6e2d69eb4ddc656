package tests

// What an operator reads and graphs (issue 25 items 5 and 6): every
// metric at zero from a fresh start, the shipped Grafana dashboard and
// Prometheus rules querying only metrics that exist, /healthz and /readyz,
// a bounded log under a fleet of misconfigured clients with its summary
// line, a reload line that says what changed, and journal lines without
// glog's header.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// opsRepo is the repository's root, where conf/grafana and conf/prometheus are.
func opsRepo(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// opsMetricsAddr is a free loopback address for metrics_address.
func opsMetricsAddr(t *testing.T) string {
	return "127.0.0.1:" + strconv.Itoa(freePort(t))
}

// opsGet fetches path from the metrics listener: status and body.
func opsGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	cl := http.Client{Timeout: 3 * time.Second}
	resp, err := cl.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// opsScrape waits for the metrics listener and returns its first scrape.
func opsScrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	var m map[string]float64
	var err error
	if !waitFor(5*time.Second, func() bool { m, err = relScrape(addr); return err == nil }) {
		t.Fatalf("no /metrics on %s: %v", addr, err)
	}
	return m
}

// opsLocalCfg writes to a FIFO with a reader (so every sink is writable)
// and falls back to a dump file.
func opsLocalCfg(t *testing.T, metrics string) Config {
	dir := t.TempDir()
	fifo := makeFIFO(t, dir)
	r := openFIFOReader(t, fifo)
	t.Cleanup(r.Close)
	return Config{"command_file": fifo, "alternate_dump_file": filepath.Join(dir, "dump"),
		"password": lcPassword, "decryption_method": "1", "metrics_address": metrics}
}

// opsZeroSeries are the series a fresh daemon writing to a FIFO with a dump
// file behind it shows, each at zero.
var opsZeroSeries = []string{
	"nsca_connections_total", "nsca_connections_open", "nsca_connections_refused_total",
	"nsca_connections_incomplete_total", "nsca_health_checks_total", "nsca_read_bytes_total",
	`nsca_stage_items_total{stage="accept"}`, `nsca_stage_items_total{stage="emit"}`,
	"nsca_results_queued", "nsca_results_held", "nsca_dialect_lossy_total",
	`nsca_results_emitted_total{sink="fifo"}`, `nsca_results_emitted_total{sink="dump_file"}`,
	`nsca_results_dropped_total{reason="bad_crc"}`, `nsca_results_dropped_total{reason="bad_version"}`,
	`nsca_results_dropped_total{reason="stale"}`, `nsca_results_dropped_total{reason="short_packet"}`,
	`nsca_results_dropped_total{reason="after_reject"}`, `nsca_results_dropped_total{reason="too_many_checks"}`,
	`nsca_results_dropped_total{reason="spoofed_host"}`, `nsca_results_dropped_total{reason="sink_failed"}`,
	`nsca_results_dropped_total{reason="shutdown"}`,
	`nsca_sink_errors_total{sink="fifo"}`, `nsca_sink_errors_total{sink="dump_file"}`,
	`nsca_sink_fallbacks_total{sink="fifo"}`, `nsca_sink_fallbacks_total{sink="local"}`,
	`nsca_sink_down{sink="fifo"}`, `nsca_sink_down{sink="dump_file"}`,
	`nsca_queue_depth{queue="accept_to_read"}`, `nsca_queue_depth{queue="read_to_decrypt"}`,
	`nsca_queue_depth{queue="decrypt_to_validate"}`, `nsca_queue_depth{queue="validate_to_emit"}`,
	`nsca_queue_depth{queue="destination_local"}`,
	`nsca_decrypt_seconds_total{method="xor"}`,
	`nsca_result_latency_seconds_bucket{le="0.001"}`, `nsca_result_latency_seconds_bucket{le="+Inf"}`,
	"nsca_result_latency_seconds_sum", "nsca_result_latency_seconds_count",
	"nsca_reloads_total", "nsca_reload_failures_total",
}

// TestOpsFreshScrapeZero: a fresh start's scrape, in one process and with
// two workers, has every series at zero (a first rate() sees the first
// event), build info, a start time, a successful last load, process
// metrics, and no nsca_packets_total (it duplicated the emitted and
// dropped families).
func TestOpsFreshScrapeZero(t *testing.T) {
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			metrics := opsMetricsAddr(t)
			cfg := opsLocalCfg(t, metrics)
			cfg["nsca_workers"] = strconv.Itoa(workers)
			before := float64(time.Now().Unix())
			// Not waiting for the port: the harness's probe would be a
			// connection. The port is bound before metrics are served.
			d := startDaemonWith(t, cfg, daemonOpts{noWait: true})
			m := opsScrape(t, metrics)
			var missing, nonzero []string
			for _, name := range opsZeroSeries {
				v, ok := m[name]
				switch {
				case !ok:
					missing = append(missing, name)
				case v != 0:
					nonzero = append(nonzero, fmt.Sprintf("%s=%v", name, v))
				}
			}
			if len(missing) > 0 || len(nonzero) > 0 {
				t.Errorf("fresh scrape: missing %v, not zero %v", missing, nonzero)
			}
			build := ""
			for k, v := range m {
				if strings.HasPrefix(k, "nsca_build_info{") && v == 1 {
					build = k
				}
				if strings.HasPrefix(k, "nsca_packets_total") {
					t.Errorf("%s still served; it duplicates nsca_results_emitted_total and nsca_results_dropped_total", k)
				}
			}
			if !regexp.MustCompile(`^nsca_build_info\{version="[^"]+",goversion="go[^"]+",revision="[^"]*"\}$`).MatchString(build) {
				t.Errorf("no nsca_build_info{version,goversion,revision} 1 (got %q)", build)
			}
			if start := m["process_start_time_seconds"]; start < before-5 || start > before+30 {
				t.Errorf("process_start_time_seconds %v, the test started it at %v", start, before)
			}
			if m["nsca_last_reload_success"] != 1 || m["nsca_last_reload_timestamp_seconds"] < before-5 {
				t.Errorf("nsca_last_reload_success %v, nsca_last_reload_timestamp_seconds %v: the start is the first successful load",
					m["nsca_last_reload_success"], m["nsca_last_reload_timestamp_seconds"])
			}
			if m["process_resident_memory_bytes"] < 1<<20 || m["process_open_fds"] < 3 || m["nsca_processes"] != float64(1+workers) {
				t.Errorf("process metrics: rss %v, fds %v, processes %v (want %d)", m["process_resident_memory_bytes"], m["process_open_fds"], m["nsca_processes"], 1+workers)
			}
			if _, ok := m["process_cpu_seconds_total"]; !ok {
				t.Errorf("no process_cpu_seconds_total")
			}
			// The first result shows as the series going from 0 to 1.
			lcSendAll(t, d.Port, lcPassword, "first", 1, 1)
			if !waitFor(5*time.Second, func() bool {
				m, _ = relScrape(metrics)
				return m[`nsca_results_emitted_total{sink="fifo"}`] == 1 && m["nsca_result_latency_seconds_count"] == 1
			}) {
				t.Errorf("after one check: emitted{fifo} %v, latency count %v, want 1 and 1", m[`nsca_results_emitted_total{sink="fifo"}`], m["nsca_result_latency_seconds_count"])
			}
			if m[`nsca_result_latency_seconds_bucket{le="+Inf"}`] != 1 || m["nsca_result_latency_seconds_sum"] <= 0 || m["nsca_result_latency_seconds_sum"] > 5 {
				t.Errorf("latency histogram after one check: +Inf %v, sum %v s", m[`nsca_result_latency_seconds_bucket{le="+Inf"}`], m["nsca_result_latency_seconds_sum"])
			}
		})
	}
}

// opsQueriedMetrics are the metric names the shipped dashboard and alert
// rules query (those of nsca_fast: nsca_* and process_*).
func opsQueriedMetrics(t *testing.T) (dashboard, rules []string) {
	t.Helper()
	root := opsRepo(t)
	names := regexp.MustCompile(`\b(?:nsca|process)_[a-z_]+\b`)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "conf/grafana/nsca_fast.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("conf/grafana/nsca_fast.json: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			dashboard = append(dashboard, names.FindAllString(tg.Expr, -1)...)
		}
	}
	b, err = os.ReadFile(filepath.Join(root, "conf/prometheus/nsca_fast.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if expr, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:"); ok {
			rules = append(rules, names.FindAllString(expr, -1)...)
		}
	}
	slices.Sort(dashboard)
	slices.Sort(rules)
	return slices.Compact(dashboard), slices.Compact(rules)
}

// TestOpsDashboardAndRulesMetricsExist: every metric the Grafana dashboard
// and the alert rules query is in a fresh daemon's scrape (with a durable
// queue in front of Icinga 2, so that its series are there too).
func TestOpsDashboardAndRulesMetricsExist(t *testing.T) {
	dashboard, rules := opsQueriedMetrics(t)
	if len(dashboard) < 15 || len(rules) < 6 {
		t.Fatalf("the dashboard queries %d metrics, the rules %d: the files were not read right", len(dashboard), len(rules))
	}
	metrics := opsMetricsAddr(t)
	cfg := opsLocalCfg(t, metrics)
	cfg["icinga2_api_url"] = "https://127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg["icinga2_api_user"], cfg["icinga2_api_password"] = "u", "p"
	cfg["queue_directory"] = t.TempDir()
	startDaemon(t, cfg)
	m := opsScrape(t, metrics)
	families := map[string]bool{}
	for k := range m {
		name, _, _ := strings.Cut(k, "{")
		families[name] = true
	}
	for what, names := range map[string][]string{"conf/grafana/nsca_fast.json": dashboard, "conf/prometheus/nsca_fast.rules.yml": rules} {
		for _, n := range names {
			if !families[n] {
				t.Errorf("%s queries %s, which a fresh daemon does not serve", what, n)
			}
		}
	}
}

// TestOpsPromtoolRules: the shipped alert rules pass promtool check rules.
func TestOpsPromtoolRules(t *testing.T) {
	needTool(t, "/usr/bin/promtool", "prometheus")
	out, err := exec.Command("/usr/bin/promtool", "check", "rules", filepath.Join(opsRepo(t), "conf/prometheus/nsca_fast.rules.yml")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestOpsHealthReady: /healthz answers 200; /readyz answers 200 while
// every sink takes results and 503, naming it, while the command file
// cannot be written (it does not exist: results go to the dump file), and
// 200 again once it took results.
func TestOpsHealthReady(t *testing.T) {
	metrics := opsMetricsAddr(t)
	d := startDaemon(t, opsLocalCfg(t, metrics))
	opsScrape(t, metrics)
	if code, body := opsGet(t, metrics, "/healthz"); code != 200 {
		t.Errorf("/healthz %d %q, want 200", code, body)
	}
	if code, body := opsGet(t, metrics, "/readyz"); code != 200 {
		t.Errorf("/readyz with a FIFO reader %d %q, want 200", code, body)
	}
	d.Stop()

	dir := t.TempDir()
	cmd := filepath.Join(dir, "nagios.cmd") // not there yet
	metrics = opsMetricsAddr(t)
	d = startDaemon(t, Config{"command_file": cmd, "alternate_dump_file": filepath.Join(dir, "dump"),
		"password": lcPassword, "decryption_method": "1", "metrics_address": metrics})
	opsScrape(t, metrics)
	if code, body := opsGet(t, metrics, "/readyz"); code != 503 || !strings.Contains(body, "fifo") {
		t.Errorf("/readyz without the command file %d %q, want 503 naming the fifo sink", code, body)
	}
	if code, _ := opsGet(t, metrics, "/healthz"); code != 200 {
		t.Errorf("/healthz %d while a sink is down, want 200 (the process lives)", code)
	}
	if err := syscall.Mkfifo(cmd, 0o600); err != nil {
		t.Fatal(err)
	}
	r := openFIFOReader(t, cmd)
	defer r.Close()
	var code int
	var body string
	ok := waitFor(20*time.Second, func() bool {
		lcSendAll(t, d.Port, lcPassword, "ready", 1, 1)
		code, body = opsGet(t, metrics, "/readyz")
		return code == 200
	})
	if !ok {
		t.Errorf("/readyz %d %q after the command file appeared and took results, want 200", code, body)
	}
}

// opsSendBad connects from local (a loopback address), waits for the init
// packet and sends one check under the wrong password.
func opsSendBad(port int, local string, seq int) error {
	c, err := dialLocal(port, local, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	rc, err := readInit(c, 10*time.Second)
	if err != nil {
		return err
	}
	if _, err := c.Write(rc.packets("not-"+lcPassword, lcChecks("bad", 0, seq, 1))); err != nil {
		return err
	}
	c.Read(make([]byte, 1)) // until the daemon closes the connection
	return nil
}

// TestOpsWarningFlood: 400 misconfigured clients (each its own loopback
// address) connecting 3 times each log at most the global budget of
// warnings (20 per 10-second window), not 1,200 lines, and the summary
// line counts all 1,200 connections from 400 clients and names those with
// the most.
func TestOpsWarningFlood(t *testing.T) {
	const clients, each = 400, 3
	d := startDaemon(t, merge(lcCfg(commandFile(t, t.TempDir()), nil), Config{"allowed_hosts": "127.0.0.0/8", "max_connections": "2000"}))
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	sem := make(chan struct{}, 32)
	for c := range clients {
		local := fmt.Sprintf("127.0.%d.%d", 1+c/200, 1+c%200)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for i := range each {
				if err := opsSendBad(d.Port, local, i); err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("%s: %v", local, err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(failed) > 0 {
		t.Fatalf("%d connections failed: %v", len(failed), failed[:min(5, len(failed))])
	}
	d.Signal(syscall.SIGTERM)
	d.waitLog(regexp.MustCompile(`stopped: `), 20*time.Second)
	log := d.Stderr()
	peerLines := grepLines(log, regexp.MustCompile(`^W[^\]]*\] closing connection from 127\.0\.`))
	// The diagnosis of each client (one line per source a minute) shares
	// the clients' budget.
	diagLines := grepLines(log, regexp.MustCompile(`^W[^\]]*\] diagnosis: 127\.0\.`))
	windows := 1 + int(elapsed/(10*time.Second))
	if len(peerLines)+len(diagLines) > 20*windows {
		t.Errorf("%d warning lines about the clients (%d of them diagnoses) in %v (%d windows of 10 s), want at most %d",
			len(peerLines)+len(diagLines), len(diagLines), elapsed, windows, 20*windows)
	}
	summaryRe := regexp.MustCompile(`^W.*in the last \d+s: (\d+) connections from (\d+) clients failed decryption; most: (127\.0\.\d+\.\d+ \(\d+\)(, )?)+( \.\.\.)?; (\d+) of these lines were suppressed by the rate limit, the last: closing connection from 127\.0\.`)
	var counted, suppressed int
	for _, line := range grepLines(log, regexp.MustCompile(`failed decryption`)) {
		m := summaryRe.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("summary line not in the expected shape: %s", line)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		s, _ := strconv.Atoi(m[len(m)-1])
		counted, suppressed = counted+n, suppressed+s
		t.Logf("summary: %s", line)
	}
	if counted != clients*each || suppressed != clients*each-len(peerLines) {
		t.Errorf("the summary lines count %d connections (%d suppressed), want %d (%d)", counted, suppressed, clients*each, clients*each-len(peerLines))
	}
	if all := grepLines(log, regexp.MustCompile(`^W`)); len(all) > len(peerLines)+len(diagLines)+windows*3+2 {
		t.Errorf("%d warning lines in all, %d of them about the clients:\n%s", len(all), len(peerLines), strings.Join(all, "\n"))
	}
	t.Logf("%d clients x %d connections in %v: %d warning lines about them", clients, each, elapsed, len(peerLines))
}

// TestOpsReloadLine: a reload logs "configuration reloaded" with the
// options it changed (a password only by name), the pipelines it replaced
// (with workers, the old worker processes, which a reload retires as a
// stop would) say they finished after a reload, and nothing the daemon
// logs until it is stopped reads as a stop ("pipeline drained", "at exit",
// "stopped", "stopping"); reloads are counted, a failed one too; a real
// SIGTERM afterwards still logs the stop's lines.
func TestOpsReloadLine(t *testing.T) {
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			metrics := opsMetricsAddr(t)
			cfg := opsLocalCfg(t, metrics)
			cfg["nsca_workers"] = strconv.Itoa(workers)
			d := startDaemon(t, cfg)
			opsScrape(t, metrics)
			replaced := []int{d.Pid()}
			if workers > 0 {
				replaced = d.waitWorkers(workers, 10*time.Second)
			}
			cfg["password"] = "new-secret"
			cfg["connection_timeout"] = "20"
			d.rewriteConfig(cfg)
			d.Signal(syscall.SIGHUP)
			line := d.waitLog(regexp.MustCompile(`SIGHUP: configuration reloaded`), 20*time.Second)
			if !strings.Contains(line, "(changed password, connection_timeout)") || strings.Contains(line, "new-secret") {
				t.Errorf("reload line %q, want it to name password and connection_timeout (and not show the password)", line)
			}
			finished := regexp.MustCompile(`reload: the previous configuration's pipeline finished its connections`)
			if _, ok := waitLines(d.Stderr, finished, len(replaced), 10*time.Second); !ok {
				t.Errorf("no %q line from each of %v within 10s", finished, replaced)
			}
			serving := replaced
			if workers > 0 {
				serving = d.waitWorkers(workers, 10*time.Second, replaced...)
				gone := regexp.MustCompile(`supervisor: worker \d+ of generation 1 `)
				lines, ok := waitLines(d.Stderr, gone, workers, 10*time.Second)
				if !ok {
					t.Fatalf("the supervisor did not see the %d replaced workers end within 10s", workers)
				}
				for _, l := range lines {
					if !strings.Contains(l, "replaced by a reload") {
						t.Errorf("supervisor line %q about a worker the reload retired, want it to say it was replaced by a reload", l)
					}
				}
			}
			for _, pid := range replaced {
				if !slices.ContainsFunc(opsLinesOf(d.Stderr(), pid), finished.MatchString) {
					t.Errorf("pid %d, replaced by the reload, logged no line matching %q", pid, finished)
				}
			}
			stopLike := regexp.MustCompile(`pipeline drained|at exit|stopped|stopping`)
			if lines := grepLines(d.Stderr(), stopLike); len(lines) > 0 {
				t.Errorf("after a reload, lines that read as a stop:\n%s", strings.Join(lines, "\n"))
			}
			d.rewriteConfig(merge(cfg, Config{"no_such_option": "1"}))
			d.Signal(syscall.SIGHUP)
			d.waitLog(regexp.MustCompile(`SIGHUP: keeping the running configuration`), 20*time.Second)
			m, err := relScrape(metrics)
			if err != nil {
				t.Fatal(err)
			}
			if m["nsca_reloads_total"] != 2 || m["nsca_reload_failures_total"] != 1 || m["nsca_last_reload_success"] != 0 {
				t.Errorf("after a good and a bad reload: reloads %v, failures %v, last success %v; want 2, 1, 0",
					m["nsca_reloads_total"], m["nsca_reload_failures_total"], m["nsca_last_reload_success"])
			}
			d.Stop() // one SIGTERM
			log := d.Stderr()
			for _, pid := range serving {
				if !slices.ContainsFunc(opsLinesOf(log, pid), regexp.MustCompile(`\] pipeline drained: `).MatchString) {
					t.Errorf("pid %d, serving when the daemon was stopped, logged no \"pipeline drained\" line", pid)
				}
			}
			for _, want := range []string{`\] terminated: stopping`, `\] stopped: `} {
				if !slices.ContainsFunc(opsLinesOf(log, d.Pid()), regexp.MustCompile(want).MatchString) {
					t.Errorf("the stopped daemon (pid %d) logged no line matching %q", d.Pid(), want)
				}
			}
		})
	}
}

// opsLinesOf is the lines of a glog log written by process pid.
func opsLinesOf(log string, pid int) []string {
	re := regexp.MustCompile(`^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +` + strconv.Itoa(pid) + ` `)
	return grepLines(log, re)
}

// TestOpsJournalNoGlogHeader: under systemd (standard error is the journal
// stream JOURNAL_STREAM names) each line is "<level>text", the journal's
// own header the only one; a warning keeps its level.
func TestOpsJournalNoGlogHeader(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	stderrPath := filepath.Join(dir, fmt.Sprintf("nsca-%d.stderr", port))
	f, err := os.Create(stderrPath)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	f.Close()
	journal := fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino)
	cfg := lcCfg(filepath.Join(dir, "missing", "nagios.cmd"), Config{"alternate_dump_file": filepath.Join(dir, "dump"), "nsca_workers": "1"})
	d := startDaemonWith(t, cfg, daemonOpts{dir: dir, port: port, env: []string{journal}})
	lcSendBad(t, d.Port, 1, "bad")
	d.waitLog(regexp.MustCompile(`^<4>closing connection from 127\.0\.0\.1`), 10*time.Second)
	d.Stop()
	lines := completeLines(d.Stderr())
	glogHeader := regexp.MustCompile(`^<\d>[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6}|^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6}`)
	for _, l := range lines {
		if !regexp.MustCompile(`^<[2-6]>`).MatchString(l) || glogHeader.MatchString(l) {
			t.Errorf("journal line %q: want <level>text without glog's header", l)
		}
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "<6>stopped: ") }) {
		t.Errorf("no \"<6>stopped: \" line: the last lines must reach the journal before the exit:\n%s", strings.Join(lines, "\n"))
	}
}

// TestOpsJournalWorkerOutlivesSupervisor: workers write to the journal
// stream themselves, so the lines of a worker whose supervisor was killed
// (it drains and says so) still reach the journal, in the same shape.
func TestOpsJournalWorkerOutlivesSupervisor(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("nsca-%d.stderr", port)))
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cfg := lcCfg(commandFile(t, dir), Config{"nsca_workers": "1"})
	d := launchDaemon(t, cfg, daemonOpts{dir: dir, port: port, env: []string{fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino)}})
	kids, ok := waitChildren(d.Pid(), 1, 10*time.Second)
	if !ok {
		d.p.terminate(5 * time.Second)
		t.Fatalf("no worker: %v", kids)
	}
	killAtEnd(t, "worker", func() []int { return kids })
	syscall.Kill(d.Pid(), syscall.SIGKILL)
	d.p.terminate(5 * time.Second) // reaps it
	d.waitLog(regexp.MustCompile(`^<3>worker 0: the supervisor is gone; draining$`), 10*time.Second)
	if left := waitGone(kids, 20*time.Second); len(left) > 0 {
		t.Errorf("worker %v still running", left)
	}
	d.waitLog(regexp.MustCompile(`^<6>pipeline drained: `), 5*time.Second)
}
