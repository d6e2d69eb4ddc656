package main

import (
	"fmt"
	"io"
	"strings"
)

// The daemons of issue 13's side-by-side table, as bench.sh labels them.
const (
	dFloor  = "floor_server"
	dCpp    = "C++ nsca_fast"
	dW0     = "nsca_fast"
	dW2     = "nsca_fast w=2"
	dSingle = "stock --single"
)

var issue13Daemons = []string{dFloor, dCpp, dW0, dW2, dSingle}

// printIssue13 prints the table of issue 13 (server CPU per delivered
// check, memory and latency, floor_server and the C++ nsca_fast beside ours
// with nsca_workers=0 and 2 and stock --single) and its targets, each met or
// missed. Absent daemons (no floor_server.c, NSCA_FAST_CPP unset) show "-"
// and their targets "n/a".
func printIssue13(w io.Writer, rs []*Result, floor map[string]float64) {
	get := func(id, d string) *Result { return find(rs, id, d) }
	// A run that lost or garbled checks is marked "!".
	cell := func(id, d string, f func(*Result) string) string {
		if r := get(id, d); r != nil {
			if !complete(r) {
				return f(r) + "!"
			}
			return f(r)
		}
		return "-"
	}
	cpu := func(r *Result) string {
		return fmt.Sprintf("%.1f µs %.0f/s", r.CPUUsPerCheck, r.ChecksPerSec)
	}
	const row = "%-46s %-18s %-18s %-18s %-18s %-18s\n"
	fmt.Fprintln(w, "== Issue 13: side by side (server CPU = utime+stime of the process tree per delivered check, and")
	fmt.Fprintln(w, "   checks/s from the first send to the last line; RSS = summed VmRSS of the tree; p99 = last byte")
	fmt.Fprintln(w, "   written to line read; floor_server decodes nothing, so it has no latency. XOR unless named;")
	fmt.Fprintln(w, "   \"!\": that run did not deliver every check exactly once, see Details)")
	fmt.Fprintf(w, row, "workload", "floor_server", "C++ 2 workers x 2", "ours workers=0", "ours workers=2", "stock --single")
	fmt.Fprintln(w, strings.Repeat("-", 143))
	cpuRows := []struct{ id, name string }{
		{"b", "1 check per connection, 8 clients"},
		{"a", "20 checks per connection, 8 clients"},
		{"c3", "3DES, 10 per connection, 4 clients"},
		{"c14", "method 14 (AES), 10 per conn., 4 clients"},
		{"c8", "Blowfish, 10 per connection, 4 clients"},
	}
	for _, cr := range cpuRows {
		fmt.Fprintf(w, row, cr.name+": CPU", cell(cr.id, dFloor, cpu), cell(cr.id, dCpp, cpu),
			cell(cr.id, dW0, cpu), cell(cr.id, dW2, cpu), cell(cr.id, dSingle, cpu))
	}
	for _, cr := range cpuRows {
		if r := get(cr.id, dW0); r == nil || r.Algorithm == "" {
			continue
		} else if c := floor["cpu:"+r.Algorithm]; c > 0 {
			fmt.Fprintf(w, row, cr.name[:strings.Index(cr.name, ",")]+": libmcrypt alone (CPU)",
				fmt.Sprintf("%.1f µs", c/1e3), "", "", "", "")
		}
	}
	rss := func(kb uint64) string { return fmt.Sprintf("%.1f MB", mb(kb)) }
	fmt.Fprintf(w, row, "process tree RSS at rest", cell("a", dFloor, func(r *Result) string { return rss(r.RSSBeforeKB) }),
		cell("a", dCpp, func(r *Result) string { return rss(r.RSSBeforeKB) }), cell("a", dW0, func(r *Result) string { return rss(r.RSSBeforeKB) }),
		cell("a", dW2, func(r *Result) string { return rss(r.RSSBeforeKB) }), cell("a", dSingle, func(r *Result) string { return rss(r.RSSBeforeKB) }))
	peak := func(r *Result) string { return rss(r.RSSPeakKB) }
	fmt.Fprintf(w, row, "RSS during workload 2 (peak)", cell("a", dFloor, peak), cell("a", dCpp, peak), cell("a", dW0, peak), cell("a", dW2, peak), cell("a", dSingle, peak))
	// Summed VmRSS counts a page shared by the tree's processes (the
	// binary's text, libc) once per process; PSS shares it out, so it sums
	// to what the tree takes. Shown beside RSS, which the targets use.
	pssRest := func(r *Result) string { return rss(r.PSSBeforeKB) }
	pssPeak := func(r *Result) string { return rss(r.PSSPeakKB) }
	fmt.Fprintf(w, row, "  the same as PSS: at rest", cell("a", dFloor, pssRest), cell("a", dCpp, pssRest), cell("a", dW0, pssRest), cell("a", dW2, pssRest), cell("a", dSingle, pssRest))
	fmt.Fprintf(w, row, "  the same as PSS: workload 2 (peak)", cell("a", dFloor, pssPeak), cell("a", dCpp, pssPeak), cell("a", dW0, pssPeak), cell("a", dW2, pssPeak), cell("a", dSingle, pssPeak))
	for _, g := range []struct{ id, name string }{
		{"g", "RSS overload, 512 clients (peak)"},
		{"g1k", "RSS overload, 1,000 clients (peak)"},
		{"g10k", "RSS overload, 512 clients + 9,488 idle"},
		{"e", "RSS 10,000 idle conns (+ workload 2)"},
	} {
		if !hasWorkload(rs, g.id) {
			continue
		}
		withRate := func(r *Result) string { return fmt.Sprintf("%.1f MB %.0f/s", mb(r.RSSPeakKB), r.ChecksPerSec) }
		fmt.Fprintf(w, row, g.name, cell(g.id, dFloor, withRate), cell(g.id, dCpp, withRate), cell(g.id, dW0, withRate), cell(g.id, dW2, withRate), cell(g.id, dSingle, withRate))
	}
	p99 := func(r *Result) string { return fmt.Sprintf("%.2f ms", r.LatencyP99Ms) }
	for _, cr := range cpuRows {
		fmt.Fprintf(w, row, "p99 saturated: "+cr.name[:strings.Index(cr.name, ",")], "", cell(cr.id, dCpp, p99), cell(cr.id, dW0, p99), cell(cr.id, dW2, p99), cell(cr.id, dSingle, p99))
	}
	half := func(r *Result) string { return fmt.Sprintf("%.2f ms @%.0f/s", r.LatencyP99Ms, r.Rate) }
	fmt.Fprintf(w, row, "p99 at half the max rate (workload 2)", "", cell("f", dCpp, half), cell("f", dW0, half), cell("f", dW2, half), cell("f", dSingle, half))

	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Issue 13: targets")
	for _, t := range evaluate13(rs, floor) {
		fmt.Fprintln(w, t)
	}
}

