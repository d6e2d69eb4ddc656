package main

import (
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"nsca_fast/stages/codec"
)

// The load: good clients whose every finished check must arrive once, and
// slowloris, garbage and wrong-password clients that must not disturb them.

// load runs the good, slowloris and garbage clients for the duration,
// while the spool reader takes files every second after the first third.
func (s *soak) load() {
	deadline := time.Now().Add(s.duration)
	var wg sync.WaitGroup
	spawn := func(n int, client func(i int, deadline time.Time)) {
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client(i, deadline)
			}()
		}
	}
	spawn(s.good, s.goodClients)
	spawn(s.slow, s.slowloris)
	spawn(s.garbage, s.garbageClients)
	spoolTick := time.NewTicker(time.Second)
	for time.Now().Before(deadline) {
		<-spoolTick.C
		if time.Until(deadline) < s.duration*2/3 {
			s.spoolReader.collect()
		}
	}
	spoolTick.Stop()
	wg.Wait()
}

// goodClients is one good client: a connection after another until the
// deadline, noting the ids of every check a connection finished sending.
func (s *soak) goodClients(_ int, deadline time.Time) {
	for time.Now().Before(deadline) {
		ids, err := goodClient(s.addr, s.perConn, &s.nextID)
		if err != nil {
			s.sendErrs.Add(1)
			continue
		}
		for _, id := range ids {
			s.sentIDs.Store(id, true)
		}
		s.sent.Add(int64(len(ids)))
	}
}

// slowloris holds one connection, writing a byte a second, until the
// deadline or the daemon closes it.
func (s *soak) slowloris(_ int, deadline time.Time) {
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		return
	}
	defer c.Close()
	s.slowConns.Add(1)
	for time.Now().Before(deadline) {
		if _, err := c.Write([]byte{0x42}); err != nil {
			return // closed by the daemon's timeout, as intended
		}
		time.Sleep(time.Second)
	}
}

// garbageClients is client i: random bytes if i is odd, the wrong
// password if even, every 20 ms until the deadline.
func (s *soak) garbageClients(i int, deadline time.Time) {
	for time.Now().Before(deadline) {
		garbageClient(s.addr, i%2 == 0)
		s.garbageConns.Add(1)
		time.Sleep(20 * time.Millisecond)
	}
}

// goodClient sends n XOR-encrypted checks on one connection, as send_nsca
// does, and returns their ids once the connection is closed cleanly.
func goodClient(addr string, n int, nextID *atomic.Int64) ([]int64, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	init := make([]byte, codec.InitSize)
	if _, err := io.ReadFull(c, init); err != nil {
		return nil, err
	}
	iv, ts := init[:codec.IVSize], uint32(init[128])<<24|uint32(init[129])<<16|uint32(init[130])<<8|uint32(init[131])
	var ids []int64
	buf := make([]byte, 0, n*codec.Size)
	for range n {
		id := nextID.Add(1)
		pkt := make([]byte, codec.Size)
		rand.Read(pkt)
		codec.Encode(pkt, codec.Result{Timestamp: ts, ReturnCode: int16(id % 4), Host: "soak-host",
			Service: "soak-svc", Output: fmt.Sprintf("OK soak-id-%d\nsecond line \\ with a backslash", id)})
		codec.XOR(pkt, iv, []byte(password), 0)
		buf = append(buf, pkt...)
		ids = append(ids, id)
	}
	if _, err := c.Write(buf); err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	// The daemon closes after we do; reading to EOF means it took every byte.
	io.Copy(io.Discard, c)
	return ids, nil
}

// garbageClient sends random bytes, or a well-formed packet under the wrong
// password.
func garbageClient(addr string, wrongPassword bool) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	init := make([]byte, codec.InitSize)
	if _, err := io.ReadFull(c, init); err != nil {
		return
	}
	pkt := make([]byte, codec.Size)
	rand.Read(pkt)
	if wrongPassword {
		codec.Encode(pkt, codec.Result{Host: "intruder", Service: "svc", Output: "forged"})
		codec.XOR(pkt, init[:codec.IVSize], []byte("not-the-password"), 0)
	}
	c.Write(pkt)
	io.Copy(io.Discard, c)
}
