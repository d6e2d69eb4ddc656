package sink

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Reopener carries a process's requests to reopen held files to the sinks
// given it (their Reopens field), those of every pipeline the process runs
// (the old one still draining after a reload included).
type Reopener struct {
	asked atomic.Uint64
}

// Reopen makes every sink that keeps a file open between writes (the
// alternate dump file; the command file, when it is a regular file kept
// open by aggregate_writes) and was given r close it and open its path
// anew at its next write. The daemon calls it on SIGUSR1. A rotation that
// renames or removes the file needs no signal: each write checks that the
// path still names the open file (heldFile).
func (r *Reopener) Reopen() { r.asked.Add(1) }

// count is how many reopens were asked for so far; none without r.
func (r *Reopener) count() uint64 {
	if r == nil {
		return 0
	}
	return r.asked.Load()
}

// heldFile is what a sink knows of the file it keeps open, to tell when its
// path names another file (log rotation renamed it, and created a new one
// or not) or a reopen was asked for.
type heldFile struct {
	dev, ino uint64
	asked    uint64 // the reopens asked for when it was opened
}

// opening is called before the path is opened: a Reopen of r from then on
// is for the file about to be opened, or later.
func (h *heldFile) opening(r *Reopener) { h.asked = r.count() }

// opened records the file fd that the path named.
func (h *heldFile) opened(fd int) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		h.record(&st)
	}
}

// record is opened for a caller that has the open file's fstat(2).
func (h *heldFile) record(st *unix.Stat_t) { h.dev, h.ino = st.Dev, st.Ino }

// stale reports whether fd should be closed and path opened again: a
// reopen was asked for (of r), or path names another file or none. It
// costs one stat(2) of the path.
func (h *heldFile) stale(path string, r *Reopener) bool {
	if r.count() != h.asked {
		return true
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return true
	}
	return st.Dev != h.dev || st.Ino != h.ino
}
