package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The daemons of scripts/bench-table.sh, as its runs label them (--daemon),
// in the order of the table's columns.
const (
	tOurs   = "ours"
	tOursW2 = "ours w2"
	tCpp    = "C++"
	tStock  = "stock"
	tNG     = "nsca-ng-server"
	tNRDP   = "NRDP (PHP)"
	tFloor  = "floor_server"
)

// cipherKey is readFloor's key of the native 3DES engine's CPU ns per
// 4304-byte packet, the cipher cost in the 3DES target.
const cipherKey = "engine:3:native"

var tableDaemons = []string{tOurs, tOursW2, tCpp, tStock, tNG, tNRDP, tFloor}

// The workloads' ids (what --workload has before its colon) that the
// targets name.
const (
	wXOR20  = "x20"   // XOR, 20 checks per connection, paced
	wXOR1   = "x1"    // XOR, 1 check per connection, paced
	wXOR1At = "x1s"   // XOR, 1 check per connection, at the 3DES row's rate
	w3DES   = "d3"    // native 3DES, 1 check per connection, paced
	wBurst  = "burst" // 10,000 connections within a second
	wNGA    = "ng-a"  // nsca-ng, long sessions
	wNGB    = "ng-b"  // nsca-ng, a session per result
)

// `nsca-bench table --results FILE [--floor FILE]` prints bench-table.sh's
// table: a row per workload (in order of appearance), a column per daemon,
// each cell the least server CPU per delivered result of its runs and that
// run's results/s (latencies for the burst); the results lost over all
// runs; ours against floor_server or the other implementation; then the
// targets of issue 36, each met or missed. --floor is stages/cipher's
// BenchmarkDecrypt output, for the 3DES target's cipher cost.
func tableMain(args []string) int {
	fs := flag.NewFlagSet("nsca-bench table", flag.ContinueOnError)
	results := fs.String("results", "", "JSON lines written by nsca-bench --json")
	floorFile := fs.String("floor", "", "output of go test -bench BenchmarkDecrypt ./stages/cipher")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rs, err := readResults(*results)
	floor := map[string]float64{}
	if err == nil && *floorFile != "" {
		floor, err = readFloor(*floorFile)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca-bench table: %v\n", err)
		return 1
	}
	printTable(os.Stdout, rs, floor)
	return 0
}

// benchTable is the runs of one bench-table.sh run: the best of each
// workload and daemon, and the sums of all for the delivered counts.
type benchTable struct {
	all        []*Result
	best       []*Result
	sent, got  map[[2]string]uint64
	workloads  []string // ids, in order
	labels     map[string]string
	daemons    []string // the columns that have runs
	cipherNsOp float64
}

func newBenchTable(all []*Result, floor map[string]float64) *benchTable {
	t := &benchTable{all: all, sent: map[[2]string]uint64{}, got: map[[2]string]uint64{}, labels: map[string]string{}, cipherNsOp: floor[cipherKey]}
	t.best, _ = bestRuns(all)
	has := map[string]bool{}
	for _, r := range all {
		id := workloadID(r)
		if _, ok := t.labels[id]; !ok {
			t.workloads = append(t.workloads, id)
			_, label, _ := strings.Cut(r.Workload, ":")
			t.labels[id] = strings.TrimSpace(label)
		}
		k := [2]string{id, r.Daemon}
		t.sent[k] += r.Sent
		t.got[k] += r.Delivered
		has[r.Daemon] = true
	}
	for _, d := range tableDaemons {
		if has[d] {
			t.daemons = append(t.daemons, d)
		}
	}
	return t
}

func (t *benchTable) get(id, d string) *Result { return find(t.best, id, d) }

// cpu is the server CPU per delivered result of id's best run with d, or 0.
func (t *benchTable) cpu(id, d string) float64 {
	if r := t.get(id, d); r != nil {
		return r.CPUUsPerCheck
	}
	return 0
}

