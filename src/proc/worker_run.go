package proc

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/golang/glog"

	"nsca_fast/conf"
)

// reportInterval is how often a worker sends its counters to the
// supervisor when no batch was delivered (gauges still change).
const reportInterval = time.Second

// RunWorker is one worker process of a supervisor: the whole pipeline on
// the listening socket it inherited, reporting to the supervisor.
func (a *App) RunWorker(cfg *conf.Config, w *Worker) int {
	// The supervisor reloads by replacing workers (ReplaceSignal) and
	// forwards the operator's SIGINT as SIGTERM, so a worker listens to
	// those two (a SIGTERM after either aborts the drain) and to the
	// supervisor's death, which only ever drains. A log line written to a
	// pipe whose reader died must not end the drain either.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	a.setProcs(cfg)
	setGCPercent(workerGCPercent)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, ReplaceSignal, ParentDeathSignal)
	onReopenSignal(a.reopen)
	switch {
	case w.Syslog:
		if err := StderrToSyslog(cfg.LogFacility); err != nil {
			return Fail(err)
		}
	case OnJournal():
		if err := StderrToJournal(); err != nil {
			return Fail(err)
		}
	}
	if err := dropPrivileges(cfg); err != nil {
		return Fail(err)
	}
	srv, err := a.New(cfg, []int{w.Listener()})
	if err != nil {
		return Fail(err)
	}
	stats, err := startStatsFile(cfg, w.Slot, srv.Snapshot)
	if err != nil {
		srv.Abort()
		return Fail(err)
	}
	defer stats.Stop()
	orphaned := make(chan os.Signal, 1)
	OrphanWatch(func() { orphaned <- ParentDeathSignal })
	go workerSignals(w.Slot, srv, sigs, orphaned)
	stop := make(chan struct{})
	poke := w.ReportEvery(srv.SnapshotInto, reportInterval, stop)
	// Counters the supervisor reads as they count need no report after
	// each batch; the reports every interval carry the gauges they lack.
	if p, ok := srv.(interface{ OnProgress(func()) }); ok && !w.Counters().Taken() {
		p.OnProgress(poke)
	}
	// Counters first: the supervisor's /metrics shows every series from
	// the moment the worker serves.
	w.Report(srv.Snapshot())
	w.ServeClients(a.Clients)
	w.Ready()
	err = srv.Run()
	close(stop)
	<-w.Reported()
	w.HandOverClients()
	if err != nil {
		glog.Errorf("worker %d: %v", w.Slot, err)
		return 1
	}
	return 0
}

// workerSignals is a worker's one shutdown path: the first SIGTERM or
// ReplaceSignal drains (the latter as replaced by a reload), a SIGTERM
// after it aborts the drain; the supervisor's death (its parent-death
// signal, or the orphan watch) only drains.
func workerSignals(slot int, srv Server, sigs, orphaned <-chan os.Signal) {
	draining := false
	for {
		var sig os.Signal
		select {
		case sig = <-sigs:
		case sig = <-orphaned:
		}
		switch {
		case sig == ParentDeathSignal:
			glog.Errorf("worker %d: the supervisor is gone; draining", slot)
			srv.Shutdown()
		case draining && sig == ReplaceSignal:
			// Only ever sent once, and never an abort.
		case draining:
			srv.Abort()
		case sig == ReplaceSignal:
			draining = true
			replace(srv)
		default:
			draining = true
			srv.Shutdown()
		}
	}
}

// RunInetd serves the single connection inetd passes on stdin, logging to
// syslog unless foreground keeps stderr (stderr may be the client's socket).
func (a *App) RunInetd(cfg *conf.Config, foreground bool) int {
	if !foreground {
		if err := StderrToSyslog(cfg.LogFacility); err != nil {
			return Fail(err)
		}
	}
	if err := dropPrivileges(cfg); err != nil {
		return Fail(err)
	}
	fd, err := syscall.Dup(0)
	if err != nil {
		return Fail(err)
	}
	if err := a.ServeOne(cfg, fd); err != nil {
		return Fail(err)
	}
	return 0
}
