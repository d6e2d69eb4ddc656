package sink

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Errors of the checks (Checker) of the local sinks.
var (
	errNoSpace  = errors.New("sink: no space left on the file system")
	errNoInodes = errors.New("sink: no free inode left on the file system")
)

// freeSpace says whether the file system holding path has a block free
// (for root, reserved blocks count: it may write them) and, with
// needInode, an inode free for a new file. A file system that reports no
// inode count (Files == 0) has no such limit.
func freeSpace(path string, needInode bool) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fmt.Errorf("sink: statfs %s: %w", path, err)
	}
	free := st.Bavail
	if unix.Geteuid() == 0 {
		free = st.Bfree
	}
	if free == 0 {
		return fmt.Errorf("%w: %s", errNoSpace, path)
	}
	if needInode && st.Files > 0 && st.Ffree == 0 {
		return fmt.Errorf("%w: %s", errNoInodes, path)
	}
	return nil
}

// Check says whether a write could succeed now: the command file is
// there (Probe), opens (a FIFO has a reader), and a FIFO has room for a
// PIPE_BUF write, a regular file a block free on its file system. It
// opens the file as a write would, regardless of the back-off, which it
// ends when the answer is yes and leaves as it was otherwise, so that
// checking costs no longer waits.
func (c *CommandFile) Check() error {
	if err := c.Probe(); err != nil {
		return err
	}
	wait, lastErr := c.retry, c.lastErr
	c.retry.Succeeded()
	if err := c.checkOpen(); err != nil {
		c.retry, c.lastErr = wait, lastErr
		return err
	}
	return nil
}

// checkOpen opens the command file as begin does and looks for room.
func (c *CommandFile) checkOpen() error {
	c.revalidate()
	if err := c.open(); err != nil {
		return err
	}
	if c.isFIFO {
		// Kept open, as a write keeps a FIFO open.
		if !c.roomFor(pipeBuf) {
			return fmt.Errorf("%w: %s", errFull, c.Path)
		}
		return nil
	}
	if !c.Aggregate {
		defer c.closeFD()
	}
	return freeSpace(c.Path, false)
}

// Check says whether the spool could take a result now: its waiting queue
// has room, or its directory is writable with a block and an inode free.
func (s *Spool) Check() error {
	if s.files != nil && len(s.queue) >= s.queueLimit {
		return fmt.Errorf("%w (%d files, %d waiting)", errSpoolFull, s.maxFiles, len(s.queue))
	}
	if err := unix.Access(s.Dir, unix.W_OK); err != nil {
		return fmt.Errorf("%w: %s: %w", errSpool, s.Dir, err)
	}
	return freeSpace(s.Dir, true)
}

// Check says whether the dump file could take lines now: it is writable,
// or its directory is when it does not exist yet, with a block free.
func (d *Dump) Check() error {
	err := unix.Access(d.Path, unix.W_OK)
	if err == unix.ENOENT {
		err = unix.Access(filepath.Dir(d.Path), unix.W_OK)
	}
	if err != nil {
		return fmt.Errorf("sink: alternate dump file %s: %w", d.Path, err)
	}
	return freeSpace(filepath.Dir(d.Path), false)
}

// TakesCommands is true: the command file is where external commands go.
func (c *CommandFile) TakesCommands() bool { return true }

// TakesCommands is true: the dump file holds command file lines, commands
// as well as results, for an operator to pass on.
func (d *Dump) TakesCommands() bool { return true }
