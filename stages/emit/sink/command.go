package sink

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/emit/dialect"
	"nsca_fast/stages/rawsys"
)

// pipeBuf is the largest write the kernel keeps atomic on a pipe; lines are
// grouped into writes no larger than this so that the core never sees half
// a line interleaved with another writer's.
const pipeBuf = rawsys.PipeBuf

// Errors of the command file sink.
var (
	errNoReader = errors.New("sink: command file has no reader (is the monitoring core running?)")
	errMissing  = errors.New("sink: command file does not exist")
	errFull     = errors.New("sink: command file stayed full")
	errBackoff  = errors.New("sink: command file unavailable, retrying later")
	ErrIsDir    = errors.New("sink: command file is a directory")
)

// BackoffError is returned while attempts at the command file wait after a
// failure; it is errBackoff and carries the failure that started the wait.
type BackoffError struct{ Cause error }

func (e *BackoffError) Error() string {
	if e.Cause == nil {
		return errBackoff.Error()
	}
	return errBackoff.Error() + ": " + e.Cause.Error()
}

// Unwrap makes the error both errBackoff and its cause for errors.Is.
func (e *BackoffError) Unwrap() []error {
	if e.Cause == nil {
		return []error{errBackoff}
	}
	return []error{errBackoff, e.Cause}
}

// CommandFile writes external command lines to the core's command file: a
// FIFO normally, or a regular file that already exists (stock never creates
// it). Like stock it opens O_WRONLY|O_NONBLOCK, adding O_APPEND with
// append_to_file, and keeps the file open only with aggregate_writes.
type CommandFile struct {
	Path      string
	Append    bool
	Aggregate bool
	// FullWait bounds how long a full pipe (a slow core) is waited for
	// before the remaining lines go to the fallback.
	FullWait time.Duration
	// Lock takes flock(2) on the command file around each write, for
	// several processes writing one FIFO: a write longer than PIPE_BUF
	// takes more than one write(2) and must not interleave with another's.
	// Such a write (and any write to a regular file) takes LOCK_EX; a
	// write the FIFO takes whole takes LOCK_SH, which writers of those
	// share: two workers' batches never wait for each other.
	Lock bool
	// Reopens, when set, asks the command file kept open to open its path
	// anew (SIGUSR1).
	Reopens *Reopener

	fd     int
	isFIFO bool
	// held tells when the path of a regular file kept open
	// (aggregate_writes) names another file: it was rotated.
	held heldFile
	// congested is set when the pipe stayed full for FullWait, until a write
	// goes through again: meanwhile results do not wait for it, so a slow
	// core costs one FullWait, not one per batch, before the spool takes over.
	congested bool
	// unreadWhenFull is what the core had not read when the pipe stayed
	// full: congestion ends once it has read below that.
	unreadWhenFull int
	retry          Backoff
	// lastErr is why the command file last failed, given with errBackoff
	// while attempts wait, so a log line never hides the cause.
	lastErr  error
	lines    lineBuf
	lastKind string
	// lossy counts the lines delivered in a lossy form of the dialect.
	lossy *atomic.Uint64
}

// UseDialect makes the command file escape outputs in d (command_file_dialect)
// and count in lossy the results delivered in a lossy form.
func (c *CommandFile) UseDialect(d dialect.Dialect, lossy *atomic.Uint64) {
	c.lines.dialect, c.lossy = d, lossy
}

// NewCommandFile returns a sink for path; nothing is opened until the first write.
func NewCommandFile(path string, appendToFile, aggregate bool) *CommandFile {
	return &CommandFile{Path: path, Append: appendToFile, Aggregate: aggregate, FullWait: time.Second, fd: -1, lastKind: "fifo",
		retry: Backoff{First: 100 * time.Millisecond, Max: 5 * time.Second}}
}

// Name is "fifo" or "file" after the kind of command file last opened, so the
// counters tell an operator where results actually went.
func (c *CommandFile) Name() string { return c.lastKind }

// Location is the command file's path, for log lines.
func (c *CommandFile) Location() string { return c.Path }

