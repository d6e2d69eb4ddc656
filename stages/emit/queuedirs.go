package emit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"nsca_fast/stages/emit/durable"
	"nsca_fast/stages/emit/sink"

	"github.com/golang/glog"

	"nsca_fast/conf"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/emit/queue"
)

// queueDir is the durable queue directory of the named remote sink in the
// process of worker slot slot (nsca_workers > 0), or -1 in the daemon's
// only process: each worker process has durable queues of its own, in
// queue_directory/<sink>-<slot>, since a queue directory is held by one
// process at a time. A worker restarted in its slot takes over its
// predecessor's queue.
func queueDir(cfg *conf.Config, slot int, name string) string {
	if slot >= 0 {
		name = fmt.Sprintf("%s-%d", name, slot)
	}
	return filepath.Join(cfg.QueueDirectory, name)
}

// leftBehindDirs lists the durable queue directories of the named sink in
// queue_directory that no process of cfg owns and this process takes
// over, each taken by exactly one process: a single process (slot -1)
// takes every <sink>-<slot>; with nsca_workers=n, slot s takes
// <sink>-<j> for each j >= n with j mod n = s, and slot 0 also takes the
// single process's <sink>.
func leftBehindDirs(cfg *conf.Config, slot int, name string) ([]string, error) {
	return queueDirs(cfg, func(dir string) bool { return leftBehindBy(dir, name, slot, cfg.Workers) })
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
func durableFor(cfg *conf.Config, slot int, s sink.Sink, stats *counters.Stats, log *counters.RateLog) (sink.Sink, error) {
	if cfg.QueueDirectory == "" {
		return s, nil
	}
	fsync, err := queue.ParseFsync(cfg.QueueFsync)
	if err != nil {
		s.Close()
		return nil, err
	}
	name := s.Name()
	d, err := durable.New(s, durable.Config{Dir: queueDir(cfg, slot, name), MaxBytes: int64(cfg.QueueMaxBytes), Fsync: fsync, Stats: stats, Log: log,
		LeftBehind: func() ([]string, error) { return leftBehindDirs(cfg, slot, name) }})
	if err != nil {
		s.Close()
		return nil, err
	}
	return d, nil
}
