package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The daemons of `bench-engines.sh side`, as it labels them.
const (
	d24AutoW0 = "ours auto w0"
	d24AutoW2 = "ours auto w2"
	d24LibW0  = "ours libmcrypt w0"
	d24LibW2  = "ours libmcrypt w2"
	d24Cpp    = "C++ 2x2"
	d24Stock  = "stock --single"
)

// methods24 are issue 24's methods with their libmcrypt names.
var methods24 = []struct {
	n    int
	name string
}{{3, "tripledes"}, {2, "des"}, {14, "rijndael-128"}, {8, "blowfish"}, {4, "cast-128"}}

// printIssue24 prints issue 24's side by side: saturation with clients
// that encrypt ahead (workloads s<method>), CPU per check of the libmcrypt
// engine against the C++ and of the native engines against their cipher
// time plus 1.2 x an XOR check (workloads p<method>/<checks per
// conn>/<go|c>), the process tree's PSS, and the targets met or missed.
func printIssue24(w io.Writer, all []*Result, floor map[string]float64) {
	rs, _ := bestRuns(all)
	get := func(id, d string) *Result { return find(rs, id, d) }
	mark := func(r *Result) string {
		if !complete(r) {
			return "!"
		}
		return ""
	}
	cell := func(id, d string) string {
		r := get(id, d)
		if r == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f µs %.0f/s%s", r.CPUUsPerCheck, r.ChecksPerSec, mark(r))
	}
	var verdicts []string
	add := func(ok bool, format string, args ...any) {
		verdicts = append(verdicts, metMissed(ok)+" "+fmt.Sprintf(format, args...))
	}

	fmt.Fprintln(w, "== Issue 24: side by side (server CPU = utime+stime of the process tree per delivered check;")
	fmt.Fprintln(w, "   checks/s from the first send to the last line; of each workload and daemon the run with the")
	fmt.Fprintln(w, "   least CPU per check; \"!\": that run did not deliver every check exactly once)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "-- Saturation: 10 checks/conn, 8 sending clients, every packet encrypted before the measured part;")
	fmt.Fprintln(w, "   per daemon the least CPU per check and the most checks/s of its runs (other load only adds the")
	fmt.Fprintln(w, "   one and takes from the other)")
	const row = "%-14s %-19s %-19s %-19s %-19s %-19s %-10s %-9s %-9s %-9s\n"
	fmt.Fprintf(w, row, "method", d24AutoW0, d24AutoW2, d24LibW0, d24Cpp, d24Stock, "mcrypt", "auto/C++", "auto/C++", "auto/")
	fmt.Fprintf(w, row, "", "", "", "", "", "", "alone", "checks/s", "CPU", "stock")
	fmt.Fprintln(w, strings.Repeat("-", 160))
	sat := func(id, d string) *Result { return saturated(all, id, d) }
	scell := func(id, d string) string {
		r := sat(id, d)
		if r == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f µs %.0f/s%s", r.CPUUsPerCheck, r.ChecksPerSec, mark(r))
	}
	for _, m := range methods24 {
		id := "s" + strconv.Itoa(m.n)
		best := bestOf(sat(id, d24AutoW0), sat(id, d24AutoW2))
		cpp, stock := sat(id, d24Cpp), sat(id, d24Stock)
		alone := "-"
		if f := floor["cpu:"+m.name]; f > 0 {
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
		fmt.Fprintf(w, row, fmt.Sprintf("%d %s", m.n, m.name), scell(id, d24AutoW0), scell(id, d24AutoW2), scell(id, d24LibW0),
			scell(id, d24Cpp), scell(id, d24Stock), alone, tput, cpu, vsStock)
		if m.n == 3 && best != nil && cpp != nil {
			add(complete(best) && best.ChecksPerSec >= 5*cpp.ChecksPerSec,
				"3DES at saturation, ours (auto, better of w0/w2) >= 5x the C++'s checks/s: %.0f / %.0f = %s",
				best.ChecksPerSec, cpp.ChecksPerSec, ratio(best.ChecksPerSec, cpp.ChecksPerSec))
		}
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "-- decryption_engine=libmcrypt against the C++ (CPU per check; target: ours / C++ <= 1)")
	const row2 = "%-34s %-19s %-19s %-9s %-19s %-9s\n"
	fmt.Fprintf(w, row2, "workload", d24Cpp, d24LibW0, "w0/C++", d24LibW2, "w2/C++")
	fmt.Fprintln(w, strings.Repeat("-", 115))
	for _, gen := range []string{"go", "c"} {
		for _, k := range []string{"1", "10"} {
			for _, m := range methods24 {
				id := fmt.Sprintf("p%d/%s/%s", m.n, k, gen)
				cpp := get(id, d24Cpp)
				if cpp == nil && get(id, d24LibW0) == nil {
					continue
				}
				rat := func(d string) string {
					if r := get(id, d); r != nil && cpp != nil {
						ok := complete(r) && complete(cpp) && r.CPUUsPerCheck <= cpp.CPUUsPerCheck
						add(ok, "%s %s checks/conn, %s, %s CPU <= the C++'s: %.1f / %.1f µs = %s",
							m.name, k, generatorName(gen), d, r.CPUUsPerCheck, cpp.CPUUsPerCheck, ratio(r.CPUUsPerCheck, cpp.CPUUsPerCheck))
						return ratio(r.CPUUsPerCheck, cpp.CPUUsPerCheck)
					}
					return "-"
				}
				fmt.Fprintf(w, row2, workload24(m.name, k, gen), cell(id, d24Cpp), cell(id, d24LibW0), rat(d24LibW0),
					cell(id, d24LibW2), rat(d24LibW2))
			}
		}
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "-- native engines (auto, w0): a check at most its cipher time + 1.2 x an XOR check of the same pattern")
	fmt.Fprintln(w, "   (same generator, clients and checks/conn, XOR paced at the rate the native run reached; cipher =")
	fmt.Fprintln(w, "   BenchmarkDecrypt's native cpu-ns/op for a 4304-byte packet; rest = check - cipher - XOR check;")
	fmt.Fprintln(w, "   XOR unpaced = the same clients as fast as they go, for comparison)")
	const row3 = "%-34s %-19s %-10s %-19s %-10s %-10s %-19s\n"
	fmt.Fprintf(w, row3, "workload", "native check", "cipher", "XOR, same rate", "bound", "rest", "XOR unpaced")
	fmt.Fprintln(w, strings.Repeat("-", 128))
	for _, gen := range []string{"go", "c"} {
		for _, k := range []string{"1", "10"} {
			for _, m := range methods24 {
				id := fmt.Sprintf("p%d/%s/%s", m.n, k, gen)
				xid := fmt.Sprintf("x%d/%s/%s", m.n, k, gen)
				r, xor := get(id, d24AutoW0), get(xid, d24AutoW0)
				ci := floor[fmt.Sprintf("engine:%d:native", m.n)] / 1e3
				if r == nil {
					continue
				}
				bound, rest := "-", "-"
				if xor != nil && ci > 0 {
					b := ci + 1.2*xor.CPUUsPerCheck
					bound = fmt.Sprintf("%.1f µs", b)
					rest = fmt.Sprintf("%.1f µs", r.CPUUsPerCheck-ci-xor.CPUUsPerCheck)
					add(complete(r) && complete(xor) && r.CPUUsPerCheck <= b,
						"native %s %s checks/conn, %s: %.1f µs <= cipher %.1f + 1.2 x XOR %.1f (at %.0f/s) = %.1f µs",
						m.name, k, generatorName(gen), r.CPUUsPerCheck, ci, xor.CPUUsPerCheck, xor.ChecksPerSec, b)
				}
				fmt.Fprintf(w, row3, workload24(m.name, k, gen), cell(id, d24AutoW0), fmt.Sprintf("%.1f µs", ci),
					cell(xid, d24AutoW0), bound, rest, cell(fmt.Sprintf("p1/%s/%s", k, gen), d24AutoW0))
			}
		}
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "-- Memory: the process tree's PSS (sum of smaps_rollup Pss), highest over every run of the daemon")
	fmt.Fprintln(w, "   (load: the runs of 4-8 clients, m1 and m3 for the default engine with w2; --ahead: 200-1,500")
	fmt.Fprintln(w, "   connections open, each holding its packets)")
	const row4 = "%-20s %-12s %-12s %-14s %-12s %-12s\n"
	fmt.Fprintf(w, row4, "daemon", "PSS at rest", "PSS load", "PSS --ahead", "RSS at rest", "RSS load")
	for _, d := range []string{d24AutoW0, d24AutoW2, d24LibW0, d24LibW2, d24Cpp, d24Stock} {
		var pssRest, pssPeak, pssAhead, rssRest, rssPeak uint64
		n := 0
		for _, r := range all {
			if r.Daemon != d {
				continue
			}
			n++
			pssRest, rssRest = max(pssRest, r.PSSBeforeKB), max(rssRest, r.RSSBeforeKB)
			if strings.HasPrefix(r.Workload, "s") {
				pssAhead = max(pssAhead, r.PSSPeakKB)
				continue
			}
			pssPeak, rssPeak = max(pssPeak, r.PSSPeakKB), max(rssPeak, r.RSSPeakKB)
		}
		if n == 0 {
			continue
		}
		mbs := func(kb uint64) string {
			if kb == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f MB", mb(kb))
		}
		fmt.Fprintf(w, row4, d, mbs(pssRest), mbs(pssPeak), mbs(pssAhead), mbs(rssRest), mbs(rssPeak))
		if (d == d24AutoW2 || d == d24LibW2) && pssPeak > 0 {
			add(pssRest <= 25*1024 && pssPeak <= 25*1024, "%s PSS <= 25 MB at rest and under load: %.1f / %.1f MB (%d runs; with --ahead's open connections %.1f MB)",
				d, mb(pssRest), mb(pssPeak), n, mb(pssAhead))
		}
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "-- Engines alone (BenchmarkDecrypt, 4304-byte packet, cpu-ns/op) and libmcrypt alone (nsca-bench floor)")
	for _, m := range methods24 {
		lib, nat := floor[fmt.Sprintf("engine:%d:libmcrypt", m.n)], floor[fmt.Sprintf("engine:%d:native", m.n)]
		fmt.Fprintf(w, "   %-16s libmcrypt %8.1f µs  native %7.1f µs  native/libmcrypt %-7s  floor %8.1f µs\n",
			fmt.Sprintf("%d %s", m.n, m.name), lib/1e3, nat/1e3, ratio(nat, lib), floor["cpu:"+m.name]/1e3)
	}

	met := 0
	for _, v := range verdicts {
		if strings.HasPrefix(v, "met") {
			met++
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "== Issue 24 targets: %d met, %d missed\n", met, len(verdicts)-met)
	for _, v := range verdicts {
		fmt.Fprintln(w, "   "+v)
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

func workload24(alg, k, gen string) string {
	clients := "8 clients"
	if k != "1" {
		clients = "4 clients"
	}
	return fmt.Sprintf("%s, %s/conn, %s, %s", alg, k, clients, map[string]string{"go": "Go", "c": "C"}[gen])
}
