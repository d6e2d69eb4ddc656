package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// `nsca-bench report --results FILE [--floor FILE]` prints the table of a
// bench.sh run: one JSON result per line, labelled with --workload (an id,
// a colon and a description) and --daemon ("nsca_fast", "stock ..."), and
// the output of the libmcrypt floor benchmark.
func reportMain(args []string) int {
	fs := flag.NewFlagSet("nsca-bench report", flag.ContinueOnError)
	results := fs.String("results", "", "JSON lines written by nsca-bench --json")
	floorFile := fs.String("floor", "", "output of go test -bench BenchmarkDecryptFrom ./cgo/mcrypt")
	engines := fs.Bool("engines", false, "print the side by side of the decryption engines (bench-engines.sh side) instead")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rs, err := readResults(*results)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca-bench report: %v\n", err)
		return 1
	}
	floor := map[string]float64{}
	if *floorFile != "" {
		if floor, err = readFloor(*floorFile); err != nil {
			fmt.Fprintf(os.Stderr, "nsca-bench report: %v\n", err)
			return 1
		}
	}
	if *engines {
		printEngineSide(os.Stdout, rs, floor)
		return 0
	}
	printReport(os.Stdout, rs, floor)
	return 0
}

// better reports whether a is a better run than b of the same workload and
// daemon: less server CPU per check (other processes on the machine only
// ever add to it), or more throughput when CPU was not measured.
func better(a, b *Result) bool {
	if a.CPUUsPerCheck > 0 && b.CPUUsPerCheck > 0 {
		return a.CPUUsPerCheck < b.CPUUsPerCheck
	}
	return a.ChecksPerSec > b.ChecksPerSec
}

// bestRuns keeps one run per workload and daemon, in order of appearance,
// and counts the runs each was chosen from.
func bestRuns(all []*Result) ([]*Result, map[*Result]int) {
	type key struct{ w, d string }
	idx := map[key]int{}
	var out []*Result
	n := map[*Result]int{}
	count := map[key]int{}
	for _, r := range all {
		k := key{r.Workload, r.Daemon}
		count[k]++
		i, ok := idx[k]
		if !ok {
			idx[k] = len(out)
			out = append(out, r)
			continue
		}
		if better(r, out[i]) {
			out[i] = r
		}
	}
	for _, r := range out {
		n[r] = count[key{r.Workload, r.Daemon}]
	}
	return out, n
}

func readResults(path string) ([]*Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*Result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		r := new(Result)
		if err := json.Unmarshal(sc.Bytes(), r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

var (
	benchLine = regexp.MustCompile(`^BenchmarkDecryptFrom/([a-z0-9-]+?)(?:-\d+)?\s+\d+\s+([0-9.]+) ns/op`)
	floorLine = regexp.MustCompile(`^FloorCPU/([a-z0-9-]+)\s+\d+\s+([0-9.]+) ns/op`)
	// engineLine is stages/cipher's BenchmarkDecrypt of a 4304-byte packet.
	engineLine = regexp.MustCompile(`^BenchmarkDecrypt/(\d+)-[a-z0-9-]+/4304/(libmcrypt|native)(?:-\d+)?\s.*\s([0-9.]+) cpu-ns/op`)
)

// readFloor returns libmcrypt's ns per 4304-byte packet by algorithm: the
// wall time of go test's BenchmarkDecryptFrom under the algorithm's name,
// the CPU time of `nsca-bench floor` under "cpu:" and the name, and the
// CPU time of stages/cipher's BenchmarkDecrypt under "engine:METHOD:ENGINE".
func readFloor(path string) (map[string]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		// Repeated measurements: other load only adds, keep the lowest.
		keep := func(k string, v string) {
			ns, _ := strconv.ParseFloat(v, 64)
			if old, ok := out[k]; !ok || ns < old {
				out[k] = ns
			}
		}
		if m := benchLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			keep(m[1], m[2])
		}
		if m := floorLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			keep("cpu:"+m[1], m[2])
		}
		if m := engineLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			keep("engine:"+m[1]+":"+m[2], m[3])
		}
	}
	return out, nil
}

func workloadID(r *Result) string {
	id, _, _ := strings.Cut(r.Workload, ":")
	return strings.TrimSpace(id)
}

func isStock(r *Result) bool { return strings.HasPrefix(r.Daemon, "stock") }

