package frontend

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/rawsys"
)

// EpollSet is a reader's epoll instance, itself registered with Go's
// network poller. A reader that finds nothing ready parks its goroutine in
// the poller instead of blocking its thread in epoll_wait: a thread blocked
// in a system call keeps its P until sysmon takes it away (20 µs to 10 ms
// later), so with one P per worker process every other stage would wait for
// that, and with two each hand-off would wake a thread. Parked, the reader
// costs nothing, the scheduler's own epoll_wait wakes it when the set has
// an event, and the thread runs the other stages meanwhile.
type EpollSet struct {
	fd   int
	file *os.File
	raw  syscall.RawConn
	// deadline is the read deadline last set on file; moved only when a
	// wait needs an earlier or a much later one, since each move costs a
	// timer update.
	deadline time.Time
	// The wait in progress: the events it fills, what the last poll found,
	// what is done with it (handle: Serve's caller's, or stop for Wait)
	// and whether handle ended the wait. poll and stop are bound once,
	// because a closure made per wait would be an allocation per wait.
	events []unix.EpollEvent
	n      int
	werr   error
	handle func(n int) (done, drained bool)
	ended  bool
	poll   func(fd uintptr) bool
	stop   func(n int) (done, drained bool)
}

// NewEpollSet makes an epoll instance and registers it with Go's poller.
func NewEpollSet() (*EpollSet, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	// Go's poller registers only descriptors in non-blocking mode;
	// epoll_wait itself is governed by its timeout, not by the flag.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	e := &EpollSet{fd: fd, file: os.NewFile(uintptr(fd), "epoll")}
	e.poll = e.pollOnce
	e.stop = func(int) (bool, bool) { return true, false }
	if e.raw, err = e.file.SyscallConn(); err != nil {
		e.file.Close()
		return nil, err
	}
	return e, nil
}

// Add polls fd for input and hang-up.
func (e *EpollSet) Add(fd int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
	return rawsys.EpollCtl(e.fd, unix.EPOLL_CTL_ADD, fd, &ev)
}

// Remove stops polling fd.
func (e *EpollSet) Remove(fd int) error {
	return rawsys.EpollCtl(e.fd, unix.EPOLL_CTL_DEL, fd, nil)
}

// Wait fills events with what is ready, waiting at most timeout for the
// first; 0 events means the timeout passed.
func (e *EpollSet) Wait(events []unix.EpollEvent, timeout time.Duration) (int, error) {
	if _, err := e.Serve(events, timeout, e.stop); err != nil {
		return 0, err
	}
	return max(e.n, 0), e.werr
}

// Serve waits for events as Wait does, but hands each batch (events[:n])
// to handle inside the wait, until handle reports done (ended true) or
// timeout passes with nothing ready (ended false).
//
// handle also reports whether it drained the batch: every socket read to
// EAGAIN or its end. After a drained batch that did not fill events, Serve
// parks at once, without the empty poll a new Wait makes before it parks:
// at a trickle, one epoll_wait(2) per wake-up instead of two. That is safe
// within one wait only: an event that reaches the set meanwhile is an edge
// the poller keeps for the park, whereas RawRead, as it begins, forgets
// such edges. Any other batch is polled again at once, since a
// level-triggered socket still ready brings no new edge.
func (e *EpollSet) Serve(events []unix.EpollEvent, timeout time.Duration, handle func(n int) (done, drained bool)) (ended bool, err error) {
	e.events, e.handle, e.ended, e.n, e.werr = events, handle, false, 0, nil
	now := time.Now()
	until := now.Add(timeout)
	if d := e.deadline; !d.After(now) || until.Before(d) || until.Sub(d) > timeout/4 {
		e.deadline = until
		e.file.SetReadDeadline(until)
	}
	// Read calls poll first, and again each time the poller reports the
	// set readable.
	err = e.raw.Read(e.poll)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		e.deadline = time.Time{}
		return false, nil
	case err != nil:
		return false, fmt.Errorf("waiting in the poller: %w", err)
	}
	return e.ended, e.werr
}

// pollOnce polls the set (a zero-timeout epoll_wait into the events of
// the wait in progress) and hands what it finds to the wait's handle, as
// long as handle leaves a batch not drained; it reports whether the wait
// is over (handle is done, or an error other than EINTR).
func (e *EpollSet) pollOnce(fd uintptr) bool {
	for {
		e.n, e.werr = rawsys.EpollPoll(int(fd), e.events)
		switch {
		case e.werr == unix.EINTR:
			continue
		case e.werr != nil:
			return true
		case e.n == 0:
			return false
		}
		done, drained := e.handle(e.n)
		if done {
			e.ended = true
			return true
		}
		if drained && e.n < len(e.events) {
			return false
		}
	}
}

// Close releases the instance; the polled descriptors stay open.
func (e *EpollSet) Close() { e.file.Close() }

// FD is the epoll instance's descriptor, for the epoll_ctl calls of a
// caller that polls for more than input (EPOLLOUT, edge-triggered).
func (e *EpollSet) FD() int { return e.fd }
