// Command nsca-bench is a load generator for NSCA daemons (nsca_fast and
// stock nsca). It plays many concurrent send_nsca clients, bit-exactly:
// every usable encryption method, 4304-byte or legacy 720-byte packets,
// several checks per connection. It also plays the monitoring core: it
// creates the command file FIFO, reads the lines the daemon writes and
// matches each to the check it sent, for delivery counts and latency. With
// --server-pid it measures the server's CPU time and memory from /proc.
//
// Other modes: `nsca-bench report ...` prints the table of a bench.sh run,
// `nsca-bench table ...` the table of a bench-table.sh run,
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
	"runtime/pprof"
	"time"
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
	Burst         bool
	NGClient      string
	NGConfig      string
	NRDP          string
	NRDPToken     string
	Spool         string
	GoAES         bool
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
		case "table":
			os.Exit(tableMain(os.Args[2:]))
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
	fs.BoolVar(&o.Burst, "burst", false, "a fleet arriving: each connection waits for its first check's turn at --rate before it connects (not after), and a connection that fails loses its checks (counted as sent), as send_nsca's would")
	fs.StringVar(&o.NGClient, "ng-client", "", "send with nsca-ng's send_nsca `PROGRAM` (-c --ng-config), one process per --checks-per-conn results, instead of NSCA packets")
	fs.StringVar(&o.NGConfig, "ng-config", "", "the `FILE` --ng-client reads (identity, password, server, port)")
	fs.StringVar(&o.NRDP, "nrdp", "", "post the results to the NRDP server at `URL`, --checks-per-conn per request, instead of NSCA packets")
	fs.StringVar(&o.NRDPToken, "nrdp-token", "", "the NRDP token")
	fs.StringVar(&o.Spool, "spool", "", "also read check result files from `DIR` (the real NRDP's check_results_dir), as Nagios' reaper would")
	fs.BoolVar(&o.GoAES, "go-aes", false, "encrypt method 14 with Go's crypto/aes (AES-NI) instead of libmcrypt: the same packets for a fraction of the generator's CPU")
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
	case o.Burst && (o.Rate == 0 || o.Ahead || o.ExecClient != ""):
		return o, errors.New("--burst takes --rate, and neither --ahead nor --exec-client")
	case (o.NGClient != "" || o.NRDP != "") && (o.Ahead || o.ExecClient != "" || o.Legacy || o.Idle != 0 || o.Burst):
		return o, errors.New("--ng-client and --nrdp take neither --ahead, --exec-client, --legacy, --idle nor --burst")
	case o.NGClient != "" && (o.NGConfig == "" || o.NRDP != ""):
		return o, errors.New("--ng-client takes --ng-config, and not --nrdp")
	case o.ExecClient != "" && (o.Duration == 0 || o.Total != 0 || o.Legacy || o.Method < 1):
		return o, errors.New("--exec-client takes --duration and a method from 1 up, and neither --total nor --legacy")
	}
	return o, nil
}

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
