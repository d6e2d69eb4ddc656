package counters

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/golang/glog"
)

// StatsFileInterval is how often a statistics file is rewritten: every 5
// seconds, as the C++ nsca_fast does.
const StatsFileInterval = 5 * time.Second

// statsFileEvery is StatsFileInterval, shorter in tests.
var statsFileEvery = StatsFileInterval

// StatsFileName is the name of slot's file in dir_stats, the C++ nsca_fast's.
func StatsFileName(slot int) string { return fmt.Sprintf("nsca-stats-%d.txt", slot) }

// StatsFile keeps the C++ nsca_fast's statistics file of one process (a
// worker, or the single process as slot 0), which sites graph with Munin:
// its name, keys and format are that daemon's. Each version is written
// to a temporary file and renamed into place, so a reader never sees half
// of one.
type StatsFile struct {
	path     string
	pid      int
	started  time.Time
	snapshot func() Snapshot

	stop chan struct{}
	done sync.WaitGroup

	// Owned by the writing goroutine once it runs.
	mine      os.FileInfo // the file as this process last renamed it into place
	prevConns uint64      // connections at the last write, for the rate
	prevAt    time.Time
	failing   bool // the last write failed and was logged
}

// StartStatsFile writes slot's statistics file in dir at once, so that a
// directory the process cannot write refuses the start, and then every
// StatsFileInterval until Stop. An empty dir writes nothing and returns nil,
// on which Stop does nothing.
func StartStatsFile(dir string, slot int, snapshot func() Snapshot) (*StatsFile, error) {
	if dir == "" {
		return nil, nil
	}
	now := time.Now()
	f := &StatsFile{path: filepath.Join(dir, StatsFileName(slot)), pid: os.Getpid(), started: now,
		snapshot: snapshot, stop: make(chan struct{}), prevAt: now}
	if err := f.write(now); err != nil {
		return nil, err
	}
	f.done.Add(1)
	go f.run()
	return f, nil
}

// Stop ends the rewriting and removes the file, unless another process
// (the successor of a reloaded or restarted worker) has replaced it.
func (f *StatsFile) Stop() {
	if f == nil {
		return
	}
	close(f.stop)
	f.done.Wait()
}

func (f *StatsFile) run() {
	defer f.done.Done()
	t := time.NewTicker(statsFileEvery)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			if f.stillMine() {
				os.Remove(f.path)
			}
			return
		case now := <-t.C:
			if f.replaced() {
				glog.Infof("statistics file %s is written by pid %s now; pid %d stops writing it", f.path, f.owner(), f.pid)
				<-f.stop
				return
			}
			err := f.write(now)
			switch {
			case err != nil && !f.failing:
				glog.Errorf("%v (retrying every %v)", err, statsFileEvery)
			case err == nil && f.failing:
				glog.Infof("statistics file %s written again", f.path)
			}
			f.failing = err != nil
		}
	}
}

// ErrStatsFile wraps failures to write a statistics file.
var ErrStatsFile = errors.New("counters: cannot write the statistics file")

// write renders the counters into a temporary file beside the real one and
// renames it into place.
func (f *StatsFile) write(now time.Time) error {
	s := f.snapshot()
	rate := uint64(0)
	if secs := uint64(now.Sub(f.prevAt) / time.Second); secs > 0 && s.Connections >= f.prevConns {
		rate = (s.Connections - f.prevConns) / secs
	}
	text := fmt.Sprintf("[nsca stats]\npid=%d\nprocess_started_at=%d\nfile_created_at=%d\n"+
		"connections_per_sec=%d\nconnections_current=%d\nconnections_counter=%d\n"+
		"report_success=%d\nreport_failed=%d\n",
		f.pid, f.started.Unix(), now.Unix(), rate, max(s.Open, 0), s.Connections, s.TotalEmitted(), s.TotalDropped())
	tmp, err := os.CreateTemp(filepath.Dir(f.path), "."+filepath.Base(f.path)+".*")
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrStatsFile, f.path, err)
	}
	_, err = tmp.WriteString(text)
	if err == nil {
		err = tmp.Chmod(0o644) // Munin's plugins read it as another user
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	var st os.FileInfo
	if err == nil {
		st, err = os.Stat(tmp.Name())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("%w %s: %w", ErrStatsFile, f.path, err)
	}
	f.mine, f.prevConns, f.prevAt = st, s.Connections, now
	return nil
}

// stillMine reports whether the path still names the file this process
// wrote last.
func (f *StatsFile) stillMine() bool {
	st, err := os.Stat(f.path)
	return err == nil && os.SameFile(st, f.mine)
}

// replaced reports whether another process has put its own file at the
// path: a worker's successor writes first, and from then on the file is
// its. A file that is gone (removed by hand, or by a cleaner of /tmp) is
// simply written again.
func (f *StatsFile) replaced() bool {
	st, err := os.Stat(f.path)
	return err == nil && !os.SameFile(st, f.mine)
}

// owner reads the pid line of the file at the path, for the log.
func (f *StatsFile) owner() string {
	var pid int
	if b, err := os.ReadFile(f.path); err == nil {
		fmt.Sscanf(string(b), "[nsca stats]\npid=%d", &pid)
	}
	return fmt.Sprint(pid)
}
