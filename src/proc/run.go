package proc

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"syscall"

	"github.com/golang/glog"

	"nsca_fast/conf"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/diagnose"
)

// Server is one pipeline as a run mode drives it: Run serves until the
// drain that Shutdown starts has ended (Abort cuts it short).
type Server interface {
	Run() error
	Shutdown()
	Abort()
	Snapshot() counters.Snapshot
	// SnapshotInto is Snapshot into a snapshot whose maps it may reuse,
	// for a worker's reports after each batch.
	SnapshotInto(*counters.Snapshot)
}

// App is what the run modes are handed by main: how to read the
// configuration and how to build the pipeline. The process layer knows
// nothing else of the daemon.
type App struct {
	// Args is the daemon's command line, which workers are started with.
	Args []string
	// Load reads the configuration again, for a reload.
	Load func() (*conf.Config, error)
	// Check verifies, before a new generation of workers starts, what
	// each would otherwise refuse at start: the validation --check-config
	// and every start run.
	Check func(cfg *conf.Config) error
	// New builds a pipeline on already listening sockets.
	New func(cfg *conf.Config, listeners []int) (Server, error)
	// ServeOne serves the single connection on fd (inetd).
	ServeOne func(cfg *conf.Config, fd int) error
	// Describe is the start-up line's account of how the daemon serves.
	Describe func(cfg *conf.Config) string
	// CgoGoroutines is how many of a server's goroutines spend their time
	// in C calls, each of which wants a P of its own (nil: none).
	CgoGoroutines func(cfg *conf.Config) int
	// Reopen makes the sinks of this process open the files they append
	// to anew, on SIGUSR1 (nil: nothing to do).
	Reopen func()
	// Clients is the table of client sources this process's pipelines
	// fill, which /clients serves (a worker's goes to its supervisor).
	Clients *diagnose.Registry
	// Version is the daemon's version, for nsca_build_info.
	Version string

	reloads counters.Reloads
	serving atomic.Bool // for /readyz: started and not stopping
	// running is the configuration that serves; next, one a reload under
	// way read. Only the goroutine that handles signals uses them.
	running, next *conf.Config
}

// GC targets, as GOGC percentages: how far a process's heap may grow past
// what is live before the next collection; Go's default of 100 also lets a
// heap reach 4 MB before its first. With workers, those heaps add up: at 50
// a worker held 4-7 MB less under 1,000 clients sending at once (the read
// budget's bytes are live there, and the heap grew to twice them), at no
// CPU cost that showed beside the runs' noise. The one process of
// nsca_workers=0 keeps Go's default: at one check per connection, where
// each connection's state is most of the garbage, 50 cost it 2-10 % more
// CPU per check (three back-to-back pairs). The supervisor only decodes the
// workers' reports: at 20 its heap stays near 1 MB instead of growing to 4.
const (
	workerGCPercent     = 50
	supervisorGCPercent = 20
)

// setGCPercent sets the GC target unless GOGC in the environment did.
func setGCPercent(percent int) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(percent)
	}
}

// setProcs sizes GOMAXPROCS for a process serving cfg: its share of the
// CPUs, so that n workers' runtimes do not keep n times as many threads
// spinning for work, plus a P for each goroutine that spends its time in C
// calls, up to one per CPU: nsca_threads_per_worker=1000 must not make a
// thousand Ps (and a GC that runs a quarter of them as mark workers).
// That is the ceiling: the governor (procs.go) keeps one P while the
// process uses little CPU. GOMAXPROCS in the environment still wins, and
// stays as it says.
func (a *App) setProcs(cfg *conf.Config) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	n := cfg.CPUShare()
	if a.CgoGoroutines != nil {
		n += min(a.CgoGoroutines(cfg), runtime.NumCPU())
	}
	governProcs(n)
}

// Fail reports a start-up error at err (on stderr, or in syslog or the
// journal: see failLog) and, for a detached daemon, to the parent still
// waiting on the terminal, and returns exit code 1.
func Fail(err error) int {
	failLog(err.Error())
	glog.Flush()
	ReportStarted(err)
	return 1
}

// signals delivers the signals the daemon acts on. It is set up before the
// port is bound: a signal sent as soon as clients (or systemd) can reach
// us is then queued, not fatal.
func signals() chan os.Signal {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	return sigs
}

