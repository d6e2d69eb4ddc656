package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// preparedConn is a connection whose packets were encrypted before the
// measured part of an --ahead run: sending them costs the generator a write
// per packet, so the daemon, not the client's cipher, is the limit.
type preparedConn struct {
	cc    *ClientConn
	first uint64
	pkts  []byte // count packets, back to back
	count int
}

// prepareAhead opens ceil(total/k) connections, reads their init packets
// and encrypts every check each is to send, on as many goroutines as there
// are CPUs. The daemon holds them all open meanwhile: its idle timeout must
// be longer than this takes (ours: connection_timeout; the C++ nsca_fast
// closes after 8 s, so its runs must be small).
func prepareAhead(addr string, c Cipher, total uint64, k int, timeout time.Duration, log *os.File) ([]*preparedConn, error) {
	n := int((total + uint64(k) - 1) / uint64(k))
	out := make([]*preparedConn, n)
	var (
		next     atomic.Int64
		firstErr atomic.Pointer[error]
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || firstErr.Load() != nil {
					return
				}
				cc, err := Dial(addr, c, uint64(i), timeout)
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				first := uint64(i) * uint64(k)
				count := int(min(uint64(k), total-first))
				size := c.PacketSize()
				p := &preparedConn{cc: cc, first: first, count: count, pkts: make([]byte, count*size)}
				for j := range count {
					copy(p.pkts[j*size:], cc.enc.Build(ResultFor(first+uint64(j))))
				}
				out[i] = p
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		for _, p := range out {
			if p != nil {
				p.cc.Close()
			}
		}
		return nil, fmt.Errorf("--ahead: %w", *e)
	}
	fmt.Fprintf(log, "nsca-bench: %d connections with %d checks encrypted ahead in %.1f s\n", n, total, time.Since(start).Seconds())
	return out, nil
}

// send writes the prepared packets, one write per packet as send_nsca
// does, noting each send time, and closes the connection. It returns how
// many were sent.
func (p *preparedConn) send(sent *times, clock func() int64) (int, error) {
	defer p.cc.Close()
	size := len(p.pkts) / p.count
	for j := range p.count {
		if _, err := p.cc.conn.Write(p.pkts[j*size : (j+1)*size]); err != nil {
			return j, err
		}
		sent.set(p.first+uint64(j), clock())
	}
	return p.count, nil
}
