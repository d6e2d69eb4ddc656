// Command nsca-bench is a load generator for NSCA daemons (nsca_fast and
// stock nsca). It plays many concurrent send_nsca clients, bit-exactly:
// every usable encryption method, 4304-byte or legacy 720-byte packets,
// several checks per connection. It also plays the monitoring core: it
// creates the command file FIFO, reads the lines the daemon writes and
// matches each to the check it sent, for delivery counts and latency. With
// --server-pid it measures the server's CPU time and memory from /proc.
//
// Other modes: `nsca-bench report ...` prints the table of a bench.sh run,
// `nsca-bench freeport` prints a free loopback TCP port, `nsca-bench floor
// ALGORITHM N` measures libmcrypt's CPU time per packet.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Options are the command line of a run.
type Options struct {
	Host          string
	Port          int
	Method        int
	Password      string
	Legacy        bool
	ChecksPerConn int
	Conns         int
	Total         uint64
	Duration      time.Duration
	FIFO          string
	Idle          int
	Rate          float64
	JSON          bool
	ServerPID     int
	Quiet         time.Duration
	Timeout       time.Duration
	Settle        time.Duration
	Workload      string
	Daemon        string
	CPUProfile    string
	Ahead         bool
	ExecClient    string
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "report":
			os.Exit(reportMain(os.Args[2:]))
		case "freeport":
			os.Exit(freePortMain())
		case "floor":
			os.Exit(floorMain(os.Args[2:]))
		}
	}
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca-bench: %v\n", err)
		os.Exit(2)
	}
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "nsca-bench: %v\n", err)
			os.Exit(2)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	res, err := Run(o, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca-bench: %v\n", err)
		os.Exit(1)
	}
	if o.JSON {
		json.NewEncoder(os.Stdout).Encode(res)
	} else {
		res.Print(os.Stdout)
	}
	if res.Delivered < res.Sent || res.Mismatched > 0 || res.Unknown > 0 {
		pprof.StopCPUProfile()
		os.Exit(3)
	}
}

func parseFlags(args []string) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("nsca-bench", flag.ContinueOnError)
	fs.StringVar(&o.Host, "host", "127.0.0.1", "daemon address")
	fs.IntVar(&o.Port, "port", 5667, "daemon port")
	fs.IntVar(&o.Method, "method", 1, "encryption_method: 0 none, 1 XOR, 2..26 libmcrypt (as send_nsca.cfg)")
	fs.StringVar(&o.Password, "password", "", "password, as in send_nsca.cfg")
	fs.BoolVar(&o.Legacy, "legacy", false, "send 720-byte packets, as send_nsca --legacy-2-7-mode")
	fs.IntVar(&o.ChecksPerConn, "checks-per-conn", 1, "checks sent on each connection (`K`)")
	fs.IntVar(&o.Conns, "conns", 8, "concurrent connections (`C`)")
	fs.Uint64Var(&o.Total, "total", 0, "stop after `N` checks")
	fs.DurationVar(&o.Duration, "duration", 0, "stop sending after `D` (e.g. 10s)")
	fs.StringVar(&o.FIFO, "fifo", "", "the daemon's command_file: a FIFO created (if needed) and read by nsca-bench")
	fs.IntVar(&o.Idle, "idle", 0, "hold `N` idle connections (init packet read, nothing sent) open during the run")
	fs.Float64Var(&o.Rate, "rate", 0, "pace the checks at `R` per second in all (0: as fast as the daemon takes them)")
	fs.BoolVar(&o.JSON, "json", false, "print the result as JSON")
	fs.IntVar(&o.ServerPID, "server-pid", 0, "measure CPU time and RSS of this `PID` and its descendants")
	fs.DurationVar(&o.Quiet, "drain", 5*time.Second, "after sending, wait for missing lines until none arrived for this long")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "connect and init packet timeout")
	fs.DurationVar(&o.Settle, "settle", 300*time.Millisecond, "wait this long after the last line before reading the server's CPU time")
	fs.StringVar(&o.Workload, "workload", "", "label of the workload, copied into the result")
	fs.StringVar(&o.Daemon, "daemon", "", "label of the daemon, copied into the result")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write nsca-bench's own CPU profile to `FILE`")
	fs.BoolVar(&o.Ahead, "ahead", false, "open every connection and encrypt all --total checks before the measured part, which then only writes them (--conns at a time)")
	fs.StringVar(&o.ExecClient, "exec-client", "", "send with this `PROGRAM` (scripts/nsca-load.c) instead of nsca-bench's own clients")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.FIFO == "":
		return o, errors.New("--fifo is required: the daemon's command_file, which nsca-bench reads")
	case o.Total == 0 && o.Duration == 0:
		return o, errors.New("give --total or --duration")
	case o.ChecksPerConn < 1 || o.Conns < 1:
		return o, errors.New("--checks-per-conn and --conns must be at least 1")
	case o.Total >= maxIDs:
		return o, fmt.Errorf("--total is at most %d", maxIDs-1)
	case o.Rate < 0 || o.Idle < 0:
		return o, errors.New("--rate and --idle cannot be negative")
	case o.Ahead && (o.Total == 0 || o.Duration != 0 || o.Rate != 0 || o.ExecClient != ""):
		return o, errors.New("--ahead takes --total, and neither --duration, --rate nor --exec-client")
	case o.ExecClient != "" && (o.Duration == 0 || o.Total != 0 || o.Legacy || o.Method < 1):
		return o, errors.New("--exec-client takes --duration and a method from 1 up, and neither --total nor --legacy")
	}
	return o, nil
}

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

func selfCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Run performs one benchmark run. Progress and warnings go to log.
func Run(o Options, log *os.File) (*Result, error) {
	cipher, err := NewCipher(o.Method, o.Password, o.Legacy)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Workload: o.Workload, Daemon: o.Daemon, Method: o.Method, Algorithm: cipher.Algorithm,
		PacketSize: cipher.PacketSize(), ChecksPerConn: o.ChecksPerConn, Conns: o.Conns, Rate: o.Rate, Idle: o.Idle,
		ServerPID: o.ServerPID, Generator: "nsca-bench",
	}
	switch {
	case o.Ahead:
		res.Generator = "nsca-bench --ahead"
	case o.ExecClient != "":
		res.Generator = filepath.Base(o.ExecClient)
	}
	addr := net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
	start := time.Now()
	clock := func() int64 { return int64(time.Since(start)) + 1 }
	sent, recv := new(times), new(times)

	sink, err := OpenSink(o.FIFO, clock, recv)
	if err != nil {
		return nil, err
	}
	sink.Start()
	defer sink.Close()

	var sampler *RSSSampler
	if o.ServerPID > 0 {
		if _, _, err := TreeCPU(o.ServerPID); err != nil {
			return nil, fmt.Errorf("--server-pid: %w", err)
		}
		before := treeMemory(o.ServerPID, true)
		res.RSSBeforeKB, res.PSSBeforeKB = before.rss, before.pss
		sampler = StartRSSSampler(o.ServerPID, 100*time.Millisecond)
	}

	idle := openIdle(addr, o.Idle, o.Timeout, log)
	res.IdleOpened = len(idle)
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	if o.ServerPID > 0 && o.Idle > 0 {
		time.Sleep(300 * time.Millisecond)
		res.RSSIdleKB, _, _ = TreeRSS(o.ServerPID)
	}

	var prepared []*preparedConn
	if o.Ahead {
		if prepared, err = prepareAhead(addr, cipher, o.Total, o.ChecksPerConn, o.Timeout, log); err != nil {
			return nil, err
		}
	}

	var cpu0 time.Duration
	if o.ServerPID > 0 {
		cpu0, _, _ = TreeCPU(o.ServerPID)
	}
	self0 := selfCPU()
	others0 := OthersCPU(o.ServerPID)
	busy0, soft0 := machineCPU()
	loadStart := time.Now()
	loadStartClock := clock()
	deadline := time.Time{}
	if o.Duration > 0 {
		deadline = loadStart.Add(o.Duration)
	}

	var (
		nextID      atomic.Uint64
		sentCount   atomic.Uint64
		failed      atomic.Uint64
		dialErrors  atomic.Uint64
		connections atomic.Uint64
		firstErr    atomic.Pointer[string]
	)
	noteErr := func(err error) {
		s := err.Error()
		if firstErr.CompareAndSwap(nil, &s) {
			fmt.Fprintf(log, "nsca-bench: first error: %v\n", err)
		}
	}
	// take reserves the ids of the next connection's checks, before it is
	// opened, so that no connection is opened only to find nothing to send.
	take := func() (first, n uint64) {
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return 0, 0
		}
		k := uint64(o.ChecksPerConn)
		first = nextID.Add(k) - k
		limit := maxIDs
		if o.Total > 0 {
			limit = o.Total
		}
		if first >= limit {
			return 0, 0
		}
		return first, min(k, limit-first)
	}
	// pace waits for id's turn at --rate; false if that is past the deadline.
	pace := func(id uint64) bool {
		if o.Rate <= 0 {
			return true
		}
		at := loadStart.Add(time.Duration(float64(id) / o.Rate * float64(time.Second)))
		if !deadline.IsZero() && at.After(deadline) {
			return false
		}
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		return true
	}
	var (
		wg         sync.WaitGroup
		nextPrep   atomic.Int64
		execCPU    time.Duration
		execSent   uint64
		execErrors uint64
		execConns  uint64
	)
	if o.ExecClient != "" {
		var err error
		execSent, execErrors, execConns, execCPU, err = runExecClient(o, cipher, log)
		connections.Store(execConns)
		if err != nil {
			return nil, err
		}
		sentCount.Store(execSent)
		failed.Store(execErrors)
		nextID.Store(execSent)
	}
	if prepared != nil {
		nextID.Store(o.Total)
	}
	for w := range o.Conns {
		if o.ExecClient != "" {
			break
		}
		if prepared != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(nextPrep.Add(1) - 1)
					if i >= len(prepared) {
						return
					}
					connections.Add(1)
					n, err := prepared[i].send(sent, clock)
					sentCount.Add(uint64(n))
					if err != nil {
						failed.Add(1)
						noteErr(err)
					}
				}
			}()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := uint64(0); ; n++ {
				first, count := take()
				if count == 0 {
					return
				}
				var cc *ClientConn
				for {
					var err error
					cc, err = Dial(addr, cipher, uint64(w)<<40|n, o.Timeout)
					if err == nil {
						break
					}
					dialErrors.Add(1)
					noteErr(err)
					if !deadline.IsZero() && !time.Now().Before(deadline) {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				connections.Add(1)
				for id := first; id < first+count; id++ {
					if !deadline.IsZero() && !time.Now().Before(deadline) {
						break
					}
					if !pace(id) {
						break
					}
					if err := cc.Send(ResultFor(id)); err != nil {
						failed.Add(1)
						noteErr(err)
						break
					}
					sent.set(id, clock())
					sentCount.Add(1)
				}
				cc.Close()
			}
		}()
	}
	wg.Wait()
	sendEnd := time.Now()
	res.SendSeconds = sendEnd.Sub(loadStart).Seconds()
	res.Sent = sentCount.Load()
	if !sink.WaitFor(res.Sent, o.Quiet) {
		fmt.Fprintf(log, "nsca-bench: only %d of %d checks delivered after %v without a new line\n", sink.Delivered.Load(), res.Sent, o.Quiet)
	}
	lastLine := sink.LastRecv.Load()
	self1 := selfCPU() + execCPU
	busy1, soft1 := machineCPU()
	others1 := OthersCPU(o.ServerPID)
	wall := time.Since(loadStart).Seconds()
	if o.ServerPID > 0 {
		// Let the server finish with the connections that just closed (stock's
		// children exit and are reaped) before reading its CPU time.
		time.Sleep(o.Settle)
		cpu1, procs, err := TreeCPU(o.ServerPID)
		if err != nil {
			return nil, fmt.Errorf("server process after the run: %w", err)
		}
		res.ServerProcs = procs
		res.ServerCPUSec = (cpu1 - cpu0).Seconds()
	}
	res.IdleOpenAtEnd = countOpen(idle)
	if sampler != nil {
		samples := sampler.Stop()
		loadAt := loadStart.Sub(sampler.start)
		endAt := sendEnd.Sub(sampler.start)
		for _, s := range samples {
			res.RSSPeakKB = max(res.RSSPeakKB, s.KB)
			res.PSSPeakKB = max(res.PSSPeakKB, s.PSSKB)
			res.ServerMaxProcs = max(res.ServerMaxProcs, s.Procs)
			if s.At >= loadAt+time.Second && res.RSSFirstKB == 0 {
				res.RSSFirstKB = s.KB
			}
			if s.At <= endAt {
				res.RSSLastKB = s.KB
			}
		}
		if res.RSSFirstKB == 0 && len(samples) > 0 {
			res.RSSFirstKB = samples[len(samples)-1].KB
		}
		_, res.HWMSumKB, _ = TreeRSS(o.ServerPID)
	}

	res.Delivered = sink.Delivered.Load()
	res.Failed, res.DialErrors, res.Connections = failed.Load(), dialErrors.Load(), connections.Load()
	res.Duplicates, res.Unknown, res.Mismatched = sink.Duplicates.Load(), sink.Unknown.Load(), sink.Mismatched.Load()
	res.FloorLines = sink.Floor.Load()
	res.FirstBad = sink.FirstBad()
	res.SinkFullReads = sink.FullReads.Load()
	if lastLine > loadStartClock {
		res.ElapsedSeconds = float64(lastLine-loadStartClock) / 1e9
		res.ChecksPerSec = float64(res.Delivered) / res.ElapsedSeconds
	}
	res.MachineBusyCores = (busy1 - busy0).Seconds() / wall
	res.LoadAvg = loadAvg()
	res.OtherProcsCores = othersSince(others0, others1).Seconds() / wall
	res.SoftirqCores = (soft1 - soft0).Seconds() / wall
	res.OtherCores = res.MachineBusyCores - (self1-self0).Seconds()/wall - res.ServerCPUSec/wall
	if res.Sent > 0 {
		res.ClientCPUUsPerCheck = float64(self1-self0) / 1e3 / float64(res.Sent)
	}
	if res.Delivered > 0 && o.ServerPID > 0 {
		res.CPUUsPerCheck = res.ServerCPUSec * 1e6 / float64(res.Delivered)
		if res.Connections > 0 {
			res.CPUUsPerConn = res.ServerCPUSec * 1e6 / float64(res.Connections)
		}
	}
	issued := min(nextID.Load(), maxIDs)
	if o.Total > 0 {
		issued = min(issued, o.Total)
	}
	lat := make([]int64, 0, res.Delivered)
	for id := range issued {
		s, r := sent.get(id), recv.get(id)
		if s != 0 && r != 0 {
			// The line may be read before the writer's clock call returned.
			lat = append(lat, max(r-s, 0))
		}
	}
	res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyMaxMs = percentilesMs(lat)
	return res, nil
}

