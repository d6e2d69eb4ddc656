// Command nsca is nsca_fast: a drop-in replacement for the Nagios NSCA
// daemon. This file holds only flags, config loading, the choice of a run
// mode and exit codes; the process model is package proc, the pipeline
// package stages.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof" // served only with --pprof
	"os"

	"github.com/golang/glog"

	"nsca_fast/conf"
	"nsca_fast/src/proc"
	"nsca_fast/stages"
	"nsca_fast/stages/cipher"
	"nsca_fast/stages/emit/sink"
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
	replay     string
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
	fs.StringVar(&o.replay, "replay", "", "feed the results of `PATH` (an alternate_dump_file or a check_result_path spool directory a fallback wrote, or a durable queue directory) through the configured remote destinations (Icinga 2, Gearman), report the counts and exit")
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
		fmt.Fprintf(os.Stdout, "Usage: nsca [-c FILE] [-f] [-d] [-n MAX_WORKERS] [-t THREADS] [--inetd] [--pprof ADDR] [--check-config] [--replay PATH]\nnsca_fast %s, a drop-in replacement for the Nagios NSCA daemon.\n\n", Version)
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
		return 0
	case o.version:
		engine := "libmcrypt"
		if !cipher.HasLibmcrypt() {
			engine = "built without libmcrypt: methods 0, 1 and the native ones"
		}
		fmt.Printf("nsca_fast %s (NSCA 2.10 protocol, %s)\n", Version, engine)
		return 0
	case o.license:
		fmt.Println("nsca_fast is free software under the GNU General Public License, version 3 or later.\nThere is NO WARRANTY, to the extent permitted by law.")
		return 0
	}
	setupLogging()
	defer glog.Flush()
	worker := proc.WorkerFromEnv()

	cfg, err := loadConfig(o)
	if err == nil && worker == nil && o.replay == "" {
		// A worker's configuration is the one its supervisor validated.
		err = validate(cfg, conf.Start{PidFile: !o.inetd})
	}
	if cfg != nil {
		for _, w := range cfg.Warnings {
			glog.Warning(w)
		}
	}
	if err != nil {
		return proc.Fail(err)
	}
	if (cfg.Debug || o.checkOnly) && worker == nil {
		for _, line := range cfg.Dump() {
			if o.checkOnly {
				fmt.Println(line)
			} else {
				glog.Infof("[config] %s", line)
			}
		}
	}
	if o.replay != "" {
		return replay(cfg, o.replay)
	}
	if worker != nil {
		sink.WorkerSlot = worker.Slot // each worker has durable queues of its own
	}
	if o.checkOnly {
		fmt.Println(stages.DescribeCipher(cfg))
		return 0
	}
	if o.pprofAddr != "" && worker == nil {
		go func() {
			glog.Infof("pprof on http://%s/debug/pprof/", o.pprofAddr)
			if err := http.ListenAndServe(o.pprofAddr, nil); err != nil {
				glog.Errorf("pprof: %v", err)
			}
		}()
	}
	app := &proc.App{
		Args:          args,
		Load:          func() (*conf.Config, error) { return loadConfig(o) },
		Check:         func(cfg *conf.Config) error { return validate(cfg, conf.Start{}) },
		New:           func(cfg *conf.Config, lfds []int) (proc.Server, error) { return stages.New(cfg, lfds) },
		ServeOne:      stages.ServeInetd,
		Describe:      func(cfg *conf.Config) string { return "nsca_fast " + Version + " " + stages.Describe(cfg) },
		CgoGoroutines: stages.CgoGoroutines,
		Reopen:        sink.Reopen,
	}
	switch {
	case worker != nil:
		return app.RunWorker(cfg, worker)
	case o.inetd:
		return app.RunInetd(cfg, o.foreground)
	case !o.foreground && !proc.Detached():
		return proc.Detach(args)
	}
	if proc.Detached() {
		if err := proc.StderrToSyslog(cfg.LogFacility); err != nil {
			return proc.Fail(err)
		}
	}
	if cfg.Workers > 0 {
		return app.RunSupervisor(cfg)
	}
	return app.RunSingle(cfg)
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

// loadConfig reads -c FILE or the embedded default and applies -n, -t, -d.
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

// replay runs --replay PATH: 0 when every result reached every remote
// destination, 1 otherwise.
func replay(cfg *conf.Config, path string) int {
	rep, err := sink.Replay(cfg, path, sink.ReplayPatience)
	fmt.Printf("nsca: replay %s: %s\n", path, rep)
	for _, s := range rep.Skipped {
		fmt.Printf("nsca: replay: skipped %s\n", s)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nsca: %v\n", err)
		return 1
	}
	return 0
}
