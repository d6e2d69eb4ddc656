package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The daemons of `bench-engines.sh side`, as it labels them; stock is
// dSingle.
const (
	dAutoW0 = "ours auto w0"
	dAutoW2 = "ours auto w2"
	dLibW0  = "ours libmcrypt w0"
	dLibW2  = "ours libmcrypt w2"
	dCpp2x2 = "C++ 2x2"
)

// engineMethod is a method of the engines' side by side.
type engineMethod struct {
	n    int
	name string // libmcrypt's
}

var engineMethods = []engineMethod{{3, "tripledes"}, {2, "des"}, {14, "rijndael-128"}, {8, "blowfish"}, {4, "cast-128"}}

// printEngineSide prints `bench-engines.sh side`'s side by side of the
// decryption engines: saturation with clients that encrypt ahead
// (workloads s<method>), CPU per check of the libmcrypt engine against the
// C++ and of the native engines against their cipher time plus 1.2 x an
// XOR check (workloads p<method>/<checks per conn>/<go|c>), the process
// tree's PSS, and the targets met or missed.
func printEngineSide(w io.Writer, all []*Result, floor map[string]float64) {
	rs, _ := bestRuns(all)
	e := engineReport{w: w, all: all, rs: rs, floor: floor, targets: &targets{}}
	fmt.Fprintln(w, "== Issue 24: side by side (server CPU = utime+stime of the process tree per delivered check;")
	fmt.Fprintln(w, "   checks/s from the first send to the last line; of each workload and daemon the run with the")
	fmt.Fprintln(w, "   least CPU per check; \"!\": that run did not deliver every check exactly once)")
	fmt.Fprintln(w)
	e.saturation()
	fmt.Fprintln(w)
	e.libmcrypt()
	fmt.Fprintln(w)
	e.native()
	fmt.Fprintln(w)
	e.memory()
	fmt.Fprintln(w)
	e.alone()
	met := e.met()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "== Issue 24 targets: %d met, %d missed\n", met, len(e.lines)-met)
	for _, v := range e.lines {
		fmt.Fprintln(w, "   "+v)
	}
}

// engineReport prints the sections of the engines' side by side, each
// adding its verdicts to targets.
type engineReport struct {
	w     io.Writer
	all   []*Result // every run
	rs    []*Result // of each workload and daemon the run with the least CPU per check
	floor map[string]float64
	*targets
}

func (e engineReport) get(id, d string) *Result { return find(e.rs, id, d) }

// runCell is a run's CPU per check and checks/s, marked "!" if it lost or
// garbled checks; "-" without a run.
func runCell(r *Result) string {
	if r == nil {
		return "-"
	}
	mark := ""
	if !complete(r) {
		mark = "!"
	}
	return fmt.Sprintf("%.1f µs %.0f/s%s", r.CPUUsPerCheck, r.ChecksPerSec, mark)
}

// eachPattern calls f for every generator, checks per connection and
// method of the CPU-per-check workloads, in the order of the tables.
func eachPattern(f func(gen, k string, m engineMethod)) {
	for _, gen := range []string{"go", "c"} {
		for _, k := range []string{"1", "10"} {
			for _, m := range engineMethods {
				f(gen, k, m)
			}
		}
	}
}

// saturation prints the --ahead runs, each daemon's least CPU per check and
// most checks/s, with libmcrypt alone and the ratios of ours to the C++ and
// to stock.
func (e engineReport) saturation() {
	w := e.w
	fmt.Fprintln(w, "-- Saturation: 10 checks/conn, 8 sending clients, every packet encrypted before the measured part;")
	fmt.Fprintln(w, "   per daemon the least CPU per check and the most checks/s of its runs (other load only adds the")
	fmt.Fprintln(w, "   one and takes from the other)")
	const row = "%-14s %-19s %-19s %-19s %-19s %-19s %-10s %-9s %-9s %-9s\n"
	fmt.Fprintf(w, row, "method", dAutoW0, dAutoW2, dLibW0, dCpp2x2, dSingle, "mcrypt", "auto/C++", "auto/C++", "auto/")
	fmt.Fprintf(w, row, "", "", "", "", "", "", "alone", "checks/s", "CPU", "stock")
	fmt.Fprintln(w, strings.Repeat("-", 160))
	sat := func(id, d string) *Result { return saturated(e.all, id, d) }
	for _, m := range engineMethods {
		id := "s" + strconv.Itoa(m.n)
		best := bestOf(sat(id, dAutoW0), sat(id, dAutoW2))
		cpp, stock := sat(id, dCpp2x2), sat(id, dSingle)
		alone := "-"
		if f := e.floor["cpu:"+m.name]; f > 0 {
			alone = fmt.Sprintf("%.1f µs", f/1e3)
		}
		var tput, cpu, vsStock string = "-", "-", "-"
		if best != nil && cpp != nil {
			tput = ratio(best.ChecksPerSec, cpp.ChecksPerSec)
			cpu = ratio(best.CPUUsPerCheck, cpp.CPUUsPerCheck)
		}
		if best != nil && stock != nil {
			vsStock = ratio(best.ChecksPerSec, stock.ChecksPerSec)
		}
		fmt.Fprintf(w, row, fmt.Sprintf("%d %s", m.n, m.name), runCell(sat(id, dAutoW0)), runCell(sat(id, dAutoW2)), runCell(sat(id, dLibW0)),
			runCell(cpp), runCell(stock), alone, tput, cpu, vsStock)
		if m.n == 3 && best != nil && cpp != nil {
			e.add(complete(best) && best.ChecksPerSec >= 5*cpp.ChecksPerSec,
				"3DES at saturation, ours (auto, better of w0/w2) >= 5x the C++'s checks/s: %.0f / %.0f = %s",
				best.ChecksPerSec, cpp.ChecksPerSec, ratio(best.ChecksPerSec, cpp.ChecksPerSec))
		}
	}
}

