package main

import (
	"fmt"
	"io"
	"strings"
)

// The daemons of bench.sh's side-by-side table, as it labels them.
const (
	dFloor  = "floor_server"
	dCpp    = "C++ nsca_fast"
	dW0     = "nsca_fast"
	dW2     = "nsca_fast w=2"
	dSingle = "stock --single"
)

// daemonCPUWorkloads are the saturated workloads of the side by side, by
// id, with the name of their rows.
var daemonCPUWorkloads = []struct{ id, name string }{
	{"b", "1 check per connection, 8 clients"},
	{"a", "20 checks per connection, 8 clients"},
	{"c3", "3DES, 10 per connection, 4 clients"},
	{"c14", "method 14 (AES), 10 per conn., 4 clients"},
	{"c8", "Blowfish, 10 per connection, 4 clients"},
}

// shortName is a row name up to its first comma.
func shortName(name string) string { return name[:strings.Index(name, ",")] }

// printDaemonSide prints bench.sh's side by side (server CPU per delivered
// check, memory and latency, floor_server and the C++ nsca_fast beside ours
// with nsca_workers=0 and 2 and stock --single) and its targets, each met or
// missed. Absent daemons (no floor_server.c, NSCA_FAST_CPP unset) show "-"
// and their targets "n/a".
func printDaemonSide(w io.Writer, rs []*Result, floor map[string]float64) {
	t := daemonTable{w: w, rs: rs}
	t.header()
	t.cpuRows(floor)
	t.memoryRows()
	t.latencyRows()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Issue 13: targets")
	for _, v := range evaluateDaemonSide(rs, floor).lines {
		fmt.Fprintln(w, v)
	}
}

// daemonTable prints the rows of the side by side: a workload's measure
// for each daemon, in the columns of header.
type daemonTable struct {
	w  io.Writer
	rs []*Result
}

const daemonRow = "%-46s %-18s %-18s %-18s %-18s %-18s\n"

func (t daemonTable) header() {
	fmt.Fprintln(t.w, "== Issue 13: side by side (server CPU = utime+stime of the process tree per delivered check, and")
	fmt.Fprintln(t.w, "   checks/s from the first send to the last line; RSS = summed VmRSS of the tree; p99 = last byte")
	fmt.Fprintln(t.w, "   written to line read; floor_server decodes nothing, so it has no latency. XOR unless named;")
	fmt.Fprintln(t.w, "   \"!\": that run did not deliver every check exactly once, see Details)")
	fmt.Fprintf(t.w, daemonRow, "workload", "floor_server", "C++ 2 workers x 2", "ours workers=0", "ours workers=2", "stock --single")
	fmt.Fprintln(t.w, strings.Repeat("-", 143))
}

// cell is f of the run of workload id by daemon d, "-" without one; a run
// that lost or garbled checks is marked "!".
func (t daemonTable) cell(id, d string, f func(*Result) string) string {
	r := find(t.rs, id, d)
	switch {
	case r == nil:
		return "-"
	case !complete(r):
		return f(r) + "!"
	}
	return f(r)
}

// row prints name and f of workload id for every daemon; floor_server's
// column stays empty unless withFloor.
func (t daemonTable) row(name, id string, withFloor bool, f func(*Result) string) {
	floorCell := ""
	if withFloor {
		floorCell = t.cell(id, dFloor, f)
	}
	fmt.Fprintf(t.w, daemonRow, name, floorCell, t.cell(id, dCpp, f), t.cell(id, dW0, f), t.cell(id, dW2, f), t.cell(id, dSingle, f))
}

// cpuRows prints the server CPU per check and checks/s of the saturated
// workloads, then libmcrypt's own CPU per packet for the libmcrypt ones.
func (t daemonTable) cpuRows(floor map[string]float64) {
	cpu := func(r *Result) string {
		return fmt.Sprintf("%.1f µs %.0f/s", r.CPUUsPerCheck, r.ChecksPerSec)
	}
	for _, cr := range daemonCPUWorkloads {
		t.row(cr.name+": CPU", cr.id, true, cpu)
	}
	for _, cr := range daemonCPUWorkloads {
		if r := find(t.rs, cr.id, dW0); r == nil || r.Algorithm == "" {
			continue
		} else if c := floor["cpu:"+r.Algorithm]; c > 0 {
			fmt.Fprintf(t.w, daemonRow, shortName(cr.name)+": libmcrypt alone (CPU)",
				fmt.Sprintf("%.1f µs", c/1e3), "", "", "", "")
		}
	}
}

