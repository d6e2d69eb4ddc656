package main

import (
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// openIdle opens n connections that read their init packet and then send
// nothing, 64 at a time.
func openIdle(addr string, n int, timeout time.Duration, log *os.File) []*net.TCPConn {
	if n == 0 {
		return nil
	}
	var (
		mu    sync.Mutex
		conns = make([]*net.TCPConn, 0, n)
		next  atomic.Int64
		fails atomic.Int64
		wg    sync.WaitGroup
	)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				c, _, err := dialRaw(addr, timeout)
				if err != nil {
					if fails.Add(1) == 1 {
						fmt.Fprintf(log, "nsca-bench: idle connection: %v\n", err)
					}
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if f := fails.Load(); f > 0 {
		fmt.Fprintf(log, "nsca-bench: %d of %d idle connections failed\n", f, n)
	}
	return conns
}

// countOpen counts the idle connections the server has not closed: a
// non-blocking peek that would block means open, EOF or an error closed.
func countOpen(conns []*net.TCPConn) int {
	open := 0
	var b [1]byte
	for _, c := range conns {
		rc, err := c.SyscallConn()
		if err != nil {
			continue
		}
		alive := false
		rc.Control(func(fd uintptr) {
			_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			alive = err == unix.EAGAIN
		})
		if alive {
			open++
		}
	}
	return open
}
