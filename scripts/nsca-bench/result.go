package main

import (
	"fmt"
	"os"
)

// Result is what one run measured.
type Result struct {
	Workload      string  `json:"workload,omitempty"`
	Daemon        string  `json:"daemon,omitempty"`
	Generator     string  `json:"generator,omitempty"` // "nsca-bench", "nsca-bench --ahead" or the --exec-client program
	Method        int     `json:"method"`
	Algorithm     string  `json:"algorithm,omitempty"`
	PacketSize    int     `json:"packet_size"`
	ChecksPerConn int     `json:"checks_per_conn"`
	Conns         int     `json:"conns"`
	Rate          float64 `json:"rate,omitempty"`
	Idle          int     `json:"idle,omitempty"`
	IdleOpened    int     `json:"idle_opened,omitempty"`
	IdleOpenAtEnd int     `json:"idle_open_at_end,omitempty"`

	Sent        uint64 `json:"sent"`
	Delivered   uint64 `json:"delivered"`
	Failed      uint64 `json:"failed_writes"`
	DialErrors  uint64 `json:"dial_errors"`
	Connections uint64 `json:"connections"`
	Duplicates  uint64 `json:"duplicates"`
	FloorLines  uint64 `json:"floor_lines,omitempty"` // floor_server's fixed lines, counted in Delivered
	Unknown     uint64 `json:"unknown_lines"`
	Mismatched  uint64 `json:"mismatched_lines"`
	FirstBad    string `json:"first_bad_line,omitempty"`
	// SinkFullReads counts reads of the FIFO that found it full: nsca-bench
	// fell behind as the monitoring core, and the daemon may have waited
	// for it or diverted results to alternate_dump_file.
	SinkFullReads uint64 `json:"sink_full_reads"`

	SendSeconds    float64 `json:"send_seconds"`
	ElapsedSeconds float64 `json:"elapsed_seconds"` // first send to last matched line
	ChecksPerSec   float64 `json:"checks_per_sec"`

	LatencyP50Ms float64 `json:"latency_p50_ms"`
	LatencyP99Ms float64 `json:"latency_p99_ms"`
	LatencyMaxMs float64 `json:"latency_max_ms"`
	// LatencyByOrder: the lines carried no id (floor_server's), and the
	// latencies pair the k-th line read with the k-th check sent.
	LatencyByOrder bool `json:"latency_by_order,omitempty"`

	ServerPID      int     `json:"server_pid,omitempty"`
	ServerProcs    int     `json:"server_procs,omitempty"`
	ServerMaxProcs int     `json:"server_max_procs,omitempty"`
	ServerCPUSec   float64 `json:"server_cpu_seconds,omitempty"`
	CPUUsPerCheck  float64 `json:"server_cpu_us_per_check,omitempty"`
	CPUUsPerConn   float64 `json:"server_cpu_us_per_conn,omitempty"`
	RSSBeforeKB    uint64  `json:"rss_before_kb,omitempty"`    // before any connection of this run
	PSSBeforeKB    uint64  `json:"pss_before_kb,omitempty"`    // summed PSS, likewise
	PSSPeakKB      uint64  `json:"pss_peak_kb,omitempty"`      // highest sample of the summed PSS
	RSSIdleKB      uint64  `json:"rss_with_idle_kb,omitempty"` // idle connections open, before the load
	RSSFirstKB     uint64  `json:"rss_first_kb,omitempty"`     // first sample 1 s into the load
	RSSLastKB      uint64  `json:"rss_last_kb,omitempty"`      // last sample while sending
	RSSPeakKB      uint64  `json:"rss_peak_kb,omitempty"`      // highest 100 ms sample of the summed VmRSS
	HWMSumKB       uint64  `json:"hwm_sum_kb,omitempty"`       // sum of VmHWM of the processes alive at the end

	// ClientCPUUsPerCheck is nsca-bench's own CPU time per check: on a small
	// machine the generator competes with the daemon for the cores.
	ClientCPUUsPerCheck float64 `json:"client_cpu_us_per_check"`
	// MachineBusyCores is how many of the machine's cores were busy on
	// average during the run, OtherCores the part that was neither the
	// server's nor nsca-bench's process time (softirq work for loopback
	// TCP, and anything else running on the machine), SoftirqCores the
	// part spent in softirq.
	MachineBusyCores float64 `json:"machine_busy_cores"`
	OtherCores       float64 `json:"other_cores"`
	SoftirqCores     float64 `json:"softirq_cores"`
	// OtherProcsCores is the CPU (in cores) used during the run by the
	// processes outside the daemon's tree and nsca-bench: other work on the
	// machine. bench.sh repeats a run where it is high.
	OtherProcsCores float64 `json:"other_procs_cores"`
	// LoadAvg is the machine's 1-minute load average at the end of the run:
	// the daemon and nsca-bench make about 2 of it, the rest is other work
	// on the machine.
	LoadAvg float64 `json:"loadavg"`
}