// find returns the result of workload id for daemon, or nil.
func find(rs []*Result, id, daemon string) *Result {
	for _, r := range rs {
		if workloadID(r) == id && r.Daemon == daemon {
			return r
		}
	}
	return nil
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3gx", a/b)
}

// printReport prints bench.sh's tables: every workload and daemon, every
// run, the libmcrypt floor, the targets of nsca_fast against stock and the
// side by side of the daemons.
func printReport(w io.Writer, all []*Result, floor map[string]float64) {
	rs, runs := bestRuns(all)
	printResults(w, rs)
	fmt.Fprintln(w)
	printDetails(w, all, runs)
	if len(floor) > 0 {
		fmt.Fprintln(w)
		printFloor(w, rs, floor)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Targets of issue 5 (nsca_fast with nsca_workers=0)")
	for _, t := range evaluateAgainstStock(rs, floor) {
		fmt.Fprintln(w, t)
	}
	fmt.Fprintln(w)
	printDaemonSide(w, rs, floor)
}

// printResults prints the table of the best runs, a line per workload and
// daemon in order of appearance, and nsca_fast's ratios to each stock mode.
func printResults(w io.Writer, rs []*Result) {
	var order []string
	seen := map[string]bool{}
	for _, r := range rs {
		if !seen[r.Workload] {
			seen[r.Workload] = true
			order = append(order, r.Workload)
		}
	}
	fmt.Fprintln(w, "== Results: checks/s from the first send to the last line read; server CPU = utime+stime(+reaped children)")
	fmt.Fprintln(w, "   of the daemon's process tree per delivered check; latency = last byte written to line read from the FIFO;")
	fmt.Fprintln(w, "   RSS = highest 100 ms sample of the summed VmRSS of the tree. Ratio rows: nsca_fast / that stock mode.")
	fmt.Fprintln(w, "   Of repeated runs, the one with the least server CPU per check is shown (all runs: Details).")
	fmt.Fprintln(w, "   busy/other: cores of the machine busy during the run / of those, neither the daemon nor nsca-bench")
	fmt.Fprintln(w, "   (softirq, and whatever else ran on the machine).")
	fmt.Fprintf(w, resultRow, "workload", "daemon", "checks/s", "CPU µs/chk", "p50 ms", "p99 ms", "RSS MB", "delivered/sent", "busy/other")
	fmt.Fprintln(w, strings.Repeat("-", 143))
	for _, wl := range order {
		printWorkload(w, rs, wl)
	}
}

const resultRow = "%-47s %-16s %10s %10s %9s %9s %8s %15s %10s\n"

// printWorkload prints the runs of workload wl, the workload named on the
// first, then nsca_fast's ratio to each stock mode.
func printWorkload(w io.Writer, rs []*Result, wl string) {
	var fast *Result
	var stocks []*Result
	first := true
	for _, r := range rs {
		if r.Workload != wl {
			continue
		}
		label := ""
		if first {
			label = wl
			first = false
		}
		fmt.Fprintf(w, resultRow, label, r.Daemon, fmt.Sprintf("%.1f", r.ChecksPerSec), fmt.Sprintf("%.2f", r.CPUUsPerCheck),
			fmt.Sprintf("%.3f", r.LatencyP50Ms), fmt.Sprintf("%.3f", r.LatencyP99Ms), fmt.Sprintf("%.1f", mb(r.RSSPeakKB)),
			fmt.Sprintf("%d/%d", r.Delivered, r.Sent), fmt.Sprintf("%.2f/%.2f", r.MachineBusyCores, r.OtherCores))
		if isStock(r) {
			stocks = append(stocks, r)
		} else if r.Daemon == "nsca_fast" {
			fast = r
		}
	}
	if fast == nil {
		return
	}
	for _, s := range stocks {
		fmt.Fprintf(w, resultRow, "", "ratio vs "+strings.TrimPrefix(s.Daemon, "stock "),
			ratio(fast.ChecksPerSec, s.ChecksPerSec), ratio(fast.CPUUsPerCheck, s.CPUUsPerCheck),
			ratio(fast.LatencyP50Ms, s.LatencyP50Ms), ratio(fast.LatencyP99Ms, s.LatencyP99Ms),
			ratio(float64(fast.RSSPeakKB), float64(s.RSSPeakKB)), "", "")
	}
}

// printDetails prints every run, marking those the tables show, with a
// note for a run whose FIFO reader fell behind or that lost checks.
func printDetails(w io.Writer, all []*Result, runs map[*Result]int) {
	fmt.Fprintln(w, "== Details: every run; * marks the run shown in the table")
	for _, r := range all {
		mark := " "
		if runs[r] > 0 {
			mark = "*"
		}
		extra := ""
		if r.Idle > 0 {
			extra += fmt.Sprintf(" idle conns: %d asked, %d opened, %d still open at the end; RSS with them before the load %.1f MB;", r.Idle, r.IdleOpened, r.IdleOpenAtEnd, mb(r.RSSIdleKB))
		}
		if r.Rate > 0 {
			extra += fmt.Sprintf(" paced at %.0f checks/s;", r.Rate)
		}
		fmt.Fprintf(w, "%s%-5s %-16s %.0f checks/s, %.2f µs CPU/check, busy/other %.2f/%.2f cores, conns %d, %.1f conn/s, %.2f µs CPU/conn, p99 %.3f ms, max %.3f ms, RSS before %.1f / 1 s in %.1f / end %.1f / peak %.1f MB, up to %d procs, generator %.1f µs CPU/check, other processes %.2f cores, loadavg %.2f;%s\n",
			mark, workloadID(r), r.Daemon, r.ChecksPerSec, r.CPUUsPerCheck, r.MachineBusyCores, r.OtherCores, r.Connections, float64(r.Connections)/max(r.ElapsedSeconds, 1e-9), r.CPUUsPerConn,
			r.LatencyP99Ms, r.LatencyMaxMs, mb(r.RSSBeforeKB), mb(r.RSSFirstKB), mb(r.RSSLastKB), mb(r.RSSPeakKB), r.ServerMaxProcs,
			r.ClientCPUUsPerCheck, r.OtherProcsCores, r.LoadAvg, extra)
		if r.SinkFullReads > 0 {
			fmt.Fprintf(w, "         NOTE: %d reads found the FIFO full: nsca-bench, as the core, fell behind (the daemon waits up to 1 s, then writes to alternate_dump_file)\n", r.SinkFullReads)
		}
		if r.Delivered < r.Sent || r.Mismatched+r.Unknown+r.Duplicates > 0 || r.DialErrors+r.Failed > 0 {
			fmt.Fprintf(w, "         WARNING: sent %d, delivered %d, dial errors %d, failed writes %d, duplicates %d, wrong lines %d %q\n",
				r.Sent, r.Delivered, r.DialErrors, r.Failed, r.Duplicates, r.Mismatched+r.Unknown, r.FirstBad)
		}
	}
}

// printFloor prints nsca_fast's CPU per check of each libmcrypt workload
// against libmcrypt's own cost per packet.
func printFloor(w io.Writer, rs []*Result, floor map[string]float64) {
	fmt.Fprintln(w, "== libmcrypt floor: one 4304-byte packet through mcrypt DecryptFrom. \"go test\" is BenchmarkDecryptFrom's")
	fmt.Fprintln(w, "   ns/op (wall time, inflated when other processes share the cores); \"CPU\" is the same call timed with")
	fmt.Fprintln(w, "   getrusage(RUSAGE_THREAD) by `nsca-bench floor`, the unit of the server's CPU per check. Lowest of repeats.")
	const frow = "%-10s %-14s %14s %12s %18s %14s %12s\n"
	fmt.Fprintf(w, frow, "workload", "algorithm", "go test µs", "CPU µs", "nsca_fast µs/chk", "÷ go test", "÷ CPU")
	for _, r := range rs {
		if r.Daemon != "nsca_fast" || r.Algorithm == "" {
			continue
		}
		f, c := floor[r.Algorithm], floor["cpu:"+r.Algorithm]
		if f == 0 && c == 0 {
			continue
		}
		div := func(x float64) string {
			if x == 0 {
				return "-"
			}
			return fmt.Sprintf("%.3f", r.CPUUsPerCheck/(x/1e3))
		}
		fmt.Fprintf(w, frow, workloadID(r), r.Algorithm, fmt.Sprintf("%.1f", f/1e3), fmt.Sprintf("%.1f", c/1e3),
			fmt.Sprintf("%.1f", r.CPUUsPerCheck), div(f), div(c))
	}
}

func verdict(ok bool) string {
	if ok {
		return "MET   "
	}
	return "MISSED"
}

// evaluateAgainstStock checks nsca_fast's own targets (issue 5's): CPU per
// check and per connection, throughput against stock, libmcrypt methods
// against libmcrypt alone, latency, idle connections and overload memory.
func evaluateAgainstStock(rs []*Result, floor map[string]float64) []string {
	var out []string
	add := func(ok bool, format string, args ...any) {
		out = append(out, verdict(ok)+" "+fmt.Sprintf(format, args...))
	}
	missing := func(what string) { out = append(out, "n/a    "+what+": not measured in this run") }

	if a := find(rs, "a", "nsca_fast"); a != nil {
		add(a.CPUUsPerCheck <= 12, "XOR, 20 checks/conn, 8 clients: %.2f µs server CPU per check (target ≤ 12 µs; %+.0f%%)", a.CPUUsPerCheck, 100*(a.CPUUsPerCheck/12-1))
	} else {
		missing("XOR 20 checks/conn")
	}
	if b := find(rs, "b", "nsca_fast"); b != nil {
		add(b.CPUUsPerConn <= 40, "XOR, one check per connection: %.2f µs server CPU per connection (target ≤ 40 µs; %+.0f%%)", b.CPUUsPerConn, 100*(b.CPUUsPerConn/40-1))
		for _, r := range rs {
			if workloadID(r) == "b" && isStock(r) && r.ChecksPerSec > 0 {
				x := b.ChecksPerSec / r.ChecksPerSec
				add(x >= 100, "XOR, one check per connection: %.1fx the throughput of %s (%.0f vs %.0f checks/s; target ≥ 100x)", x, r.Daemon, b.ChecksPerSec, r.ChecksPerSec)
			}
		}
	} else {
		missing("XOR one check per connection")
	}
	for _, id := range []string{"c3", "c8", "c14"} {
		c := find(rs, id, "nsca_fast")
		if c == nil {
			missing(id)
			continue
		}
		f, kind := floor["cpu:"+c.Algorithm], "CPU time (nsca-bench floor)"
		if f == 0 {
			f, kind = floor[c.Algorithm], "go test ns/op"
		}
		if f == 0 {
			missing(id + " floor")
			continue
		}
		x := c.CPUUsPerCheck / (f / 1e3)
		add(x <= 1.1, "method %d (%s): %.1f µs server CPU per check = %.3fx libmcrypt's %.1f µs, %s (target ≤ 1.1x)", c.Method, c.Algorithm, c.CPUUsPerCheck, x, f/1e3, kind)
	}
	if f := find(rs, "f", "nsca_fast"); f != nil {
		add(f.LatencyP99Ms < 5 && f.Delivered == f.Sent, "latency at half the max XOR throughput (%.0f checks/s offered, %.0f achieved): p99 %.3f ms (target < 5 ms)", f.Rate, f.ChecksPerSec, f.LatencyP99Ms)
	} else {
		missing("latency at half throughput")
	}
	if e := find(rs, "e", "nsca_fast"); e != nil {
		add(e.RSSPeakKB < 150*1024 && e.IdleOpenAtEnd >= 10000, "10,000 idle connections: peak RSS %.1f MB for the process tree, %d idle connections still open at the end (target < 150 MB)", mb(e.RSSPeakKB), e.IdleOpenAtEnd)
		add(e.LatencyP99Ms < 50 && e.Delivered == e.Sent, "10,000 idle connections: other clients served, %d/%d delivered, p99 %.3f ms (target < 50 ms)", e.Delivered, e.Sent, e.LatencyP99Ms)
	} else {
		missing("10,000 idle connections")
	}
	if g := find(rs, "g", "nsca_fast"); g != nil {
		growth := float64(g.RSSLastKB) / max(float64(g.RSSFirstKB), 1)
		add(growth < 1.25 && g.RSSPeakKB < 2*max(g.RSSFirstKB, 1), "overload: RSS 1 s in %.1f MB, at the end %.1f MB (%+.0f%%), peak %.1f MB (target: flat; here: end within +25%% of the start, peak < 2x)", mb(g.RSSFirstKB), mb(g.RSSLastKB), 100*(growth-1), mb(g.RSSPeakKB))
	} else {
		missing("overload")
	}
	return out
}