// memoryRows prints the tree's RSS and PSS at rest and under workload a,
// and its RSS under the overload and idle workloads that were run.
func (t daemonTable) memoryRows() {
	rss := func(kb uint64) string { return fmt.Sprintf("%.1f MB", mb(kb)) }
	t.row("process tree RSS at rest", "a", true, func(r *Result) string { return rss(r.RSSBeforeKB) })
	t.row("RSS during workload 2 (peak)", "a", true, func(r *Result) string { return rss(r.RSSPeakKB) })
	// Summed VmRSS counts a page shared by the tree's processes (the
	// binary's text, libc) once per process; PSS shares it out, so it sums
	// to what the tree takes. Shown beside RSS, which the targets use.
	t.row("  the same as PSS: at rest", "a", true, func(r *Result) string { return rss(r.PSSBeforeKB) })
	t.row("  the same as PSS: workload 2 (peak)", "a", true, func(r *Result) string { return rss(r.PSSPeakKB) })
	withRate := func(r *Result) string { return fmt.Sprintf("%.1f MB %.0f/s", mb(r.RSSPeakKB), r.ChecksPerSec) }
	for _, g := range []struct{ id, name string }{
		{"g", "RSS overload, 512 clients (peak)"},
		{"g1k", "RSS overload, 1,000 clients (peak)"},
		{"g10k", "RSS overload, 512 clients + 9,488 idle"},
		{"e", "RSS 10,000 idle conns (+ workload 2)"},
	} {
		if hasWorkload(t.rs, g.id) {
			t.row(g.name, g.id, true, withRate)
		}
	}
}

// latencyRows prints p99 at saturation and at half the maximum rate.
func (t daemonTable) latencyRows() {
	p99 := func(r *Result) string { return fmt.Sprintf("%.2f ms", r.LatencyP99Ms) }
	for _, cr := range daemonCPUWorkloads {
		t.row("p99 saturated: "+shortName(cr.name), cr.id, false, p99)
	}
	half := func(r *Result) string { return fmt.Sprintf("%.2f ms @%.0f/s", r.LatencyP99Ms, r.Rate) }
	t.row("p99 at half the max rate (workload 2)", "f", false, half)
}

func hasWorkload(rs []*Result, id string) bool {
	for _, r := range rs {
		if workloadID(r) == id {
			return true
		}
	}
	return false
}

// complete reports whether a run delivered every check it sent, once.
func complete(r *Result) bool {
	return r.Delivered == r.Sent && r.Duplicates+r.Mismatched+r.Unknown == 0
}

// evaluateDaemonSide checks the side by side's targets: CPU per check
// against floor_server, the C++ and libmcrypt alone, memory, latency
// against stock --single, and exactly-once delivery.
func evaluateDaemonSide(rs []*Result, floor map[string]float64) *targets {
	t := &targets{}
	c := daemonTargets{t, rs}
	// 1. One check per connection.
	c.atMost("b", dW0, dFloor, 1.3, "1. 1 check/conn")
	c.atMost("b", dW2, dW0, 1.15, "1. 1 check/conn")
	c.below("b", dW0, dCpp, "1. 1 check/conn")
	c.below("b", dW2, dCpp, "1. 1 check/conn")
	// 2. 20 checks per connection.
	c.atMost("a", dW0, dFloor, 2, "2. 20 checks/conn")
	c.atMost("a", dW2, dFloor, 2, "2. 20 checks/conn")
	c.libmcrypt(floor)
	c.memory()
	c.latency()
	c.exactlyOnce()
	return t
}

// daemonTargets compares the runs of the side by side, adding a verdict
// for each comparison.
type daemonTargets struct {
	*targets
	rs []*Result
}

// atMost adds "ours <= k x ref" in CPU per check for one workload.
func (c daemonTargets) atMost(id, ours, ref string, k float64, what string) {
	o, r := find(c.rs, id, ours), find(c.rs, id, ref)
	if o == nil || r == nil || r.CPUUsPerCheck == 0 {
		c.na("%s: %s or %s not measured", what, ours, ref)
		return
	}
	x := o.CPUUsPerCheck / r.CPUUsPerCheck
	c.add(x <= k && complete(o), "%s: %s %.2f µs / %s %.2f µs = %.3fx (target ≤ %gx)", what, ours, o.CPUUsPerCheck, ref, r.CPUUsPerCheck, x, k)
}

// below adds "ours < ref" in CPU per check for one workload.
func (c daemonTargets) below(id, ours, ref, what string) {
	o, r := find(c.rs, id, ours), find(c.rs, id, ref)
	if o == nil || r == nil || r.CPUUsPerCheck == 0 {
		c.na("%s: %s or %s not measured", what, ours, ref)
		return
	}
	c.add(o.CPUUsPerCheck < r.CPUUsPerCheck, "%s: %s %.2f µs vs %s %.2f µs = %.3fx (target < 1x)", what, ours, o.CPUUsPerCheck, ref, r.CPUUsPerCheck, o.CPUUsPerCheck/r.CPUUsPerCheck)
}

