package proc

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/golang/glog"

	"nsca_fast/conf"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/diagnose"
)

// RunSupervisor runs nsca_workers worker processes and supervises them. It
// keeps its privileges, to read the configuration again on SIGHUP and to
// start workers that enter nsca_chroot; it never touches client data.
func (a *App) RunSupervisor(cfg *conf.Config) int {
	sigs := signals()
	setGCPercent(supervisorGCPercent)
	if _, err := ResolveIdentity(cfg.User, cfg.Group); err != nil {
		return Fail(err)
	}
	pid, err := acquirePidFile(cfg)
	if err != nil {
		return Fail(err)
	}
	defer pid.Remove()
	lfds, activated, err := listeners(cfg, cfg.Workers)
	if err != nil {
		return Fail(err)
	}
	exe, err := os.Executable()
	if err != nil {
		return Fail(err)
	}
	sup := &Supervisor{
		// Workers parse the daemon's own command line, in the foreground:
		// the supervisor has detached already.
		Spawner:     &ExecSpawner{Path: exe, Args: append([]string{"-f"}, a.Args...), Syslog: Detached()},
		Listeners:   lfds,
		Workers:     cfg.Workers,
		StopTimeout: time.Duration(cfg.ConnectionTimeout)*time.Second + 10*time.Second,
		OnStop:      func() { a.serving.Store(false) },
	}
	a.running = cfg
	sup.OnReload = func(err error) {
		a.reloaded(err, fmt.Sprintf("%d new workers serve, the previous ones finish their connections", sup.Workers))
		if err == nil {
			sup.SpreadByLoad(a.running.WorkersSpread == conf.SpreadLoad)
		}
	}
	onReopenSignal(func() {
		glog.Infof("SIGUSR1: the workers open the files they append to anew")
		sup.Signal(syscall.SIGUSR1)
	})
	if !activated {
		// systemd's socket is shared by all workers; our own are one per
		// worker, and the kernel can be told which of them to serve.
		sup.Sockets = PortSockets{Address: cfg.ServerAddress, Port: cfg.ServerPort}
		if cfg.WorkersSpread == conf.SpreadLoad {
			sup.Spreader = NewSpreader()
		}
	}
	if err := sup.Start(); err != nil {
		return Fail(err)
	}
	glog.Infof("%s, %d worker processes %v", a.Describe(cfg), cfg.Workers, sup.Pids())
	ReportStarted(nil)
	Notify("READY=1")
	stopStats := make(chan struct{})
	go counters.ReportEvery(sup.Stats, time.Duration(cfg.StatsInterval)*time.Second, stopStats)
	a.serveMetrics(cfg, sup.Stats, sup.Pids, diagnose.Handler(sup.Clients))
	a.serving.Store(true)
	sup.Serve(sigs, a.reloadWorkers)
	close(stopStats)
	snap := sup.Stats()
	glog.Infof("stopped: %s", snap.Line(snap, 0))
	return 0
}

// reloadWorkers reads the configuration on disk and, if it is good, says
// how many workers the next generation has.
func (a *App) reloadWorkers(running int) (int, error) {
	cfg, err := a.Load()
	if err != nil {
		return 0, err
	}
	a.loaded(cfg)
	for _, w := range cfg.Warnings {
		glog.Warning(w)
	}
	if err := a.Check(cfg); err != nil {
		return 0, err
	}
	if cfg.Workers == 0 {
		glog.Warningf("SIGHUP: nsca_workers=0 (one process) takes effect at the next restart; keeping %d workers", running)
		return running, nil
	}
	return cfg.Workers, nil
}

// Serve runs the supervisor's side of the daemon's life on its own
// goroutine until the workers have drained: it handles worker exits and
// restarts, reloads on SIGHUP (reload checks the configuration and says
// how many workers the new generation has), drains on the first SIGTERM
// or SIGINT and makes the workers abort their drain on a second one.
func (s *Supervisor) Serve(sigs <-chan os.Signal, reload func(running int) (int, error)) {
	// A reload may turn the Spreader on, so its ticker runs with the
	// sockets, not with it.
	var spreadTick <-chan time.Time
	if s.Sockets != nil {
		t := time.NewTicker(spreadInterval)
		defer t.Stop()
		spreadTick = t.C
	}
	for {
		select {
		case ev := <-s.Events():
			ev()
		case now := <-spreadTick:
			s.spread(now)
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				s.hup(reload, 0)
				continue
			}
			s.retry = nil
			Notify("STOPPING=1")
			if s.OnStop != nil {
				s.OnStop()
			}
			glog.Infof("%v: stopping the workers", sig)
			s.drain(sigs)
			return
		}
	}
}

