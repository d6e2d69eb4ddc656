// Command nsca is nsca_fast: a drop-in replacement for the Nagios NSCA
// daemon. This file holds only flags, config loading, signals and wiring;
// the daemon itself is package stages.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof" // served only with --pprof
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/conf"
	"nsca_fast/stages"
)

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "0.1.0"

// options are the command line: stock's flags and nsca_fast's.
type options struct {
	configFile string
	foreground bool
	single     bool
	daemon     bool
	inetd      bool
	help       bool
	version    bool
	license    bool
	verbose    bool
	workers    int
	threads    int
	pprofAddr  string
	checkOnly  bool
}

func parseFlags(args []string) (*options, *flag.FlagSet, error) {
	o := &options{workers: -1, threads: -1}
	fs := flag.NewFlagSet("nsca", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	both := func(p *bool, short, long, usage string) {
		fs.BoolVar(p, short, false, usage)
		fs.BoolVar(p, long, false, usage)
	}
	fs.StringVar(&o.configFile, "c", "", "read the configuration from `FILE` (default: the embedded configuration)")
	both(&o.foreground, "f", "foreground", "stay in the foreground and log to stderr")
	both(&o.single, "s", "single", "accepted for compatibility with stock nsca")
	fs.BoolVar(&o.daemon, "daemon", false, "accepted for compatibility with stock nsca")
	both(&o.inetd, "i", "inetd", "serve one connection on stdin/stdout (inetd)")
	both(&o.help, "h", "help", "show this help")
	both(&o.version, "V", "version", "show the version")
	both(&o.license, "l", "license", "show the license")
	fs.BoolVar(&o.verbose, "d", false, "verbose output: log the effective configuration and every check")
	fs.IntVar(&o.workers, "n", -1, "worker processes, `MAX_WORKERS` 0..100 (overrides nsca_workers)")
	fs.IntVar(&o.threads, "t", -1, "decrypt goroutines per worker, `THREADS` 0..1000 (overrides nsca_threads_per_worker)")
	fs.StringVar(&o.pprofAddr, "pprof", "", "serve net/http/pprof on `ADDR` (for example 127.0.0.1:6060)")
	fs.BoolVar(&o.checkOnly, "check-config", false, "check the configuration, print the effective settings and exit")
	// glog's own flags (-v, -vmodule, -log_dir ...) stay available.
	flag.CommandLine.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.workers > 100 {
		return nil, fs, fmt.Errorf("-n %d: max workers must be between 0 and 100", o.workers)
	}
	if o.threads > 1000 {
		return nil, fs, fmt.Errorf("-t %d: threads must be between 0 and 1000", o.threads)
	}
	return o, fs, nil
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	o, fs, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca: %v\n", err)
		return 2
	}
	switch {
	case o.help:
		fmt.Fprintf(os.Stdout, "Usage: nsca [-c FILE] [-f] [-d] [-n MAX_WORKERS] [-t THREADS] [--pprof ADDR] [--check-config]\nnsca_fast %s, a drop-in replacement for the Nagios NSCA daemon.\n\n", Version)
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
		return 0
	case o.version:
		fmt.Printf("nsca_fast %s (NSCA 2.10 protocol, libmcrypt)\n", Version)
		return 0
	case o.license:
		fmt.Println("nsca_fast is free software under the GNU General Public License, version 3 or later.\nThere is NO WARRANTY, to the extent permitted by law.")
		return 0
	}
	setupLogging()
	defer glog.Flush()

	cfg, err := loadConfig(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca: %v\n", err)
		return 1
	}
	for _, w := range cfg.Warnings {
		glog.Warning(w)
	}
	if cfg.Debug || o.verbose || o.checkOnly {
		for _, line := range cfg.Dump() {
			if o.checkOnly {
				fmt.Println(line)
			} else {
				glog.Infof("[config] %s", line)
			}
		}
	}
	if o.checkOnly {
		if err := stages.CheckCipher(stages.CipherOf(cfg)); err != nil {
			fmt.Fprintf(os.Stderr, "nsca: %v\n", err)
			return 1
		}
		return 0
	}
	if o.pprofAddr != "" {
		go func() {
			glog.Infof("pprof on http://%s/debug/pprof/", o.pprofAddr)
			if err := http.ListenAndServe(o.pprofAddr, nil); err != nil {
				glog.Errorf("pprof: %v", err)
			}
		}()
	}
	return serve(cfg)
}

// setupLogging sends glog to stderr unless the operator chose otherwise.
func setupLogging() {
	flag.CommandLine.Parse(nil) // glog wants flag.Parsed(); its flags were parsed by our FlagSet
	if f := flag.Lookup("logtostderr"); f != nil && !isSet("log_dir") && !isSet("alsologtostderr") {
		f.Value.Set("true")
	}
}

func isSet(name string) bool {
	f := flag.Lookup(name)
	return f != nil && f.Value.String() != f.DefValue
}

// loadConfig reads -c FILE or the embedded default and applies -n and -t.
func loadConfig(o *options) (*conf.Config, error) {
	var cfg *conf.Config
	if o.configFile == "" {
		cfg = conf.Embedded()
	} else {
		var err error
		if cfg, err = conf.Load(o.configFile); err != nil {
			return nil, err
		}
	}
	if o.verbose {
		cfg.Debug = true
	}
	if o.workers >= 0 {
		cfg.Workers = o.workers
	}
	if o.threads >= 0 {
		cfg.ThreadsPerWorker = o.threads
	}
	return cfg, cfg.Validate()
}

// serve runs the pipeline in this process until SIGTERM or SIGINT.
func serve(cfg *conf.Config) int {
	lfd, err := stages.Listen(cfg.ServerAddress, cfg.ServerPort, cfg.Workers > 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca: %v\n", err)
		return 1
	}
	var rl unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	srv, err := stages.New(cfg, []int{lfd}, rl.Cur)
	if err != nil {
		unix.Close(lfd)
		fmt.Fprintf(os.Stderr, "nsca: %v\n", err)
		return 1
	}
	if cfg.PidFile != "" {
		if err := os.WriteFile(cfg.PidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "nsca: pid_file: %v\n", err)
			return 1
		}
		defer os.Remove(cfg.PidFile)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		stopping := false
		for sig := range sigs {
			switch {
			case sig == syscall.SIGHUP:
				glog.Warning("SIGHUP: reloading the configuration needs a restart in this version; ignored")
			case !stopping:
				stopping = true
				glog.Infof("%v: stopping: no new connections, draining the pipeline", sig)
				srv.Shutdown()
			default:
				glog.Warningf("%v again: aborting the drain", sig)
				srv.Abort()
			}
		}
	}()
	m := cfg.Method()
	glog.Infof("nsca_fast %s listening on %s port %d, decryption_method=%d (%s), decryption_mode=%d, %d decrypt goroutines",
		Version, orAll(cfg.ServerAddress), cfg.ServerPort, m.Number, m.Name, cfg.DecryptionMode, stages.Threads(cfg))
	if err := srv.Run(); err != nil {
		glog.Errorf("%v", err)
		return 1
	}
	return 0
}

func orAll(addr string) string {
	if strings.TrimSpace(addr) == "" {
		return "all addresses"
	}
	return addr
}