// libmcrypt prints the libmcrypt engine's CPU per check against the C++'s.
func (e engineReport) libmcrypt() {
	w := e.w
	fmt.Fprintln(w, "-- decryption_engine=libmcrypt against the C++ (CPU per check; target: ours / C++ <= 1)")
	const row = "%-34s %-19s %-19s %-9s %-19s %-9s\n"
	fmt.Fprintf(w, row, "workload", dCpp2x2, dLibW0, "w0/C++", dLibW2, "w2/C++")
	fmt.Fprintln(w, strings.Repeat("-", 115))
	eachPattern(func(gen, k string, m engineMethod) {
		id := fmt.Sprintf("p%d/%s/%s", m.n, k, gen)
		cpp := e.get(id, dCpp2x2)
		if cpp == nil && e.get(id, dLibW0) == nil {
			return
		}
		rat := func(d string) string {
			if r := e.get(id, d); r != nil && cpp != nil {
				ok := complete(r) && complete(cpp) && r.CPUUsPerCheck <= cpp.CPUUsPerCheck
				e.add(ok, "%s %s checks/conn, %s, %s CPU <= the C++'s: %.1f / %.1f µs = %s",
					m.name, k, generatorName(gen), d, r.CPUUsPerCheck, cpp.CPUUsPerCheck, ratio(r.CPUUsPerCheck, cpp.CPUUsPerCheck))
				return ratio(r.CPUUsPerCheck, cpp.CPUUsPerCheck)
			}
			return "-"
		}
		fmt.Fprintf(w, row, engineWorkload(m.name, k, gen), runCell(cpp), runCell(e.get(id, dLibW0)), rat(dLibW0),
			runCell(e.get(id, dLibW2)), rat(dLibW2))
	})
}

// native prints the native engines' CPU per check against their cipher
// time plus 1.2 x an XOR check at the same rate.
func (e engineReport) native() {
	w := e.w
	fmt.Fprintln(w, "-- native engines (auto, w0): a check at most its cipher time + 1.2 x an XOR check of the same pattern")
	fmt.Fprintln(w, "   (same generator, clients and checks/conn, XOR paced at the rate the native run reached; cipher =")
	fmt.Fprintln(w, "   BenchmarkDecrypt's native cpu-ns/op for a 4304-byte packet; rest = check - cipher - XOR check;")
	fmt.Fprintln(w, "   XOR unpaced = the same clients as fast as they go, for comparison)")
	const row = "%-34s %-19s %-10s %-19s %-10s %-10s %-19s\n"
	fmt.Fprintf(w, row, "workload", "native check", "cipher", "XOR, same rate", "bound", "rest", "XOR unpaced")
	fmt.Fprintln(w, strings.Repeat("-", 128))
	eachPattern(func(gen, k string, m engineMethod) {
		id := fmt.Sprintf("p%d/%s/%s", m.n, k, gen)
		xid := fmt.Sprintf("x%d/%s/%s", m.n, k, gen)
		r, xor := e.get(id, dAutoW0), e.get(xid, dAutoW0)
		ci := e.floor[fmt.Sprintf("engine:%d:native", m.n)] / 1e3
		if r == nil {
			return
		}
		bound, rest := "-", "-"
		if xor != nil && ci > 0 {
			b := ci + 1.2*xor.CPUUsPerCheck
			bound = fmt.Sprintf("%.1f µs", b)
			rest = fmt.Sprintf("%.1f µs", r.CPUUsPerCheck-ci-xor.CPUUsPerCheck)
			e.add(complete(r) && complete(xor) && r.CPUUsPerCheck <= b,
				"native %s %s checks/conn, %s: %.1f µs <= cipher %.1f + 1.2 x XOR %.1f (at %.0f/s) = %.1f µs",
				m.name, k, generatorName(gen), r.CPUUsPerCheck, ci, xor.CPUUsPerCheck, xor.ChecksPerSec, b)
		}
		fmt.Fprintf(w, row, engineWorkload(m.name, k, gen), runCell(r), fmt.Sprintf("%.1f µs", ci),
			runCell(xor), bound, rest, runCell(e.get(fmt.Sprintf("p1/%s/%s", k, gen), dAutoW0)))
	})
}