// errKilledStarting is a new worker that a signal ended before it served:
// an operator's kill -9 in the same second as the SIGHUP, the OOM killer;
// not the configuration, which a worker refuses with an exit status.
var errKilledStarting = errors.New("proc: a signal ended a new worker before it served")

// A reload that a signal to one of its new workers failed is tried again
// after reloadRetryDelay, at most reloadRetries times, unless a newer
// SIGHUP comes first. Once was not enough: a kill -9 in the same second as
// a SIGHUP left the daemon on its old configuration, twice (issue 34).
const (
	reloadRetries    = 3
	reloadRetryDelay = time.Second
)

// reloadRetry is one pending retry; Serve forgets it when a newer SIGHUP
// or a stop comes, and the timer's event then finds it is not s.retry.
type reloadRetry struct{ attempt int }

// hup reloads for a SIGHUP, whose reload has been tried attempt times
// before; it tells OnReload only how the last attempt ended.
func (s *Supervisor) hup(reload func(running int) (int, error), attempt int) {
	s.retry = nil
	Notify(Reloading())
	defer Notify("READY=1")
	err := s.reloadWith(reload)
	if errors.Is(err, errKilledStarting) && attempt < reloadRetries {
		s.retryReload(reload, attempt+1, err)
		return
	}
	if err != nil {
		glog.Errorf("SIGHUP: keeping the running configuration: %v", err)
	}
	if s.OnReload != nil {
		s.OnReload(err)
	}
}

// retryReload has the reload that failed with err tried again shortly, on
// Serve's goroutine: by then the workers' restarts are done.
func (s *Supervisor) retryReload(reload func(running int) (int, error), attempt int, err error) {
	delay := reloadRetryDelay
	if s.retryDelay > 0 {
		delay = s.retryDelay
	}
	glog.Warningf("SIGHUP: %v; trying the reload again in %v (%d of %d)", err, delay, attempt, reloadRetries)
	r := &reloadRetry{attempt: attempt}
	s.retry = r
	time.AfterFunc(delay, func() {
		s.events <- func() {
			if s.retry == r {
				s.hup(reload, r.attempt)
			}
		}
	})
}

func (s *Supervisor) reloadWith(reload func(running int) (int, error)) error {
	n, err := reload(s.Workers)
	if err != nil {
		return err
	}
	return s.Reload(n)
}

// drain stops every worker; a second signal while they drain makes them
// abort their drain.
func (s *Supervisor) drain(sigs <-chan os.Signal) {
	stopped := make(chan struct{})
	go func() {
		s.Stop()
		close(stopped)
	}()
	for {
		select {
		case ev := <-s.Events():
			ev()
		case sig := <-sigs:
			if sig != syscall.SIGHUP {
				glog.Warningf("%v again: the workers abort their drain", sig)
				s.Signal(syscall.SIGTERM)
			}
		case <-stopped:
			return
		}
	}
}

// slotFailure is a slot's last worker death and the delay its restart got.
type slotFailure struct {
	at    time.Time
	delay time.Duration
}

// Restart back-off: a slot's worker that dies within backoffReset of the
// slot's previous death waits twice as long as the last time before it is
// restarted, from backoffFirst up to backoffMax; one that dies later is
// restarted at once.
const (
	backoffReset = 30 * time.Second
	backoffFirst = 100 * time.Millisecond
	backoffMax   = 10 * time.Second
)

// restartDelay is the wait before restarting a worker that died now, given
// its slot's last failure. It counts from that failure, not from the
// process's start: every reload starts new processes, and with reloads
// less than backoffReset apart no process would ever live long enough to
// reset it.
func restartDelay(last slotFailure, failedBefore bool, now time.Time) time.Duration {
	switch {
	case !failedBefore || now.Sub(last.at) > backoffReset:
		return 0
	case last.delay == 0:
		return backoffFirst
	default:
		return min(last.delay*2, backoffMax)
	}
}

func (s *Supervisor) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}
