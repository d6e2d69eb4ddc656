package proc

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/golang/glog"

	"nsca_fast/conf"
	"nsca_fast/stages/counters"
)

// RunSingle serves in this process (nsca_workers=0). SIGHUP builds a new
// server from the re-read configuration on the same listening socket and
// lets the old one drain, so reloading refuses no client.
func (a *App) RunSingle(cfg *conf.Config) int {
	sigs := signals()
	onReopenSignal(func() {
		glog.Infof("SIGUSR1: opening the files appended to anew")
		a.reopen()
	})
	// The pid file first: a second daemon must refuse before it binds, or
	// its SO_REUSEPORT socket would take (and then reset) clients of the
	// running one.
	pid, err := acquirePidFile(cfg)
	if err != nil {
		return Fail(err)
	}
	defer pid.Remove()
	lfds, _, err := listeners(cfg, 0)
	if err != nil {
		return Fail(err)
	}
	if err := dropPrivileges(cfg); err != nil {
		return Fail(err)
	}
	a.setProcs(cfg)
	srv, err := a.New(cfg, lfds)
	if err != nil {
		return Fail(err)
	}
	s := &single{app: a, listeners: lfds}
	if s.stats, err = startStatsFile(cfg, 0, s.totals.Sum); err != nil {
		srv.Abort()
		return Fail(err)
	}
	s.statsDir = cfg.DirStats
	defer func() { s.stats.Stop() }()
	a.serveMetrics(cfg, s.totals.Sum, nil, a.Clients.Handler())
	a.running = cfg
	stopStats := make(chan struct{})
	go counters.ReportEvery(s.totals.Sum, time.Duration(cfg.StatsInterval)*time.Second, stopStats)
	s.start(srv)
	glog.Infof("%s", a.Describe(cfg))
	ReportStarted(nil)
	a.serving.Store(true)
	Notify("READY=1")
	s.serve(sigs)
	close(stopStats)
	snap := s.totals.Sum()
	glog.Infof("stopped: %s", snap.Line(snap, 0))
	return 0
}

// single is the one-process run mode's state: the server that serves, the
// ones still draining, and the counters of them all.
type single struct {
	app       *App
	listeners []int
	current   Server
	running   sync.WaitGroup
	totals    counters.Totals
	stats     *counters.StatsFile // dir_stats's file, nil without one
	statsDir  string
}

func (s *single) start(srv Server) {
	s.current = srv
	s.totals.Add(srv, srv.Snapshot)
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		if err := srv.Run(); err != nil {
			glog.Errorf("%v", err)
		}
		s.totals.Retire(srv, srv.Snapshot())
	}()
}

// serve acts on signals until the last server has drained: SIGHUP reloads,
// the first SIGTERM or SIGINT drains, a second one aborts the drain.
func (s *single) serve(sigs chan os.Signal) {
	stopping := false
	for sig := range sigs {
		switch {
		case sig == syscall.SIGHUP && !stopping:
			Notify(Reloading())
			err := s.reload()
			if err != nil {
				glog.Errorf("SIGHUP: keeping the running configuration: %v", err)
			}
			s.app.reloaded(err, "the previous pipeline finishes its connections")
			Notify("READY=1")
		case sig == syscall.SIGHUP:
		case !stopping:
			stopping = true
			s.app.serving.Store(false)
			Notify("STOPPING=1")
			glog.Infof("%v: stopping: no new connections, draining the pipeline", sig)
			s.current.Shutdown()
			go func() {
				s.running.Wait()
				signal.Stop(sigs) // no delivery may race with the close
				close(sigs)
			}()
		default:
			glog.Warningf("%v again: aborting the drain", sig)
			s.current.Abort()
		}
	}
}

// reload builds a server from the configuration as it is now on disk,
// starts it and lets the previous one drain.
func (s *single) reload() error {
	cfg, err := s.app.Load()
	if err != nil {
		return err
	}
	s.app.loaded(cfg)
	for _, w := range cfg.Warnings {
		glog.Warning(w)
	}
	if cfg.Workers > 0 {
		// Workers need a supervisor that kept root and SO_REUSEPORT sockets;
		// this process may have dropped its privileges, and its socket
		// cannot share the port.
		glog.Warningf("SIGHUP: nsca_workers=%d takes effect at the next restart: a daemon started with nsca_workers=0 goes on serving in one process", cfg.Workers)
	}
	// A dir_stats the new configuration names must take the file before
	// the reload counts as done; the counters carry on in it.
	stats := s.stats
	if cfg.DirStats != s.statsDir {
		if stats, err = startStatsFile(cfg, 0, s.totals.Sum); err != nil {
			return err
		}
	}
	next, err := s.app.New(cfg, s.listeners)
	if err != nil {
		if stats != s.stats {
			stats.Stop()
		}
		return err
	}
	if stats != s.stats {
		s.stats.Stop()
		s.stats, s.statsDir = stats, cfg.DirStats
	}
	s.app.setProcs(cfg)
	prev := s.current
	s.start(next)
	replace(prev)
	return nil
}