// daemonMemory is the highest memory of a daemon's runs.
type daemonMemory struct {
	runs                                         int
	pssRest, pssPeak, pssAhead, rssRest, rssPeak uint64
}

// memoryOf takes the highest memory over every run of daemon d: at rest,
// under load and, apart, with --ahead's open connections.
func memoryOf(all []*Result, d string) (m daemonMemory) {
	for _, r := range all {
		if r.Daemon != d {
			continue
		}
		m.runs++
		m.pssRest, m.rssRest = max(m.pssRest, r.PSSBeforeKB), max(m.rssRest, r.RSSBeforeKB)
		if strings.HasPrefix(r.Workload, "s") {
			m.pssAhead = max(m.pssAhead, r.PSSPeakKB)
			continue
		}
		m.pssPeak, m.rssPeak = max(m.pssPeak, r.PSSPeakKB), max(m.rssPeak, r.RSSPeakKB)
	}
	return m
}

// memory prints each daemon's PSS and RSS, at rest and under load.
func (e engineReport) memory() {
	w := e.w
	fmt.Fprintln(w, "-- Memory: the process tree's PSS (sum of smaps_rollup Pss), highest over every run of the daemon")
	fmt.Fprintln(w, "   (load: the runs of 4-8 clients, m1 and m3 for the default engine with w2; --ahead: 200-1,500")
	fmt.Fprintln(w, "   connections open, each holding its packets)")
	const row = "%-20s %-12s %-12s %-14s %-12s %-12s\n"
	fmt.Fprintf(w, row, "daemon", "PSS at rest", "PSS load", "PSS --ahead", "RSS at rest", "RSS load")
	mbs := func(kb uint64) string {
		if kb == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f MB", mb(kb))
	}
	for _, d := range []string{dAutoW0, dAutoW2, dLibW0, dLibW2, dCpp2x2, dSingle} {
		m := memoryOf(e.all, d)
		if m.runs == 0 {
			continue
		}
		fmt.Fprintf(w, row, d, mbs(m.pssRest), mbs(m.pssPeak), mbs(m.pssAhead), mbs(m.rssRest), mbs(m.rssPeak))
		if (d == dAutoW2 || d == dLibW2) && m.pssPeak > 0 {
			e.add(m.pssRest <= 25*1024 && m.pssPeak <= 25*1024, "%s PSS <= 25 MB at rest and under load: %.1f / %.1f MB (%d runs; with --ahead's open connections %.1f MB)",
				d, mb(m.pssRest), mb(m.pssPeak), m.runs, mb(m.pssAhead))
		}
	}
}

// alone prints the engines' and libmcrypt's own cost per packet.
func (e engineReport) alone() {
	fmt.Fprintln(e.w, "-- Engines alone (BenchmarkDecrypt, 4304-byte packet, cpu-ns/op) and libmcrypt alone (nsca-bench floor)")
	for _, m := range engineMethods {
		lib, nat := e.floor[fmt.Sprintf("engine:%d:libmcrypt", m.n)], e.floor[fmt.Sprintf("engine:%d:native", m.n)]
		fmt.Fprintf(e.w, "   %-16s libmcrypt %8.1f µs  native %7.1f µs  native/libmcrypt %-7s  floor %8.1f µs\n",
			fmt.Sprintf("%d %s", m.n, m.name), lib/1e3, nat/1e3, ratio(nat, lib), e.floor["cpu:"+m.name]/1e3)
	}
}

// saturated is the least CPU per check and the most checks/s of the runs of
// workload id by daemon d, from whichever runs had them; nil if none.
func saturated(all []*Result, id, d string) *Result {
	var out *Result
	for _, r := range all {
		if workloadID(r) != id || r.Daemon != d {
			continue
		}
		if out == nil {
			c := *r
			out = &c
			continue
		}
		if r.CPUUsPerCheck < out.CPUUsPerCheck {
			out.CPUUsPerCheck = r.CPUUsPerCheck
		}
		if r.ChecksPerSec > out.ChecksPerSec {
			out.ChecksPerSec = r.ChecksPerSec
		}
		if !complete(r) {
			out.Delivered = min(out.Delivered, r.Delivered)
		}
	}
	return out
}

// bestOf is the run with more checks/s of two (either may be nil).
func bestOf(a, b *Result) *Result {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case b.ChecksPerSec > a.ChecksPerSec:
		return b
	}
	return a
}

func generatorName(gen string) string {
	if gen == "c" {
		return "nsca-load (C)"
	}
	return "nsca-bench"
}

// engineWorkload names a CPU-per-check workload in the tables.
func engineWorkload(alg, k, gen string) string {
	clients := "8 clients"
	if k != "1" {
		clients = "4 clients"
	}
	return fmt.Sprintf("%s, %s/conn, %s, %s", alg, k, clients, map[string]string{"go": "Go", "c": "C"}[gen])
}
