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
	// The wait in progress: the events it fills and what the last poll
	// found. poll is bound once, because a closure made per wait would be
	// an allocation per wait.
	events []unix.EpollEvent
	n      int
	werr   error
	poll   func(fd uintptr) bool
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
//
// It polls the set once before it parks, in Read: that poll is needed (Read
// forgets, as it begins, an edge the poller reported since the last wait,
// and a level-triggered socket still ready would report none), and one is
// enough: a poll of its own before Read made two empty epoll_wait(2) calls
// per wake-up at a trickle. Parking with no poll at all, after a round that
// read every socket to EAGAIN (the round run inside one Read), saved one
// more, but a burst of clients waited for it: an event that comes during
// the round reaches Go's poller only when a thread polls it, which busy
// CPUs do up to 10 ms later, and p99 latency went from ~90 ms to ~250 ms.
func (e *EpollSet) Wait(events []unix.EpollEvent, timeout time.Duration) (int, error) {
	e.events = events
	now := time.Now()
	until := now.Add(timeout)
	if d := e.deadline; !d.After(now) || until.Before(d) || until.Sub(d) > timeout/4 {
		e.deadline = until
		e.file.SetReadDeadline(until)
	}
	// Read calls poll first, and again each time the poller reports the
	// set readable.
	err := e.raw.Read(e.poll)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		e.deadline = time.Time{}
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("waiting in the poller: %w", err)
	}
	return max(e.n, 0), e.werr
}

// pollOnce is a zero-timeout epoll_wait into the events of the wait in
// progress; it reports whether the wait is over (events, or an error other
// than EINTR).
func (e *EpollSet) pollOnce(fd uintptr) bool {
	e.n, e.werr = rawsys.EpollPoll(int(fd), e.events)
	return e.n != 0 || e.werr != nil && e.werr != unix.EINTR
}

// Close releases the instance; the polled descriptors stay open.
func (e *EpollSet) Close() { e.file.Close() }

// FD is the epoll instance's descriptor, for the epoll_ctl calls of a
// caller that polls for more than input (EPOLLOUT, edge-triggered).
func (e *EpollSet) FD() int { return e.fd }
