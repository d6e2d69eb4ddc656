// Command gofloor is ../shared/bench/floor_server.c written in Go, to tell
// what the Go runtime costs a trickling check from what the daemon's
// pipeline costs it (issue 36). Like floor_server it accepts, writes a
// 132-byte init packet, reads 4304-byte packets without decoding them,
// writes one line per packet into the command FIFO (held open) and closes;
// it serves on 127.0.0.1 only, and SIGTERM ends it.
//
//	gofloor MODE PORT FIFO
//
// MODE is how it waits and where the FIFO write happens:
//
//   - blocking: one thread blocked in epoll_wait(2), as floor_server.c.
//   - poller: one goroutine parked in Go's network poller on the daemon's
//     own epoll set (frontend.EpollSet, the reader's way), every system
//     call made through the daemon's rawsys, the FIFO write as soon as a
//     packet is read.
//   - late: poller, with the FIFO writes of a wake-up made after its
//     accepts and init packets, as when a hand-off defers them.
//   - handoff: poller, with each packet passed through three goroutines
//     over bounded channels before the last writes the FIFO (the daemon's
//     read → decrypt → validate → emit).
//
// Run it with GOMAXPROCS=1, the daemon's choice at a trickle.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/frontend"
	"nsca_fast/stages/rawsys"
)

const (
	packetSize = 4304
	initSize   = 132
)

var commandLine = []byte("[0] PROCESS_SERVICE_CHECK_RESULT;h;s;0;floor\n")

// server is one gofloor: its listening socket, epoll set and FIFO, and what
// each open connection has sent so far.
type server struct {
	mode     string
	listener int
	ep       *frontend.EpollSet
	fifo     int
	got      map[int]int
	buf      []byte
	events   []unix.EpollEvent
	// pending counts the packets whose FIFO line is deferred (late) or
	// handed on (handoff is the channel).
	pending int
	handoff chan struct{}
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: gofloor blocking|poller|late|handoff PORT FIFO")
		os.Exit(2)
	}
	s, err := newServer(os.Args[1], os.Args[2], os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gofloor:", err)
		os.Exit(1)
	}
	switch s.mode {
	case "blocking":
		s.serveBlocking()
	case "poller", "late", "handoff":
		s.servePoller()
	default:
		fmt.Fprintln(os.Stderr, "gofloor: unknown mode", s.mode)
		os.Exit(2)
	}
}

func newServer(mode, port, fifoPath string) (*server, error) {
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	s := &server{mode: mode, got: map[int]int{}, buf: make([]byte, 65536), events: make([]unix.EpollEvent, 256)}
	if s.fifo, err = unix.Open(fifoPath, unix.O_WRONLY|unix.O_CLOEXEC, 0); err != nil {
		return nil, err
	}
	if s.listener, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
		return nil, err
	}
	unix.SetsockoptInt(s.listener, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err = unix.Bind(s.listener, &unix.SockaddrInet4{Port: p, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return nil, err
	}
	if err = unix.Listen(s.listener, 4096); err != nil {
		return nil, err
	}
	if s.ep, err = frontend.NewEpollSet(); err != nil {
		return nil, err
	}
	if err = s.ep.Add(s.listener); err != nil {
		return nil, err
	}
	if mode == "handoff" {
		s.handoff = startHandoff(s.fifo)
	}
	return s, nil
}

// startHandoff runs the three goroutines a packet crosses in handoff mode
// and returns the first one's input.
func startHandoff(fifo int) chan struct{} {
	in := make(chan struct{}, 64)
	src := in
	for range 2 {
		out := make(chan struct{}, 64)
		go func(in <-chan struct{}, out chan<- struct{}) {
			for v := range in {
				out <- v
			}
		}(src, out)
		src = out
	}
	go func(in <-chan struct{}) {
		for range in {
			rawsys.Write(fifo, commandLine)
		}
	}(src)
	return in
}

// serveBlocking waits in epoll_wait(2) itself, holding its thread (and,
// at one P, the runtime) while it waits.
func (s *server) serveBlocking() {
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(s.ep.FD()), uintptr(unsafe.Pointer(&s.events[0])), uintptr(len(s.events)), 200, 0, 0)
		if e != 0 {
			n = 0
		}
		s.round(int(n))
	}
}

// servePoller parks in Go's poller until the epoll set is readable, then
// polls it without waiting, as the daemon's reader does.
func (s *server) servePoller() {
	for {
		n, err := s.ep.Wait(s.events, time.Hour)
		if err != nil {
			panic(err)
		}
		s.round(n)
	}
}

// round serves the n events of one wait.
func (s *server) round(n int) {
	for _, ev := range s.events[:n] {
		if int(ev.Fd) == s.listener {
			s.acceptAll()
		} else {
			s.readAll(int(ev.Fd))
		}
	}
	for ; s.pending > 0; s.pending-- {
		rawsys.Write(s.fifo, commandLine)
	}
}

func (s *server) acceptAll() {
	var initPacket [initSize]byte
	for {
		fd, _, err := rawsys.Accept4(s.listener, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return
		}
		rawsys.Write(fd, initPacket[:])
		if s.ep.Add(fd) != nil {
			rawsys.Close(fd)
			continue
		}
		s.got[fd] = 0
	}
}

func (s *server) readAll(fd int) {
	for {
		r, err := rawsys.Read(fd, s.buf)
		switch {
		case err == nil && r > 0:
			got := s.got[fd] + r
			for ; got >= packetSize; got -= packetSize {
				s.packet()
			}
			s.got[fd] = got
		case err == unix.EAGAIN:
			return
		default:
			delete(s.got, fd)
			rawsys.Close(fd)
			return
		}
	}
}

// packet is what a whole packet leads to, by mode.
func (s *server) packet() {
	switch s.mode {
	case "late":
		s.pending++
	case "handoff":
		s.handoff <- struct{}{}
	default:
		rawsys.Write(s.fifo, commandLine)
	}
}
