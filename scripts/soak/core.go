package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The stand-ins for the monitoring core: a FIFO reader and a spool reader
// that both stall, so that the daemon's back-pressure is exercised.

// fifoCore is the core's FIFO reader: it reads the lines but stalls for
// 2 s out of every 5.
type fifoCore struct {
	mu    sync.Mutex
	lines []string
	stop  chan struct{}
	done  chan struct{}
}

// startFIFOCore opens the FIFO at path and reads it in the background
// until close.
func startFIFOCore(path string) (*fifoCore, error) {
	rfd, err := syscall.Open(path, syscall.O_RDWR, 0) // O_RDWR: never blocks, never sees EOF
	if err != nil {
		return nil, err
	}
	c := &fifoCore{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		lines := readLines(os.NewFile(uintptr(rfd), "fifo"))
		c.follow(lines)
		c.drain(lines)
	}()
	return c, nil
}

// readLines sends the lines of f on the channel it returns, closed when a
// read fails.
func readLines(f *os.File) <-chan string {
	r := bufio.NewReaderSize(f, 1<<16)
	lines := make(chan string, 1024)
	go func() {
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	return lines
}

// follow takes lines, except 2 s out of every 5, until stopped.
func (c *fifoCore) follow(lines <-chan string) {
	start := time.Now()
	for {
		var in <-chan string // nil while stalled: nothing is taken
		if time.Since(start)%(5*time.Second) >= 2*time.Second {
			in = lines
		}
		select {
		case l := <-in:
			c.add(l)
		case <-c.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// drain takes what is left, until no line came for 500 ms.
func (c *fifoCore) drain(lines <-chan string) {
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return
			}
			c.add(l)
		case <-time.After(500 * time.Millisecond):
			return
		}
	}
}

// add keeps a line read; the lock is for readers of lines after close.
func (c *fifoCore) add(l string) {
	c.mu.Lock()
	c.lines = append(c.lines, l)
	c.mu.Unlock()
}

// close stops the reader once it has drained the FIFO.
func (c *fifoCore) close() {
	close(c.stop)
	<-c.done
}

// spoolCore is the core's spool reader: collect takes the finished files
// (a body and its .ok marker) and removes them.
type spoolCore struct {
	dir    string
	bodies []string
}

// collect takes only files with their .ok marker: the daemon writes it
// last, so a body without one may still be being written.
func (s *spoolCore) collect() {
	entries, _ := os.ReadDir(s.dir)
	for _, ent := range entries {
		name := ent.Name()
		if !strings.HasSuffix(name, ".ok") {
			continue
		}
		base := filepath.Join(s.dir, strings.TrimSuffix(name, ".ok"))
		b, err := os.ReadFile(base)
		if err != nil {
			continue
		}
		s.bodies = append(s.bodies, string(b))
		os.Remove(base)
		os.Remove(base + ".ok")
	}
}