// percentilesMs returns p50, p99 and max of nanosecond samples, in ms.
func percentilesMs(ns []int64) (p50, p99, pmax float64) {
	if len(ns) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ns)
	at := func(q float64) float64 {
		i := int(q*float64(len(ns))+0.5) - 1
		i = min(max(i, 0), len(ns)-1)
		return float64(ns[i]) / 1e6
	}
	return at(0.50), at(0.99), float64(ns[len(ns)-1]) / 1e6
}

// openIdle opens n connections that read their init packet and then send
// nothing, 64 at a time.
func openIdle(addr string, n int, timeout time.Duration, log *os.File) []*net.TCPConn {
	if n == 0 {
		return nil
	}
	var (
		mu    sync.Mutex
		conns = make([]*net.TCPConn, 0, n)
		next  atomic.Int64
		fails atomic.Int64
		wg    sync.WaitGroup
	)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				c, _, err := dialRaw(addr, timeout)
				if err != nil {
					if fails.Add(1) == 1 {
						fmt.Fprintf(log, "nsca-bench: idle connection: %v\n", err)
					}
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if f := fails.Load(); f > 0 {
		fmt.Fprintf(log, "nsca-bench: %d of %d idle connections failed\n", f, n)
	}
	return conns
}

// countOpen counts the idle connections the server has not closed: a
// non-blocking peek that would block means open, EOF or an error closed.
func countOpen(conns []*net.TCPConn) int {
	open := 0
	var b [1]byte
	for _, c := range conns {
		rc, err := c.SyscallConn()
		if err != nil {
			continue
		}
		alive := false
		rc.Control(func(fd uintptr) {
			_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			alive = err == unix.EAGAIN
		})
		if alive {
			open++
		}
	}
	return open
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
	fmt.Fprintf(w, "latency:  p50 %.3f ms, p99 %.3f ms, max %.3f ms (last byte written to line read)\n", r.LatencyP50Ms, r.LatencyP99Ms, r.LatencyMaxMs)
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

func freePortMain() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	fmt.Println(l.Addr().(*net.TCPAddr).Port)
	return 0
}

// loadAvg returns the 1-minute load average, 0 if unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(string(b), &l)
	return l
}