// dropPrivileges enters nsca_chroot and becomes nsca_user/nsca_group,
// after the sockets are bound, as stock does.
func dropPrivileges(cfg *conf.Config) error {
	id, err := ResolveIdentity(cfg.User, cfg.Group)
	if err != nil {
		return err
	}
	warning, err := Drop(cfg.Chroot, id)
	if warning != "" {
		glog.Warning(warning)
	}
	return err
}

// acquirePidFile takes pid_file, if set. Another daemon holding it is an
// error; a pid file that cannot be written is not: stock logs that and runs
// without one, and so do we, at err.
func acquirePidFile(cfg *conf.Config) (*PidFile, error) {
	if cfg.PidFile == "" {
		return nil, nil
	}
	p, err := AcquirePidFile(cfg.PidFile)
	switch {
	case errors.Is(err, ErrRunning):
		return nil, fmt.Errorf("conf: %s: %w", cfg.Where("pid_file"), err)
	case err != nil:
		glog.Errorf("conf: %s: %v: running without a pid file, as stock nsca does", cfg.Where("pid_file"), err)
	}
	return p, nil
}

// startStatsFile keeps slot's dir_stats file, if set, once privileges are
// dropped: the file belongs to nsca_user, and a directory that user cannot
// write refuses the start, naming the option.
func startStatsFile(cfg *conf.Config, slot int, snapshot func() counters.Snapshot) (*counters.StatsFile, error) {
	f, err := counters.StartStatsFile(cfg.DirStats, slot, snapshot)
	if err != nil {
		return nil, cfg.PathError("dir_stats", err)
	}
	return f, nil
}

// serveMetrics serves Prometheus metrics at /metrics, liveness at
// /healthz, readiness at /readyz and the sources that clients lists at
// /clients on metrics_address, if set. workers lists the worker processes
// whose process metrics add to this one's (nil: none).
func (a *App) serveMetrics(cfg *conf.Config, snapshot func() counters.Snapshot, workers func() []int, clients http.Handler) {
	a.reloads.Started(processStart)
	if cfg.MetricsAddress == "" {
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", counters.MetricsHandler(counters.Source{
		Snapshot: snapshot,
		Method:   cfg.Method().Name,
		Build:    buildInfo(a.Version),
		Process:  func() counters.ProcessStats { return processStats(workers) },
		Reloads:  &a.reloads,
	}))
	mux.Handle("/healthz", counters.HealthHandler())
	mux.Handle("/readyz", counters.ReadyHandler(a.serving.Load, snapshot))
	mux.Handle("/clients", clients)
	go func() {
		glog.Infof("metrics on http://%s/metrics", cfg.MetricsAddress)
		if err := http.ListenAndServe(cfg.MetricsAddress, mux); err != nil {
			glog.Errorf("metrics_address: %v", err)
		}
	}()
}

// buildInfo is nsca_build_info's labels for this binary.
func buildInfo(version string) counters.BuildInfo {
	b := counters.BuildInfo{Version: version, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				b.Revision = s.Value
			}
		}
	}
	return b
}

// listeners returns systemd's sockets (activated is then true), or n new
// ones bound as the config says (one when n is 0, without SO_REUSEPORT).
// SO_REUSEPORT sockets are bound only on a port nothing else is bound to,
// so that a second daemon refuses to start in both modes alike.
func listeners(cfg *conf.Config, n int) (fds []int, activated bool, err error) {
	if fds := ActivatedListeners(); len(fds) > 0 {
		glog.Infof("using %d socket(s) from systemd socket activation", len(fds))
		return fds, true, nil
	}
	// Either way a port already served is refused with the same words.
	where := func(err error) error { return fmt.Errorf("conf: %s: %w", cfg.Where("server_port"), err) }
	if n > 0 {
		defer lockPort(cfg.ServerPort)()
		if err := CheckPortFree(cfg.ServerAddress, cfg.ServerPort); err != nil {
			return nil, false, where(err)
		}
	}
	for range max(n, 1) {
		fd, err := Listen(cfg.ServerAddress, cfg.ServerPort, n > 0)
		if err != nil {
			return nil, false, where(err)
		}
		fds = append(fds, fd)
	}
	return fds, false, nil
}