// libmcrypt: 3. the libmcrypt methods against libmcrypt alone and the C++.
func (c daemonTargets) libmcrypt(floor map[string]float64) {
	for _, id := range []string{"c3", "c14", "c8"} {
		for _, d := range []string{dW0, dW2} {
			o := find(c.rs, id, d)
			if o == nil {
				c.na("3. %s: %s not measured", id, d)
				continue
			}
			name := fmt.Sprintf("3. method %d (%s)", o.Method, o.Algorithm)
			if f := floor["cpu:"+o.Algorithm]; f > 0 {
				x := o.CPUUsPerCheck / (f / 1e3)
				c.add(x <= 1.05 && complete(o), "%s: %s %.1f µs = %.3fx libmcrypt alone %.1f µs (target ≤ 1.05x)", name, d, o.CPUUsPerCheck, x, f/1e3)
			} else {
				c.na("%s: libmcrypt floor not measured", name)
			}
			c.below(id, d, dCpp, name)
			if cpp := find(c.rs, id, dCpp); cpp != nil {
				c.add(o.ChecksPerSec >= cpp.ChecksPerSec, "%s: %s %.0f checks/s at saturation vs C++ %.0f (target ≥ 1x: %.3fx)", name, d, o.ChecksPerSec, cpp.ChecksPerSec, o.ChecksPerSec/cpp.ChecksPerSec)
			}
		}
	}
}

// memory: 4. RSS with nsca_workers=2, under overload and with 10,000 idle
// connections.
func (c daemonTargets) memory() {
	if a := find(c.rs, "a", dW2); a != nil {
		c.add(a.RSSBeforeKB <= 25<<10, "4. RSS at rest, workers=2: %.1f MB (target ≤ 25 MB)", mb(a.RSSBeforeKB))
		c.add(a.RSSPeakKB <= 25<<10, "4. RSS during workload 2, workers=2: peak %.1f MB (target ≤ 25 MB)", mb(a.RSSPeakKB))
	} else {
		c.na("4. RSS with workers=2: not measured")
	}
	for _, g := range []struct{ id, name string }{{"g", "512 clients"}, {"g1k", "1,000 clients"}, {"g10k", "512 clients + 9,488 idle"}} {
		for _, d := range []string{dW0, dW2} {
			if r := find(c.rs, g.id, d); r != nil {
				c.add(r.RSSPeakKB < 64<<10 && complete(r), "4. RSS under overload, %s, %s: peak %.1f MB, %d/%d delivered (target < 64 MB)", g.name, d, mb(r.RSSPeakKB), r.Delivered, r.Sent)
			}
		}
	}
	for _, d := range []string{dW0, dW2} {
		if e := find(c.rs, "e", d); e != nil {
			c.add(e.RSSPeakKB < 150<<10 && e.IdleOpenAtEnd >= e.Idle && complete(e), "4. 10,000 idle connections, %s: peak %.1f MB, %d still open, %d/%d delivered (target < 150 MB)", d, mb(e.RSSPeakKB), e.IdleOpenAtEnd, e.Delivered, e.Sent)
		}
	}
}

// latency: 5. p99 at saturation against stock --single, and at half the
// maximum rate.
func (c daemonTargets) latency() {
	for _, id := range []string{"a", "b", "c3", "c14", "c8"} {
		s := find(c.rs, id, dSingle)
		for _, d := range []string{dW0, dW2} {
			o := find(c.rs, id, d)
			if o == nil {
				continue
			}
			if s == nil || s.LatencyP99Ms == 0 {
				c.na("5. p99 saturated, %s, %s: stock --single not measured", id, d)
				continue
			}
			x := o.LatencyP99Ms / s.LatencyP99Ms
			c.add(x <= 2, "5. p99 saturated, %s (%s), %s: %.2f ms vs stock --single %.2f ms = %.2fx (target ≤ 2x)", id, methodName(o), d, o.LatencyP99Ms, s.LatencyP99Ms, x)
		}
	}
	for _, d := range []string{dW0, dW2} {
		if f := find(c.rs, "f", d); f != nil {
			c.add(f.LatencyP99Ms < 5 && complete(f), "5. p99 at half the max rate, %s: %.2f ms at %.0f checks/s (target < 5 ms)", d, f.LatencyP99Ms, f.Rate)
		}
	}
}

// exactlyOnce: 6. every check of every run of ours delivered once.
func (c daemonTargets) exactlyOnce() {
	bad := 0
	for _, r := range c.rs {
		if r.Daemon != dW0 && r.Daemon != dW2 {
			continue
		}
		if !complete(r) {
			bad++
			c.add(false, "6. %s / %s: sent %d, delivered %d, duplicates %d, wrong lines %d", r.Workload, r.Daemon, r.Sent, r.Delivered, r.Duplicates, r.Mismatched+r.Unknown)
		}
	}
	if bad == 0 {
		c.add(true, "6. every check of every nsca_fast run delivered exactly once")
	}
}

func methodName(r *Result) string {
	if r.Algorithm != "" {
		return r.Algorithm
	}
	return map[int]string{0: "none", 1: "XOR"}[r.Method]
}