func printTable(w io.Writer, all []*Result, floor map[string]float64) {
	t := newBenchTable(all, floor)
	fmt.Fprintln(w, "Server CPU per delivered result (utime+stime of the daemon's process tree; the least of the runs) and results/s of that run;")
	fmt.Fprintln(w, "for the burst, latency from the client's write to the line read from the command file, p50/p99.")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| workload | %s | delivered/sent | ours against |\n", strings.Join(t.daemons, " | "))
	fmt.Fprintf(w, "|---|%s---|---|\n", strings.Repeat("---|", len(t.daemons)))
	for _, id := range t.workloads {
		cells := []string{t.labels[id]}
		for _, d := range t.daemons {
			cells = append(cells, t.cell(id, d))
		}
		cells = append(cells, t.lost(id), t.against(id))
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	if t.get(wBurst, tOurs) != nil {
		fmt.Fprintln(w, "Burst: results/s is from the first write to the last line; the generator, on the same cores, needs ~0.3 ms of CPU per")
		fmt.Fprintln(w, "connection (TCP, AES), so the arrivals spread over more than the second asked for when it is short of CPU.")
	}
	if r := t.get(wBurst, tFloor); r != nil && r.LatencyByOrder {
		fmt.Fprintln(w, "floor_server's lines carry no id: its latencies pair the k-th line read with the k-th check sent.")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| issue 36 target | measured | |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, l := range t.targets() {
		fmt.Fprintln(w, l)
	}
}

func (t *benchTable) cell(id, d string) string {
	r := t.get(id, d)
	if r == nil {
		return "-"
	}
	if r.Delivered == 0 {
		return "nothing delivered"
	}
	if id == wBurst {
		return fmt.Sprintf("%s µs, %s/s; %s / %s ms", us(r.CPUUsPerCheck), thousands(r.ChecksPerSec), ms(r.LatencyP50Ms), ms(r.LatencyP99Ms))
	}
	return fmt.Sprintf("%s µs, %s/s", us(r.CPUUsPerCheck), thousands(r.ChecksPerSec))
}

// lost names the daemons that did not deliver everything sent, over all
// their runs of workload id.
func (t *benchTable) lost(id string) string {
	var out []string
	for _, d := range t.daemons {
		k := [2]string{id, d}
		if t.got[k] < t.sent[k] {
			out = append(out, fmt.Sprintf("%s %s/%s", d, thousands(float64(t.got[k])), thousands(float64(t.sent[k]))))
		}
	}
	if len(out) == 0 {
		return "all"
	}
	return strings.Join(out, "; ")
}

// against is ours' CPU per result over floor_server's where it ran, else
// over the implementation ours replaces in the row (nsca-ng-server, the
// PHP NRDP, the C++ nsca_fast).
func (t *benchTable) against(id string) string {
	for _, d := range []string{tFloor, tNG, tNRDP, tCpp} {
		if ref := t.cpu(id, d); ref > 0 && t.cpu(id, tOurs) > 0 {
			s := fmt.Sprintf("%.2fx %s", t.cpu(id, tOurs)/ref, d)
			if id == wBurst {
				if o, f := t.get(id, tOurs), t.get(id, d); o.LatencyP99Ms > 0 && f.LatencyP99Ms > 0 {
					s += fmt.Sprintf(", p99 %.2fx", o.LatencyP99Ms/f.LatencyP99Ms)
				}
			}
			return s
		}
	}
	return "-"
}

// targets are issue 36's, as table rows: what, the figures, met or missed.
func (t *benchTable) targets() []string {
	var out []string
	row := func(what, measured, verdict string) { out = append(out, "| "+what+" | "+measured+" | "+verdict+" |") }
	// atMost judges a <= k*b on the daemons' best runs of workload id,
	// the rounds' own ratios beside the figures.
	atMost := func(what, id, a, aName, b, bName string, k float64) {
		ca, cb := t.cpu(id, a), t.cpu(id, b)
		if ca == 0 || cb == 0 {
			row(what, "not measured", "n/a")
			return
		}
		row(what, fmt.Sprintf("%s %s µs, %s %s µs: %.2fx%s", aName, us(ca), bName, us(cb), ca/cb, t.byRound(id, a, b)), metMissed(ca <= k*cb))
	}
	atMost("XOR 20/conn paced: ours <= 2x floor", wXOR20, tOurs, "ours", tFloor, "floor", 2)
	atMost("XOR 1/conn paced: ours <= 1.4x floor", wXOR1, tOurs, "ours", tFloor, "floor", 1.4)
	atMost("ours w2 <= 1.15x ours w0, XOR 20/conn paced", wXOR20, tOursW2, "w2", tOurs, "w0", 1.15)
	atMost("ours w2 <= 1.15x ours w0, XOR 1/conn paced", wXOR1, tOursW2, "w2", tOurs, "w0", 1.15)
	d3, x1 := t.cpu(w3DES, tOurs), t.cpu(wXOR1At, tOurs)
	if c := t.cipherNsOp / 1000; d3 > 0 && x1 > 0 && c > 0 {
		limit := 2*x1 + c
		row("native 3DES 1/conn <= 2x (XOR 1/conn at the same rate) + cipher", fmt.Sprintf("3DES %s µs; 2 x %s + %s = %s µs", us(d3), us(x1), us(c), us(limit)), metMissed(d3 <= limit))
	} else {
		row("native 3DES 1/conn <= 2x (XOR 1/conn at the same rate) + cipher", "not measured", "n/a")
	}
	t.burstTarget(row)
	atMost("nsca-ng (a), long sessions: ours <= nsca-ng-server", wNGA, tOurs, "ours", tNG, "nsca-ng-server", 1)
	atMost("nsca-ng (b), a session per result: ours <= nsca-ng-server", wNGB, tOurs, "ours", tNG, "nsca-ng-server", 1)
	return out
}

// byRound is the ratio of a's CPU per result over b's in each round of
// workload id (the k-th run of a with the k-th of b: bench-table.sh runs
// each daemon once a round), as "; rounds: median M (LO-HIx, N rounds)",
// or "" with fewer than two rounds. The verdict stays on the best runs;
// the rounds say how far the machine's noise moved the ratio.
func (t *benchTable) byRound(id, a, b string) string {
	var as, bs []float64 // every run, failed ones too, so that rounds stay paired
	for _, r := range t.all {
		if workloadID(r) != id {
			continue
		}
		switch r.Daemon {
		case a:
			as = append(as, r.CPUUsPerCheck)
		case b:
			bs = append(bs, r.CPUUsPerCheck)
		}
	}
	var ratios []float64
	for i := range min(len(as), len(bs)) {
		if as[i] > 0 && bs[i] > 0 {
			ratios = append(ratios, as[i]/bs[i])
		}
	}
	n := len(ratios)
	if n < 2 {
		return ""
	}
	slices.Sort(ratios)
	median := ratios[n/2]
	if n%2 == 0 {
		median = (ratios[n/2-1] + ratios[n/2]) / 2
	}
	return fmt.Sprintf("; rounds: median %.2fx (%.2f-%.2fx, %d rounds)", median, ratios[0], ratios[n-1], n)
}

// burstTarget: ours (w0 and w2) lost nothing in any run; p99 beside
// floor_server's (reported, no bound).
func (t *benchTable) burstTarget(row func(what, measured, verdict string)) {
	const what = "burst: nothing lost, p99 beside floor's"
	var parts []string
	ok, any := true, false
	for _, d := range []string{tOurs, tOursW2, tFloor} {
		k := [2]string{wBurst, d}
		r := t.get(wBurst, d)
		if r == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s/%s, p99 %s ms", d, thousands(float64(t.got[k])), thousands(float64(t.sent[k])), ms(r.LatencyP99Ms)))
		if d != tFloor {
			any = true
			ok = ok && t.got[k] == t.sent[k] && t.sent[k] > 0
		}
	}
	if !any {
		row(what, "not measured", "n/a")
		return
	}
	row(what, strings.Join(parts, "; "), metMissed(ok))
}

// us formats microseconds with 3 significant digits at most 1 decimal.
func us(v float64) string {
	if v >= 100 {
		return thousands(v)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func ms(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// thousands rounds v and separates its thousands with commas.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
