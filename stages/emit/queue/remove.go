package queue

import (
	"fmt"
	"os"
)

// removingSuffix names a queue directory being removed. It is no queue
// name a destination uses, so no one opens or takes it over.
const removingSuffix = ".removing"

// Remove closes the queue and deletes its directory, if no record is left
// unacknowledged; with ErrNotEmpty the queue stays open, after any other
// error it is closed and its directory may remain. The directory is first
// renamed aside while the lock is still held: a Queue opened at the same
// path from then on (another process's) starts a new directory instead of
// having its files deleted under it.
func (q *Queue) Remove() error {
	if n := q.Stats().Records; n > 0 {
		return fmt.Errorf("%w: %d records in %s", ErrNotEmpty, n, q.dir)
	}
	aside := q.dir + removingSuffix
	// What an earlier Remove left, if it died between rename and removal.
	err := os.RemoveAll(aside)
	if err == nil {
		err = os.Rename(q.dir, aside)
	}
	if cerr := q.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.RemoveAll(aside)
	}
	if err != nil {
		return fmt.Errorf("queue: remove %s: %w", q.dir, err)
	}
	return nil
}
