package sink

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/golang/glog"

	"nsca_fast/conf"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/queue"
)

// WorkerSlot is this process's worker slot (nsca_workers > 0), or -1 in
// the daemon's only process. main sets it before any destination is
// built: each worker process has durable queues of its own, in
// queue_directory/<sink>-<slot>, since a queue directory is held by one
// process at a time. A worker restarted in its slot takes over its
// predecessor's queue.
var WorkerSlot = -1

// QueueDir is the durable queue directory of the named remote sink in this
// process (see WorkerSlot).
func QueueDir(cfg *conf.Config, name string) string {
	if WorkerSlot >= 0 {
		name = fmt.Sprintf("%s-%d", name, WorkerSlot)
	}
	return filepath.Join(cfg.QueueDirectory, name)
}

// leftBehindDirs lists the durable queue directories of the named sink in
// queue_directory that no process of cfg owns and this process takes
// over, each taken by exactly one process: a single process (WorkerSlot
// -1) takes every <sink>-<slot>; with nsca_workers=n, slot s takes
// <sink>-<j> for each j >= n with j mod n = s, and slot 0 also takes the
// single process's <sink>.
func leftBehindDirs(cfg *conf.Config, name string) ([]string, error) {
	return queueDirs(cfg, func(dir string) bool { return leftBehindBy(dir, name, WorkerSlot, cfg.Workers) })
}

// queueDirs lists the directories in queue_directory whose names keep
// accepts; none when it does not exist.
func queueDirs(cfg *conf.Config, keep func(dir string) bool) ([]string, error) {
	entries, err := os.ReadDir(cfg.QueueDirectory)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("sink: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && keep(e.Name()) {
			dirs = append(dirs, filepath.Join(cfg.QueueDirectory, e.Name()))
		}
	}
	return dirs, nil
}

// leftBehindBy reports whether the queue directory dir of the named sink
// is one that the process in slot (-1: the only process) of a daemon with
// the given nsca_workers takes over.
func leftBehindBy(dir, name string, slot, workers int) bool {
	if dir == name {
		return slot == 0
	}
	digits, ok := strings.CutPrefix(dir, name+"-")
	if !ok {
		return false
	}
	j, err := strconv.Atoi(digits)
	if err != nil || j < 0 || strconv.Itoa(j) != digits {
		return false
	}
	if slot < 0 {
		return true
	}
	return workers > 0 && j >= workers && j%workers == slot
}

// warnStranded logs each durable queue directory of the named remote sink,
// which cfg does not have, that still holds results (see WarnStranded):
// <sink>, or <sink>-<slot> of any worker slot.
func warnStranded(cfg *conf.Config, name, option string) {
	dirs, _ := queueDirs(cfg, func(dir string) bool { return dir == name || leftBehindBy(dir, name, -1, 0) })
	for _, dir := range dirs {
		if n, _, err := queue.Pending(dir); err == nil && n > 0 {
			glog.Warningf("sink: %s holds %d bytes of results queued for %s, which this configuration does not have (%s is not set): nothing delivers them; nsca -c %s --replay %s sends them to the destinations that are set",
				dir, n, name, option, cfg.File, dir)
		}
	}
}

// durableFor puts the durable queue in front of a remote sink when
// queue_directory is set; otherwise it returns s.
func durableFor(cfg *conf.Config, s Sink, stats *counters.Stats, log *counters.RateLog) (Sink, error) {
	if cfg.QueueDirectory == "" {
		return s, nil
	}
	fsync, err := queue.ParseFsync(cfg.QueueFsync)
	if err != nil {
		s.Close()
		return nil, err
	}
	name := s.Name()
	d, err := NewDurable(s, DurableConfig{Dir: QueueDir(cfg, name), MaxBytes: int64(cfg.QueueMaxBytes), Fsync: fsync, Stats: stats, Log: log,
		LeftBehind: func() ([]string, error) { return leftBehindDirs(cfg, name) }})
	if err != nil {
		s.Close()
		return nil, err
	}
	return d, nil
}