// Print writes the result for people.
func (r *Result) Print(w *os.File) {
	method := map[int]string{0: "none", 1: "XOR"}[r.Method]
	if r.Algorithm != "" {
		method = r.Algorithm
	}
	fmt.Fprintf(w, "workload: method %d (%s), %d-byte packets, %d checks/conn, %d concurrent conns", r.Method, method, r.PacketSize, r.ChecksPerConn, r.Conns)
	if r.Rate > 0 {
		fmt.Fprintf(w, ", paced at %.0f checks/s", r.Rate)
	}
	if r.Idle > 0 {
		fmt.Fprintf(w, ", %d idle conns (%d opened, %d still open at the end)", r.Idle, r.IdleOpened, r.IdleOpenAtEnd)
	}
	fmt.Fprintln(w)
	pct := 0.0
	if r.Sent > 0 {
		pct = 100 * float64(r.Delivered) / float64(r.Sent)
	}
	fmt.Fprintf(w, "checks:   sent %d, delivered %d (%.2f%%), failed writes %d, dial errors %d, connections %d\n", r.Sent, r.Delivered, pct, r.Failed, r.DialErrors, r.Connections)
	if r.SinkFullReads > 0 {
		fmt.Fprintf(w, "SINK BEHIND: %d reads found the FIFO full (nsca-bench did not keep up as the core)\n", r.SinkFullReads)
	}
	if r.Duplicates+r.Unknown+r.Mismatched > 0 {
		fmt.Fprintf(w, "WRONG LINES: %d duplicates, %d without id, %d with wrong content; first: %q\n", r.Duplicates, r.Unknown, r.Mismatched, r.FirstBad)
	}
	fmt.Fprintf(w, "rate:     %.1f checks/s (%.2f s from the first send to the last line; sending took %.2f s)\n", r.ChecksPerSec, r.ElapsedSeconds, r.SendSeconds)
	fmt.Fprintf(w, "client:   nsca-bench used %.2f µs CPU per check; the machine was %.2f cores busy, %.2f of them neither server nor nsca-bench (softirq %.2f)\n", r.ClientCPUUsPerCheck, r.MachineBusyCores, r.OtherCores, r.SoftirqCores)
	how := "last byte written to line read"
	if r.LatencyByOrder {
		how += ", the k-th line taken for the k-th check: the lines carry no id"
	}
	fmt.Fprintf(w, "latency:  p50 %.3f ms, p99 %.3f ms, max %.3f ms (%s)\n", r.LatencyP50Ms, r.LatencyP99Ms, r.LatencyMaxMs, how)
	if r.ServerPID > 0 {
		fmt.Fprintf(w, "server:   CPU %.3f s in %d process(es): %.2f µs per check, %.2f µs per connection\n", r.ServerCPUSec, r.ServerProcs, r.CPUUsPerCheck, r.CPUUsPerConn)
		fmt.Fprintf(w, "memory:   RSS peak %.1f MB (before %.1f MB", mb(r.RSSPeakKB), mb(r.RSSBeforeKB))
		if r.Idle > 0 {
			fmt.Fprintf(w, ", with idle conns %.1f MB", mb(r.RSSIdleKB))
		}
		fmt.Fprintf(w, ", 1 s into the load %.1f MB, at the end %.1f MB; sum of VmHWM %.1f MB; up to %d processes)\n", mb(r.RSSFirstKB), mb(r.RSSLastKB), mb(r.HWMSumKB), r.ServerMaxProcs)
	}
}

func mb(kb uint64) float64 { return float64(kb) / 1024 }