func (c *CommandFile) open() error {
	if c.fd >= 0 {
		return nil
	}
	if c.retry.Left() > 0 {
		return &BackoffError{Cause: c.lastErr}
	}
	flags := unix.O_WRONLY | unix.O_NONBLOCK | unix.O_CLOEXEC
	if c.Append {
		flags |= unix.O_APPEND
	}
	var fd int
	var err error
	c.held.opening(c.Reopens)
	for {
		fd, err = unix.Open(c.Path, flags, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		err = c.openError(err)
		c.failed(err)
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err == nil {
		c.isFIFO = st.Mode&unix.S_IFMT == unix.S_IFIFO
		c.held.record(&st)
	}
	c.lastKind = "file"
	if c.isFIFO {
		c.lastKind = "fifo"
	}
	c.fd = fd
	c.retry.Succeeded()
	c.lastErr = nil
	return nil
}

// openError names why the command file could not be opened.
func (c *CommandFile) openError(err error) error {
	switch err {
	case unix.ENXIO:
		return fmt.Errorf("%w: %s", errNoReader, c.Path)
	case unix.ENOENT:
		return fmt.Errorf("%w: %s", errMissing, c.Path)
	case unix.EISDIR:
		return fmt.Errorf("%w: %s", ErrIsDir, c.Path)
	}
	return fmt.Errorf("sink: open command file %s: %w", c.Path, err)
}

// Probe says, without opening anything, why the command file cannot take
// results now (it does not exist, or is a directory), or nil; for telling
// the operator at start where results will go.
func (c *CommandFile) Probe() error {
	var st unix.Stat_t
	if err := unix.Stat(c.Path, &st); err != nil {
		return c.openError(err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return c.openError(unix.EISDIR)
	}
	return nil
}

// failed starts or lengthens the back-off and remembers why.
func (c *CommandFile) failed(err error) {
	c.lastErr = err
	c.retry.Failed()
}

// revalidate closes a file kept open between batches once the path no
// longer names it. Stock opens the command file for every result, which
// sees a FIFO removed or made anew at once; so does one fstat(2) of a FIFO
// kept open without aggregate_writes per batch: removing the path, or
// renaming another file onto it, leaves the FIFO with no link. That is one
// call on a descriptor, where stat(2) of the path walks it and open, fstat
// and close cost three. A regular file is opened per batch, unless
// aggregate_writes keeps it open: then a rotation renames it and leaves
// its links, so the path is checked (and Reopen asked for).
func (c *CommandFile) revalidate() {
	if c.fd < 0 {
		return
	}
	switch {
	case c.isFIFO && !c.Aggregate:
		var st unix.Stat_t
		if err := rawsys.Fstat(c.fd, &st); err != nil || st.Nlink == 0 {
			c.closeFD()
		}
	case !c.isFIFO && c.Aggregate:
		if c.held.stale(c.Path, c.Reopens) {
			c.closeFD()
		}
	}
}

func (c *CommandFile) closeFD() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// Write sends the lines for items, grouped into writes of at most PIPE_BUF
// bytes that end on a line boundary. A longer line is written alone.
func (c *CommandFile) Write(items []Item) (int, error) {
	if err := c.begin(); err != nil {
		return 0, err
	}
	var held heldLock
	defer c.end(&held)
	done := 0
	for done < len(items) {
		c.lines.reset()
		for done+len(c.lines.ends) < len(items) {
			c.lines.add(items[done+len(c.lines.ends)])
			if len(c.lines.ends) > 1 && len(c.lines.b) > pipeBuf {
				c.lines.dropLast()
				break
			}
		}
		c.lockFor(len(c.lines.b), &held)
		n, err := c.writeAll(c.lines.b)
		if err != nil {
			if !c.isFIFO {
				// A regular file on a full disk took part of the chunk:
				// those lines are delivered and must not go to the next
				// sink as well, and half a line must not stay.
				var lines int
				var terr error
				if lines, terr = keepWholeLines(c.fd, &c.lines, n); terr != nil {
					err = errors.Join(err, terr)
				}
				done += lines
				countLossy(c.lossy, c.lines.lossyIn(lines))
			}
			c.closeFD()
			c.failed(err)
			return done, err
		}
		done += len(c.lines.ends)
		countLossy(c.lossy, len(c.lines.lossy))
	}
	return done, nil
}

// begin opens the command file for one write; end undoes it.
func (c *CommandFile) begin() error {
	c.revalidate()
	return c.open()
}

// heldLock is the flock one Write holds: on which descriptor, and how.
type heldLock struct{ fd, how int }

// lockFor takes, with Lock, the flock a write of n bytes needs (see
// Lock), converting the one held.
func (c *CommandFile) lockFor(n int, held *heldLock) {
	if !c.Lock {
		return
	}
	how := unix.LOCK_EX
	if c.isFIFO && n <= pipeBuf {
		how = unix.LOCK_SH
	}
	if held.how == how && held.fd == c.fd {
		return
	}
	if lock(c.fd, how) == nil {
		*held = heldLock{fd: c.fd, how: how}
	}
}

// end releases what begin and lockFor took: the lock, if any, and the file
// unless it is kept open between batches. A write that failed closed the
// file, and the lock with it: the number may be another file's by now.
func (c *CommandFile) end(held *heldLock) {
	if held.how != 0 && held.fd == c.fd {
		rawsys.Flock(held.fd, unix.LOCK_UN)
	}
	if !c.Aggregate && !c.isFIFO {
		c.closeFD()
	}
}

// writeAll writes b, waiting up to FullWait for a full pipe to drain, and
// returns how many bytes went out. A write of more than PIPE_BUF bytes (one
// long line) is not atomic, so it is started only once the pipe has room
// for all of it, and once started it is finished: giving up half-way would
// leave a partial line that the core reads glued to the next one, and the
// result would be sent twice.
func (c *CommandFile) writeAll(b []byte) (int, error) {
	if c.congested && c.isFIFO && c.unread() < c.unreadWhenFull {
		// The core has read some of the pipe since it stayed full: it is
		// reading again. Room left over in a pipe nobody reads is no sign of
		// that, so a write that merely fitted does not end the congestion.
		c.congested = false
	}
	wait := c.FullWait
	if c.congested {
		wait = 0
	}
	n, err := c.write(b, time.Now().Add(wait))
	if errors.Is(err, errFull) && !c.congested {
		c.congested = true
		c.unreadWhenFull = c.unread()
	}
	return n, err
}

// unread is how many bytes of the pipe the core has not read yet; a large
// number when that cannot be told, so that it never looks like progress.
func (c *CommandFile) unread() int {
	used, err := unix.IoctlGetInt(c.fd, unix.TIOCINQ)
	if err != nil {
		return int(^uint(0) >> 1)
	}
	return used
}

// lock takes flock(how) on fd, without a blocking system call unless
// another process holds a lock that conflicts: a blocking call that
// waits loses its P to sysmon, which then polls every 20 µs for a while.
func lock(fd, how int) error {
	if err := rawsys.Flock(fd, how|unix.LOCK_NB); err != unix.EWOULDBLOCK {
		return err
	}
	return unix.Flock(fd, how)
}

// writeFD is one write(2): raw into a FIFO, which is non-blocking; normal
// into a regular file, where it may wait for the disk.
func (c *CommandFile) writeFD(b []byte) (int, error) {
	if c.isFIFO {
		return rawsys.Write(c.fd, b)
	}
	return unix.Write(c.fd, b)
}

func (c *CommandFile) write(b []byte, deadline time.Time) (int, error) {
	if c.isFIFO && len(b) > pipeBuf {
		for !c.roomFor(len(b)) {
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("%w for %v: %s", errFull, c.FullWait, c.Path)
			}
			time.Sleep(time.Millisecond)
		}
	}
	var finishBy time.Time // once a long line is started, how long it may take
	written := 0
	reopened := false
	for written < len(b) {
		n, err := c.writeFD(b[written:])
		if n > 0 {
			written += n
			continue
		}
		switch err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			if written > 0 && finishBy.IsZero() {
				finishBy = time.Now().Add(finishLongLine)
				deadline = finishBy
			}
			if !c.waitWritable(deadline) {
				if written > 0 {
					return written, fmt.Errorf("%w: a long line stayed half-written for %v (the core stopped reading): %s", errFull, finishLongLine, c.Path)
				}
				return 0, fmt.Errorf("%w for %v: %s", errFull, c.FullWait, c.Path)
			}
		case unix.EPIPE:
			// The reader went away between our open and this write (the core
			// restarted): reopen once, which also finds the new reader.
			if reopened || written > 0 {
				return written, fmt.Errorf("%w: %s", errNoReader, c.Path)
			}
			reopened = true
			c.closeFD()
			c.retry.Succeeded()
			if err := c.open(); err != nil {
				return 0, err
			}
		default:
			return written, fmt.Errorf("sink: write command file %s: %w", c.Path, err)
		}
	}
	return written, nil
}

// waitWritable waits for room in the pipe until deadline; false once it passed.
func (c *CommandFile) waitWritable(deadline time.Time) bool {
	wait := time.Until(deadline)
	if wait <= 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLOUT}}
	unix.Poll(fds, int(wait/time.Millisecond)+1)
	return true
}

// finishLongLine bounds the wait to complete a long line already started.
const finishLongLine = 10 * time.Second

// roomFor reports whether a write of n bytes surely fits in the pipe now.
// The kernel fills a pipe in pages and does not pack them (a write merges
// into the last page only what is left over a whole number of pages), so
// the bytes not yet read say little about the free pages. Counted at the
// worst, the unread bytes fill twice their pages plus two, and the write
// needs its pages plus one.
func (c *CommandFile) roomFor(n int) bool {
	const page = 4096
	size, err := unix.FcntlInt(uintptr(c.fd), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		return false
	}
	used, err := unix.IoctlGetInt(c.fd, unix.TIOCINQ)
	if err != nil {
		return false
	}
	usedPages := 2*((used+page-1)/page) + 2
	return usedPages+(n+page-1)/page+1 <= size/page
}

// Close closes the command file if it is held open.
func (c *CommandFile) Close() error {
	c.closeFD()
	return nil
}
