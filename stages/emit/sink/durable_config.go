package sink

import (
	"fmt"
	"path/filepath"

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
	d, err := NewDurable(s, DurableConfig{Dir: QueueDir(cfg, s.Name()), MaxBytes: int64(cfg.QueueMaxBytes), Fsync: fsync, Stats: stats, Log: log})
	if err != nil {
		s.Close()
		return nil, err
	}
	return d, nil
}
