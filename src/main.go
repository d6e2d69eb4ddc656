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
	"nsca_fast/stages/counters"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sys/unix"

	"nsca_fast/conf"
	"nsca_fast/stages"
	"nsca_fast/stages/proc"
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
		fmt.Fprintf(os.Stdout, "Usage: nsca [-c FILE] [-f] [-d] [-n MAX_WORKERS] [-t THREADS] [--inetd] [--pprof ADDR] [--check-config]\nnsca_fast %s, a drop-in replacement for the Nagios NSCA daemon.\n\n", Version)
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
	worker := proc.WorkerFromEnv()

	cfg, err := loadConfig(o)
	if err != nil {
		return fail(err)
	}
	for _, w := range cfg.Warnings {
		glog.Warning(w)
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
	if o.checkOnly {
		if err := stages.CheckCipher(stages.CipherOf(cfg)); err != nil {
			return fail(err)
		}
		if _, err := proc.ResolveIdentity(cfg.User, cfg.Group); err != nil {
			return fail(err)
		}
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
	switch {
	case worker != nil:
		return runWorker(cfg, worker)
	case o.inetd:
		return runInetd(o, cfg)
	case !o.foreground && !proc.Detached():
		return proc.Detach(args)
	}
	if proc.Detached() {
		if err := proc.StderrToSyslog(cfg.LogFacility); err != nil {
			return fail(err)
		}
	}
	if cfg.Workers > 0 {
		return runSupervisor(o, args, cfg)
	}
	return runSingle(o, cfg)
}

// fail reports a start-up error on stderr and, for a detached daemon, to the
// parent still waiting on the terminal.
func fail(err error) int {
	fmt.Fprintf(os.Stderr, "nsca: %v\n", err)
	glog.Flush()
	proc.ReportStarted(err)
	return 1
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

func nofile() uint64 {
	var rl unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	return rl.Cur
}

// listeners returns systemd's sockets (activated is then true), or n new
// ones bound as the config says.
func listeners(cfg *conf.Config, n int) (fds []int, activated bool, err error) {
	if fds := proc.ActivatedListeners(); len(fds) > 0 {
		glog.Infof("using %d socket(s) from systemd socket activation", len(fds))
		return fds, true, nil
	}
	for range max(n, 1) {
		fd, err := stages.Listen(cfg.ServerAddress, cfg.ServerPort, n > 0)
		if err != nil {
			return nil, false, err
		}
		fds = append(fds, fd)
	}
	return fds, false, nil
}

// dropPrivileges enters nsca_chroot and becomes nsca_user/nsca_group, after
// the sockets are bound, as stock does.
func dropPrivileges(cfg *conf.Config) error {
	id, err := proc.ResolveIdentity(cfg.User, cfg.Group)
	if err != nil {
		return err
	}
	warning, err := proc.Drop(cfg.Chroot, id)
	if warning != "" {
		glog.Warning(warning)
	}
	return err
}

// signals delivers the signals the daemon acts on.
func signals() chan os.Signal {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	return sigs
}

// runSingle serves in this process (nsca_workers=0). SIGHUP builds a new
// server from the re-read configuration on the same listening socket and
// lets the old one drain, so reloading refuses no client.
func runSingle(o *options, cfg *conf.Config) int {
	// Before the port is bound: a signal sent as soon as clients (or
	// systemd) can reach us is queued, not fatal.
	sigs := signals()
	// The pid file first: a second daemon must refuse before it binds, or
	// its SO_REUSEPORT socket would take (and then reset) clients of the
	// running one.
	pid, err := acquirePidFile(cfg)
	if err != nil {
		return fail(err)
	}
	defer pid.Remove()
	lfds, _, err := listeners(cfg, 0)
	if err != nil {
		return fail(err)
	}
	if err := dropPrivileges(cfg); err != nil {
		return fail(err)
	}
	srv, err := stages.New(cfg, lfds, nofile(), nil)
	if err != nil {
		return fail(err)
	}
	var current atomic.Pointer[stages.Server]
	current.Store(srv)
	serveMetrics(cfg, func() counters.Snapshot { return current.Load().Snapshot() })
	var running sync.WaitGroup
	start := func(s *stages.Server) {
		running.Add(1)
		go func() {
			defer running.Done()
			if err := s.Run(); err != nil {
				glog.Errorf("%v", err)
			}
		}()
	}
	start(srv)
	announce(cfg, "")
	proc.ReportStarted(nil)
	proc.Notify("READY=1")
	stopping := false
	for sig := range sigs {
		switch {
		case sig == syscall.SIGHUP && !stopping:
			proc.Notify(proc.Reloading())
			next, err := reloadServer(o, lfds, srv.Stats)
			if err != nil {
				glog.Errorf("SIGHUP: keeping the running configuration: %v", err)
			} else {
				start(next)
				srv.Shutdown()
				srv = next
				current.Store(srv)
				glog.Infof("SIGHUP: configuration reloaded; the previous server drains its connections")
			}
			proc.Notify("READY=1")
		case sig == syscall.SIGHUP:
		case !stopping:
			stopping = true
			proc.Notify("STOPPING=1")
			glog.Infof("%v: stopping: no new connections, draining the pipeline", sig)
			srv.Shutdown()
			go func() {
				running.Wait()
				signal.Stop(sigs) // no delivery may race with the close
				close(sigs)
			}()
		default:
			glog.Warningf("%v again: aborting the drain", sig)
			srv.Abort()
		}
	}
	return 0
}

// reloadServer builds a server from the configuration as it is now on disk;
// it carries on the counters of the server it replaces.
func reloadServer(o *options, lfds []int, stats *counters.Stats) (*stages.Server, error) {
	cfg, err := loadConfig(o)
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings {
		glog.Warning(w)
	}
	return stages.New(cfg, lfds, nofile(), stats)
}

// runWorker is one worker process of a supervisor: the whole pipeline on the
// listening socket it inherited, reporting to the supervisor.
func runWorker(cfg *conf.Config, w *proc.Worker) int {
	// Before the port is bound: a signal sent as soon as clients (or
	// systemd) can reach us is queued, not fatal. The supervisor reloads by
	// replacing workers and forwards the operator's SIGINT as SIGTERM, so
	// the worker listens to SIGTERM (the second aborts the drain) and to the
	// supervisor's death, which only ever drains. A log line written to a
	// pipe whose reader died must not end the drain either.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, proc.ParentDeathSignal)
	if w.Syslog {
		if err := proc.StderrToSyslog(cfg.LogFacility); err != nil {
			return fail(err)
		}
	}
	if err := dropPrivileges(cfg); err != nil {
		return fail(err)
	}
	srv, err := stages.New(cfg, []int{w.Listener()}, nofile(), nil)
	if err != nil {
		return fail(err)
	}
	srv.LogStats = false
	orphaned := make(chan os.Signal, 1)
	proc.OrphanWatch(func() { orphaned <- proc.ParentDeathSignal })
	go func() {
		terms := 0
		for {
			var sig os.Signal
			select {
			case sig = <-sigs:
			case sig = <-orphaned:
			}
			switch {
			case sig == proc.ParentDeathSignal:
				glog.Errorf("worker %d: the supervisor is gone; draining", w.Slot)
				srv.Shutdown()
			case terms == 0:
				terms++
				srv.Shutdown()
			default:
				srv.Abort()
			}
		}
	}()
	stop := make(chan struct{})
	reported := make(chan struct{})
	go func() {
		w.ReportEvery(srv.Snapshot, time.Second, stop)
		close(reported)
	}()
	w.Ready()
	err = srv.Run()
	close(stop)
	<-reported
	if err != nil {
		glog.Errorf("worker %d: %v", w.Slot, err)
		return 1
	}
	return 0
}

// runSupervisor runs nsca_workers worker processes and supervises them. It
// keeps its privileges, to read the configuration again on SIGHUP and to
// start workers that enter nsca_chroot; it never touches client data.
func runSupervisor(o *options, args []string, cfg *conf.Config) int {
	// Before the port is bound: a signal sent as soon as clients (or
	// systemd) can reach us is queued, not fatal.
	sigs := signals()
	if _, err := proc.ResolveIdentity(cfg.User, cfg.Group); err != nil {
		return fail(err)
	}
	pid, err := acquirePidFile(cfg)
	if err != nil {
		return fail(err)
	}
	defer pid.Remove()
	lfds, activated, err := listeners(cfg, cfg.Workers)
	if err != nil {
		return fail(err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	sup := &proc.Supervisor{
		Spawner:     &proc.ExecSpawner{Path: exe, Args: workerArgs(args), Syslog: proc.Detached()},
		Listeners:   lfds,
		Workers:     cfg.Workers,
		StopTimeout: time.Duration(cfg.ConnectionTimeout)*time.Second + 10*time.Second,
	}
	if !activated {
		// systemd's socket is shared by all workers; our own are one per worker.
		sup.Listen = func() (int, error) { return stages.Listen(cfg.ServerAddress, cfg.ServerPort, true) }
	}
	if err := sup.Start(); err != nil {
		return fail(err)
	}
	announce(cfg, fmt.Sprintf(", %d worker processes %v", cfg.Workers, sup.Pids()))
	proc.ReportStarted(nil)
	proc.Notify("READY=1")
	stopStats := make(chan struct{})
	go counters.ReportEvery(sup.Stats, stages.StatsInterval(cfg), stopStats)
	serveMetrics(cfg, sup.Stats)
	for {
		select {
		case ev := <-sup.Events():
			ev()
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				proc.Notify(proc.Reloading())
				if err := reloadWorkers(o, sup); err != nil {
					glog.Errorf("SIGHUP: keeping the running configuration: %v", err)
				}
				proc.Notify("READY=1")
				continue
			}
			proc.Notify("STOPPING=1")
			glog.Infof("%v: stopping the workers", sig)
			stopped := make(chan struct{})
			go func() {
				sup.Stop()
				close(stopped)
			}()
			// A second signal while they drain makes them abort the drain.
		drain:
			for {
				select {
				case ev := <-sup.Events():
					ev()
				case sig := <-sigs:
					if sig != syscall.SIGHUP {
						glog.Warningf("%v again: the workers abort their drain", sig)
						sup.Signal(syscall.SIGTERM)
					}
				case <-stopped:
					break drain
				}
			}
			close(stopStats)
			snap := sup.Stats()
			glog.Infof("stopped: %s", snap.Line(snap, 0))
			return 0
		}
	}
}

// reloadWorkers checks the configuration on disk and, if it is good, has the
// supervisor replace the workers with ones that read it.
func reloadWorkers(o *options, sup *proc.Supervisor) error {
	cfg, err := loadConfig(o)
	if err != nil {
		return err
	}
	if err := stages.CheckCipher(stages.CipherOf(cfg)); err != nil {
		return err
	}
	n := cfg.Workers
	if n == 0 {
		glog.Warningf("SIGHUP: nsca_workers=0 (one process) takes effect at the next restart; keeping %d workers", sup.Workers)
		n = sup.Workers
	}
	if err := sup.Reload(n); err != nil {
		return err
	}
	glog.Infof("SIGHUP: configuration reloaded; %d new workers %v serve, the previous ones drain", n, sup.Pids())
	return nil
}

// workerArgs is the command line for workers: the daemon's own, which they
// parse the same way, in the foreground (the supervisor has detached).
func workerArgs(args []string) []string {
	return append([]string{"-f"}, args...)
}

// runInetd serves the single connection inetd passes on stdin, logging to
// syslog unless -f keeps stderr (stderr may be the client's socket).
func runInetd(o *options, cfg *conf.Config) int {
	if !o.foreground {
		if err := proc.StderrToSyslog(cfg.LogFacility); err != nil {
			return fail(err)
		}
	}
	if err := dropPrivileges(cfg); err != nil {
		return fail(err)
	}
	srv, err := stages.New(cfg, nil, nofile(), nil)
	if err != nil {
		return fail(err)
	}
	srv.LogStats = false
	fd, err := unix.Dup(0)
	if err != nil {
		return fail(err)
	}
	if err := srv.ServeOne(fd); err != nil {
		glog.Errorf("%v", err)
		return 1
	}
	return 0
}

// serveMetrics serves Prometheus metrics on metrics_address, if set.
func serveMetrics(cfg *conf.Config, snapshot func() counters.Snapshot) {
	if cfg.MetricsAddress == "" {
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", counters.MetricsHandler(snapshot, cfg.Method().Name))
	go func() {
		glog.Infof("metrics on http://%s/metrics", cfg.MetricsAddress)
		if err := http.ListenAndServe(cfg.MetricsAddress, mux); err != nil {
			glog.Errorf("metrics_address: %v", err)
		}
	}()
}

func acquirePidFile(cfg *conf.Config) (*proc.PidFile, error) {
	if cfg.PidFile == "" {
		return nil, nil
	}
	return proc.AcquirePidFile(cfg.PidFile)
}

func announce(cfg *conf.Config, extra string) {
	m := cfg.Method()
	glog.Infof("nsca_fast %s listening on %s port %d, decryption_method=%d (%s), decryption_mode=%d, %d decrypt goroutines%s",
		Version, orAll(cfg.ServerAddress), cfg.ServerPort, m.Number, m.Name, cfg.DecryptionMode, stages.Threads(cfg), extra)
}

func orAll(addr string) string {
	if strings.TrimSpace(addr) == "" {
		return "all addresses"
	}
	return addr
}