func hasWorkload(rs []*Result, id string) bool {
	for _, r := range rs {
		if workloadID(r) == id {
			return true
		}
	}
	return false
}

func metMissed(ok bool) string {
	if ok {
		return "met   "
	}
	return "missed"
}

// complete reports whether a run delivered every check it sent, once.
func complete(r *Result) bool {
	return r.Delivered == r.Sent && r.Duplicates+r.Mismatched+r.Unknown == 0
}

func evaluate13(rs []*Result, floor map[string]float64) []string {
	var out []string
	add := func(ok bool, format string, args ...any) {
		out = append(out, metMissed(ok)+" "+fmt.Sprintf(format, args...))
	}
	na := func(format string, args ...any) {
		out = append(out, "n/a    "+fmt.Sprintf(format, args...))
	}
	// cmp adds "ours <= k x ref" for one workload.
	cmp := func(id, ours, ref string, k float64, what string) {
		o, r := find(rs, id, ours), find(rs, id, ref)
		if o == nil || r == nil || r.CPUUsPerCheck == 0 {
			na("%s: %s or %s not measured", what, ours, ref)
			return
		}
		x := o.CPUUsPerCheck / r.CPUUsPerCheck
		add(x <= k && complete(o), "%s: %s %.2f µs / %s %.2f µs = %.3fx (target ≤ %gx)", what, ours, o.CPUUsPerCheck, ref, r.CPUUsPerCheck, x, k)
	}
	below := func(id, ours, ref, what string) {
		o, r := find(rs, id, ours), find(rs, id, ref)
		if o == nil || r == nil || r.CPUUsPerCheck == 0 {
			na("%s: %s or %s not measured", what, ours, ref)
			return
		}
		add(o.CPUUsPerCheck < r.CPUUsPerCheck, "%s: %s %.2f µs vs %s %.2f µs = %.3fx (target < 1x)", what, ours, o.CPUUsPerCheck, ref, r.CPUUsPerCheck, o.CPUUsPerCheck/r.CPUUsPerCheck)
	}
	// 1. One check per connection.
	cmp("b", dW0, dFloor, 1.3, "1. 1 check/conn")
	cmp("b", dW2, dW0, 1.15, "1. 1 check/conn")
	below("b", dW0, dCpp, "1. 1 check/conn")
	below("b", dW2, dCpp, "1. 1 check/conn")
	// 2. 20 checks per connection.
	cmp("a", dW0, dFloor, 2, "2. 20 checks/conn")
	cmp("a", dW2, dFloor, 2, "2. 20 checks/conn")
	// 3. libmcrypt methods.
	for _, id := range []string{"c3", "c14", "c8"} {
		for _, d := range []string{dW0, dW2} {
			o := find(rs, id, d)
			if o == nil {
				na("3. %s: %s not measured", id, d)
				continue
			}
			name := fmt.Sprintf("3. method %d (%s)", o.Method, o.Algorithm)
			if f := floor["cpu:"+o.Algorithm]; f > 0 {
				x := o.CPUUsPerCheck / (f / 1e3)
				add(x <= 1.05 && complete(o), "%s: %s %.1f µs = %.3fx libmcrypt alone %.1f µs (target ≤ 1.05x)", name, d, o.CPUUsPerCheck, x, f/1e3)
			} else {
				na("%s: libmcrypt floor not measured", name)
			}
			below(id, d, dCpp, name)
			if c := find(rs, id, dCpp); c != nil {
				add(o.ChecksPerSec >= c.ChecksPerSec, "%s: %s %.0f checks/s at saturation vs C++ %.0f (target ≥ 1x: %.3fx)", name, d, o.ChecksPerSec, c.ChecksPerSec, o.ChecksPerSec/c.ChecksPerSec)
			}
		}
	}
	// 4. Memory, nsca_workers=2.
	if a := find(rs, "a", dW2); a != nil {
		add(a.RSSBeforeKB <= 25<<10, "4. RSS at rest, workers=2: %.1f MB (target ≤ 25 MB)", mb(a.RSSBeforeKB))
		add(a.RSSPeakKB <= 25<<10, "4. RSS during workload 2, workers=2: peak %.1f MB (target ≤ 25 MB)", mb(a.RSSPeakKB))
	} else {
		na("4. RSS with workers=2: not measured")
	}
	for _, g := range []struct{ id, name string }{{"g", "512 clients"}, {"g1k", "1,000 clients"}, {"g10k", "512 clients + 9,488 idle"}} {
		for _, d := range []string{dW0, dW2} {
			if r := find(rs, g.id, d); r != nil {
				add(r.RSSPeakKB < 64<<10 && complete(r), "4. RSS under overload, %s, %s: peak %.1f MB, %d/%d delivered (target < 64 MB)", g.name, d, mb(r.RSSPeakKB), r.Delivered, r.Sent)
			}
		}
	}
	for _, d := range []string{dW0, dW2} {
		if e := find(rs, "e", d); e != nil {
			add(e.RSSPeakKB < 150<<10 && e.IdleOpenAtEnd >= e.Idle && complete(e), "4. 10,000 idle connections, %s: peak %.1f MB, %d still open, %d/%d delivered (target < 150 MB)", d, mb(e.RSSPeakKB), e.IdleOpenAtEnd, e.Delivered, e.Sent)
		}
	}
	// 5. Latency.
	for _, id := range []string{"a", "b", "c3", "c14", "c8"} {
		s := find(rs, id, dSingle)
		for _, d := range []string{dW0, dW2} {
			o := find(rs, id, d)
			if o == nil {
				continue
			}
			if s == nil || s.LatencyP99Ms == 0 {
				na("5. p99 saturated, %s, %s: stock --single not measured", id, d)
				continue
			}
			x := o.LatencyP99Ms / s.LatencyP99Ms
			add(x <= 2, "5. p99 saturated, %s (%s), %s: %.2f ms vs stock --single %.2f ms = %.2fx (target ≤ 2x)", id, methodName(o), d, o.LatencyP99Ms, s.LatencyP99Ms, x)
		}
	}
	for _, d := range []string{dW0, dW2} {
		if f := find(rs, "f", d); f != nil {
			add(f.LatencyP99Ms < 5 && complete(f), "5. p99 at half the max rate, %s: %.2f ms at %.0f checks/s (target < 5 ms)", d, f.LatencyP99Ms, f.Rate)
		}
	}
	// 6. Exactly once.
	bad := 0
	for _, r := range rs {
		if r.Daemon != dW0 && r.Daemon != dW2 {
			continue
		}
		if !complete(r) {
			bad++
			add(false, "6. %s / %s: sent %d, delivered %d, duplicates %d, wrong lines %d", r.Workload, r.Daemon, r.Sent, r.Delivered, r.Duplicates, r.Mismatched+r.Unknown)
		}
	}
	if bad == 0 {
		add(true, "6. every check of every nsca_fast run delivered exactly once")
	}
	return out
}

func methodName(r *Result) string {
	if r.Algorithm != "" {
		return r.Algorithm
	}
	return map[int]string{0: "none", 1: "XOR"}[r.Method]
}
