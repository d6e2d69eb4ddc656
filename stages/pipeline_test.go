package stages

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/cgo/mcrypt"
	"nsca_fast/conf"
	"nsca_fast/src/proc"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// glog would otherwise create log files in the temporary directory.
	flag.Set("logtostderr", "true")
	os.Exit(m.Run())
}

const testPassword = "s3cret pass " // trailing blank is part of it, as in nsca.cfg

// testServer is a running pipeline on a real listening socket, writing to a
// regular command file.
type testServer struct {
	t       testing.TB
	srv     *Server
	lfd     int // the listening socket, owned by the caller of New
	addr    string
	cmd     string
	cfg     *conf.Config
	runErr  chan error
	start   time.Time
	stopped bool
	snap    counters.Snapshot
}

func startServer(t testing.TB, mutate func(*conf.Config)) *testServer {
	t.Helper()
	lfd, err := proc.Listen("127.0.0.1", 0, false)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	sa, err := unix.Getsockname(lfd)
	if err != nil {
		unix.Close(lfd)
		t.Fatalf("getsockname: %v", err)
	}
	port := sa.(*unix.SockaddrInet4).Port

	cmd := filepath.Join(t.TempDir(), "nsca.cmd")
	if err := os.WriteFile(cmd, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := conf.Default()
	cfg.ServerAddress = "127.0.0.1"
	cfg.ServerPort = port
	cfg.CommandFile = cmd
	cfg.AppendToFile = true
	cfg.Password = testPassword
	cfg.DecryptionMethod = 0
	cfg.ThreadsPerWorker = 2
	if mutate != nil {
		mutate(cfg)
	}
	if err := cfg.Validate(); err != nil {
		unix.Close(lfd)
		t.Fatalf("config: %v", err)
	}
	srv, err := newStandalone(cfg, []int{lfd})
	if err != nil {
		unix.Close(lfd)
		t.Fatalf("New: %v", err)
	}
	ts := &testServer{t: t, srv: srv, lfd: lfd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, cfg: cfg, runErr: make(chan error, 1), start: time.Now()}
	go func() { ts.runErr <- srv.Run() }()
	t.Cleanup(func() { ts.stop() })
	return ts
}

// stop shuts the server down, waits for Run to return and checks that every
// packet received was either emitted or counted as dropped.
func (ts *testServer) stop() counters.Snapshot {
	t := ts.t
	t.Helper()
	if ts.stopped {
		return ts.snap
	}
	ts.stopped = true
	ts.srv.Shutdown()
	select {
	case err := <-ts.runErr:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		ts.srv.Abort()
		select {
		case <-ts.runErr:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("Run did not return within 10 s of Shutdown")
	}
	unix.Close(ts.lfd)
	ts.snap = ts.srv.stats.Snapshot()
	s := ts.snap
	if s.Received != s.TotalEmitted()+s.TotalDropped() {
		t.Errorf("accounting: received=%d != emitted=%d (%v) + dropped=%d (%v)", s.Received, s.TotalEmitted(), s.Emitted, s.TotalDropped(), s.Dropped)
	}
	if s.Open != 0 {
		t.Errorf("Open = %d after Run returned", s.Open)
	}
	return s
}

var lineRE = regexp.MustCompile(`^\[(\d+)\] (.*)$`)

// lines stops the server and returns the command file's lines without their
// "[time] " prefix, checking that each time is the time of receipt.
func (ts *testServer) lines() []string {
	t := ts.t
	t.Helper()
	ts.stop()
	end := time.Now()
	data, err := os.ReadFile(ts.cmd)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Errorf("command file does not end in a newline: %q", data[max(0, len(data)-40):])
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l == "" {
			continue
		}
		m := lineRE.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("malformed line %q", l)
			continue
		}
		sec, _ := strconv.ParseInt(m[1], 10, 64)
		if sec < ts.start.Unix()-1 || sec > end.Unix()+1 {
			t.Errorf("line time %d outside the test's run [%d, %d]: %q", sec, ts.start.Unix(), end.Unix(), l)
		}
		out = append(out, m[2])
	}
	return out
}

// client plays send_nsca.
type client struct {
	t        *testing.T
	conn     net.Conn
	iv       []byte
	initTime uint32
	encrypt  func([]byte)
	rng      *rand.Rand
}

func dial(t *testing.T, ts *testServer, method int, password string) *client {
	t.Helper()
	return dialVia(t, ts, method, password, nil)
}

// dialVia is dial for a client behind a load balancer: header (a PROXY
// header) is sent before the init packet is awaited.
func dialVia(t *testing.T, ts *testServer, method int, password string, header []byte) *client {
	t.Helper()
	conn, err := net.DialTimeout("tcp", ts.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := conn.Write(header); err != nil {
		t.Fatalf("sending the PROXY header: %v", err)
	}
	init := make([]byte, codec.InitSize)
	if _, err := io.ReadFull(conn, init); err != nil {
		t.Fatalf("reading the init packet: %v", err)
	}
	c := &client{t: t, conn: conn, iv: init[:codec.IVSize], initTime: binary.BigEndian.Uint32(init[codec.IVSize:]), rng: rand.New(rand.NewPCG(rand.Uint64(), 1))}
	if now := uint32(time.Now().Unix()); c.initTime+2 < now || c.initTime > now+2 {
		t.Errorf("init packet time %d, now %d", c.initTime, now)
	}
	switch method {
	case 0:
		c.encrypt = func([]byte) {}
	case 1:
		c.encrypt = func(p []byte) { codec.XOR(p, c.iv, []byte(password), 0) }
	default:
		m, ok := conf.MethodByNumber(method)
		if !ok {
			t.Fatalf("method %d", method)
		}
		mod, err := mcrypt.Open(m.Name)
		if err != nil {
			t.Fatalf("mcrypt.Open(%s): %v", m.Name, err)
		}
		t.Cleanup(mod.Close)
		if err := mod.Init([]byte(password), c.iv); err != nil {
			t.Fatalf("mcrypt Init: %v", err)
		}
		c.encrypt = mod.Encrypt
	}
	return c
}

// packet builds one encrypted packet of size bytes for r, noise-filled as
// send_nsca does. mutate, if set, runs on the plaintext after encoding.
func (c *client) packet(size int, r codec.Result, mutate func([]byte)) []byte {
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(c.rng.UintN(256))
	}
	codec.Encode(p, r)
	if mutate != nil {
		mutate(p)
	}
	c.encrypt(p)
	return p
}

// send writes b in pieces of random size, so packets straddle reads.
func (c *client) send(b []byte) {
	c.t.Helper()
	for len(b) > 0 {
		n := min(len(b), 1+c.rng.IntN(6000))
		if _, err := c.conn.Write(b[:n]); err != nil {
			c.t.Fatalf("write: %v", err)
		}
		b = b[n:]
		if c.rng.IntN(8) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// sendResults encrypts and sends rs as packets of size bytes.
func (c *client) sendResults(size int, rs []codec.Result) {
	c.t.Helper()
	var all []byte
	for _, r := range rs {
		all = append(all, c.packet(size, r, nil)...)
	}
	c.send(all)
}

// waitClosed asserts the server closes the connection.
func (c *client) waitClosed() {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	n, err := c.conn.Read(b[:])
	var ne net.Error
	switch {
	case n > 0:
		c.t.Errorf("server sent a byte after the init packet")
	case errors.As(err, &ne) && ne.Timeout():
		c.t.Errorf("the server did not close the connection within 5 s")
	case err == nil:
		c.t.Errorf("read returned 0, nil")
	}
}

func (c *client) close() { c.conn.Close() }

var escaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)

// want is the command line body stock writes for r (without "[time] ").
func want(r codec.Result) string {
	if r.Service == "" {
		return fmt.Sprintf("PROCESS_HOST_CHECK_RESULT;%s;%d;%s", r.Host, r.ReturnCode, escaper.Replace(r.Output))
	}
	return fmt.Sprintf("PROCESS_SERVICE_CHECK_RESULT;%s;%s;%d;%s", r.Host, r.Service, r.ReturnCode, escaper.Replace(r.Output))
}

// results makes n distinct results for connection conn.
func results(conn, n int, ts uint32) []codec.Result {
	rs := make([]codec.Result, n)
	for i := range rs {
		r := codec.Result{
			Timestamp:  ts,
			ReturnCode: int16(i%4 - 1), // includes -1
			Host:       fmt.Sprintf("host-%d", conn),
			Service:    fmt.Sprintf("svc %d/%d", conn, i),
			Output:     fmt.Sprintf("conn %d check %d; perf=%d", conn, i, i*7),
		}
		switch i % 5 {
		case 1:
			r.Output += "\nsecond line \\ with backslash\n"
		case 2:
			r.Service = "" // host check
			r.Output = fmt.Sprintf("host check %d/%d", conn, i)
		case 3:
			r.Output += " " + strings.Repeat("x", 1000+conn)
		}
		rs[i] = r
	}
	return rs
}

// expectInOrder checks that got holds exactly the results of every
// connection, each connection's in the order sent.
func expectInOrder(t *testing.T, got []string, conns [][]codec.Result) {
	t.Helper()
	type pos struct{ conn, idx int }
	where := map[string]pos{}
	total := 0
	for c, rs := range conns {
		for i, r := range rs {
			w := want(r)
			if _, dup := where[w]; dup {
				t.Fatalf("test bug: duplicate expected line %q", w)
			}
			where[w] = pos{c, i}
			total++
		}
	}
	next := make([]int, len(conns))
	for _, l := range got {
		p, ok := where[l]
		if !ok {
			t.Errorf("unexpected line %.200q", l)
			continue
		}
		if p.idx != next[p.conn] {
			t.Errorf("connection %d: got check %d, want check %d (out of order or duplicated)", p.conn, p.idx, next[p.conn])
		}
		next[p.conn] = p.idx + 1
	}
	for c, rs := range conns {
		if next[c] != len(rs) {
			t.Errorf("connection %d: last check delivered is %d of %d", c, next[c], len(rs))
		}
	}
	if len(got) != total {
		t.Errorf("%d lines, want %d", len(got), total)
	}
}

func TestPipelineMethods(t *testing.T) {
	for _, tc := range []struct {
		method, mode int
	}{
		{0, 1}, {1, 0}, {1, 1},
		{3, 0}, {3, 1}, // tripledes
		{14, 0}, {14, 1}, // rijndael-128
	} {
		t.Run(fmt.Sprintf("method=%d/mode=%d", tc.method, tc.mode), func(t *testing.T) {
			if tc.method >= 2 && tc.mode == 0 && inSubprocess(t) {
				// decryption_mode=0 with libmcrypt crashes the whole
				// process (see TestDecryptPerConnectionMcrypt), so it
				// runs in a child to report a failure, not kill the run.
				return
			}
			ts := startServer(t, func(c *conf.Config) {
				c.DecryptionMethod = tc.method
				c.DecryptionMode = tc.mode
				c.ThreadsPerWorker = 3
			})
			const nconn = 4
			conns := make([][]codec.Result, nconn)
			clients := make([]*client, nconn)
			for i := range clients {
				clients[i] = dial(t, ts, tc.method, testPassword)
				conns[i] = results(i, 8, clients[i].initTime)
			}
			// The last connection is a legacy (NSCA 2.7) client: 720-byte packets.
			legacy := nconn - 1
			for i := range conns[legacy] {
				if len(conns[legacy][i].Output) > 511 {
					conns[legacy][i].Output = conns[legacy][i].Output[:511]
				}
			}
			var wg sync.WaitGroup
			for i, c := range clients {
				size := codec.Size
				if i == legacy {
					size = codec.LegacySize
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					c.sendResults(size, conns[i])
					c.close()
				}()
			}
			wg.Wait()
			expectInOrder(t, ts.lines(), conns)
			s := ts.stop()
			if s.Received != nconn*8 || s.TotalDropped() != 0 || s.Emitted["file"] != nconn*8 {
				t.Errorf("stats: %s", s.Line(s, 0))
			}
			if s.Connections != nconn {
				t.Errorf("Connections = %d, want %d", s.Connections, nconn)
			}
		})
	}
}

func TestPipelineLegacy(t *testing.T) {
	ts := startServer(t, func(c *conf.Config) { c.DecryptionMethod = 1 })
	c := dial(t, ts, 1, testPassword)
	rs := []codec.Result{
		{Timestamp: c.initTime, ReturnCode: 0, Host: "old", Service: "a", Output: "first"},
		{Timestamp: c.initTime, ReturnCode: 2, Host: "old", Output: "host check\nwith newline"},
		{Timestamp: c.initTime, ReturnCode: 1, Host: "old", Service: "b", Output: strings.Repeat("L", 600)},
		{Timestamp: c.initTime, ReturnCode: 3, Host: "old", Service: "c", Output: "last"},
	}
	c.sendResults(codec.LegacySize, rs)
	c.close()
	rs[2].Output = strings.Repeat("L", 511) // the legacy output field holds 511 characters
	expectInOrder(t, ts.lines(), [][]codec.Result{rs})
	if s := ts.stop(); s.Received != 4 || s.TotalDropped() != 0 {
		t.Errorf("stats: %s", s.Line(s, 0))
	}
}

func TestPipelineBadCRC(t *testing.T) {
	ts := startServer(t, func(c *conf.Config) { c.DecryptionMethod = 1 })
	good := dial(t, ts, 1, testPassword)
	bad := dial(t, ts, 1, testPassword)

	first := codec.Result{Timestamp: bad.initTime, Host: "bad", Service: "s", Output: "before the bad packet"}
	var b []byte
	b = append(b, bad.packet(codec.Size, first, nil)...)
	b = append(b, bad.packet(codec.Size, codec.Result{Timestamp: bad.initTime, Host: "bad", Service: "s", Output: "corrupted"},
		func(p []byte) { p[300] ^= 0x01 })...)
	b = append(b, bad.packet(codec.Size, codec.Result{Timestamp: bad.initTime, Host: "bad", Service: "s", Output: "after the bad packet"}, nil)...)
	if _, err := bad.conn.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
	bad.waitClosed()

	// The good connection was open all along and is unaffected.
	rs := results(7, 5, good.initTime)
	good.sendResults(codec.Size, rs)
	good.close()

	expectInOrder(t, ts.lines(), [][]codec.Result{{first}, rs})
	s := ts.stop()
	if s.Dropped[counters.DropBadCRC] != 1 {
		t.Errorf("bad_crc = %d, want 1 (%v)", s.Dropped[counters.DropBadCRC], s.Dropped)
	}
	if s.Dropped[counters.DropBadVersion] != 0 {
		t.Errorf("bad_version = %d, want 0", s.Dropped[counters.DropBadVersion])
	}
}

func TestPipelineWrongPassword(t *testing.T) {
	ts := startServer(t, func(c *conf.Config) { c.DecryptionMethod = 14; c.DecryptionMode = 1 })
	bad := dial(t, ts, 14, "not the password")
	b := bad.packet(codec.Size, codec.Result{Timestamp: bad.initTime, Host: "h", Service: "s", Output: "o"}, nil)
	if _, err := bad.conn.Write(b); err != nil {
		t.Fatal(err)
	}
	bad.waitClosed()
	if got := ts.lines(); len(got) != 0 {
		t.Errorf("lines from a client with the wrong password: %q", got)
	}
	s := ts.stop()
	if s.Dropped[counters.DropBadVersion]+s.Dropped[counters.DropBadCRC] != 1 {
		t.Errorf("dropped %v, want one bad_version (or bad_crc)", s.Dropped)
	}
}

func TestPipelineShortPacket(t *testing.T) {
	ts := startServer(t, func(c *conf.Config) { c.DecryptionMethod = 1 })
	// Half of a 4304-byte packet, then close.
	c1 := dial(t, ts, 1, testPassword)
	p := c1.packet(codec.Size, codec.Result{Timestamp: c1.initTime, Host: "h", Service: "half", Output: "o"}, nil)
	c1.send(p[:codec.Size/2])
	c1.close()
	// Less than a legacy packet.
	c2 := dial(t, ts, 1, testPassword)
	p = c2.packet(codec.Size, codec.Result{Timestamp: c2.initTime, Host: "h", Service: "tiny", Output: "o"}, nil)
	c2.send(p[:300])
	c2.close()
	// One whole packet and part of a second.
	c3 := dial(t, ts, 1, testPassword)
	whole := codec.Result{Timestamp: c3.initTime, Host: "h", Service: "whole", Output: "delivered"}
	b := c3.packet(codec.Size, whole, nil)
	b = append(b, c3.packet(codec.Size, codec.Result{Timestamp: c3.initTime, Host: "h", Service: "cut", Output: "o"}, nil)[:1000]...)
	c3.send(b)
	c3.close()

	expectInOrder(t, ts.lines(), [][]codec.Result{{whole}})
	s := ts.stop()
	// c1 and c2 never sent a whole packet: connections that failed, not
	// checks; only c3's cut packet is a check lost.
	if s.Dropped[counters.DropShort] != 1 || s.Incomplete != 2 {
		t.Errorf("short_packet = %d, incomplete connections = %d, want 1 and 2 (%v)", s.Dropped[counters.DropShort], s.Incomplete, s.Dropped)
	}
	if s.Received != 2 {
		t.Errorf("Received = %d, want 2", s.Received)
	}
}

func TestPipelineMaxChecks(t *testing.T) {
	ts := startServer(t, func(c *conf.Config) { c.MaxChecksPerConnection = 2 })
	c := dial(t, ts, 0, "")
	rs := results(1, 3, c.initTime)
	c.sendResults(codec.Size, rs)
	c.waitClosed()
	c.close()
	expectInOrder(t, ts.lines(), [][]codec.Result{rs[:2]})
	s := ts.stop()
	if s.Dropped[counters.DropTooManyChecks] != 1 {
		t.Errorf("too_many_checks = %d, want 1 (%v)", s.Dropped[counters.DropTooManyChecks], s.Dropped)
	}
}

func TestPipelineStale(t *testing.T) {
	ts := startServer(t, func(c *conf.Config) {
		c.DecryptionMethod = 1
		c.MaxPacketAgeEnabled = true
		c.MaxPacketAge = 30
	})
	old := dial(t, ts, 1, testPassword)
	old.sendResults(codec.Size, []codec.Result{{Timestamp: old.initTime - 1000, Host: "h", Service: "old", Output: "o"}})
	old.waitClosed()
	old.close()

	future := dial(t, ts, 1, testPassword)
	future.sendResults(codec.Size, []codec.Result{{Timestamp: future.initTime + 1000, Host: "h", Service: "future", Output: "o"}})
	future.waitClosed()
	future.close()

	fresh := dial(t, ts, 1, testPassword)
	ok := []codec.Result{
		{Timestamp: fresh.initTime, Host: "h", Service: "fresh", Output: "o"},
		{Timestamp: fresh.initTime - 20, Host: "h", Service: "20s old", Output: "o"},
	}
	fresh.sendResults(codec.Size, ok)
	fresh.close()

	expectInOrder(t, ts.lines(), [][]codec.Result{ok})
	s := ts.stop()
	if s.Dropped[counters.DropStale] != 2 {
		t.Errorf("stale = %d, want 2 (%v)", s.Dropped[counters.DropStale], s.Dropped)
	}
}

// Without max_packet_age_enabled, an old timestamp is accepted, as stock 2.10.
func TestPipelineStaleNotEnforcedByDefault(t *testing.T) {
	ts := startServer(t, nil)
	c := dial(t, ts, 0, "")
	rs := []codec.Result{{Timestamp: c.initTime - 100000, Host: "h", Service: "old", Output: "o"}}
	c.sendResults(codec.Size, rs)
	c.close()
	expectInOrder(t, ts.lines(), [][]codec.Result{rs})
}

func TestPipelineOrdering(t *testing.T) {
	for _, method := range []int{1, 14} {
		t.Run(fmt.Sprintf("method=%d", method), func(t *testing.T) {
			ts := startServer(t, func(c *conf.Config) {
				c.DecryptionMethod = method
				c.DecryptionMode = 1
				c.ThreadsPerWorker = 4
				c.QueueSize = 4 // small queues: back-pressure between stages
			})
			const nconn = 4
			conns := make([][]codec.Result, nconn)
			clients := make([]*client, nconn)
			for i := range clients {
				clients[i] = dial(t, ts, method, testPassword)
				conns[i] = results(100+i, 50, clients[i].initTime)
			}
			var wg sync.WaitGroup
			for i, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c.sendResults(codec.Size, conns[i])
					c.close()
				}()
			}
			wg.Wait()
			expectInOrder(t, ts.lines(), conns)
			if s := ts.stop(); s.Received != nconn*50 || s.TotalEmitted() != nconn*50 {
				t.Errorf("stats: %s", s.Line(s, 0))
			}
		})
	}
}

// Shutdown with nobody connected returns promptly and the file is untouched.
func TestPipelineIdleShutdown(t *testing.T) {
	ts := startServer(t, nil)
	start := time.Now()
	if got := ts.lines(); len(got) != 0 {
		t.Errorf("lines: %q", got)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Shutdown of an idle server took %v", d)
	}
	if s := ts.stop(); s.Received != 0 || s.Connections != 0 {
		t.Errorf("stats: %s", s.Line(s, 0))
	}
}

// A client still connected at Shutdown gets the grace period, then is closed;
// what it sent whole is delivered, its unfinished packet counted short.
func TestPipelineShutdownGrace(t *testing.T) {
	ts := startServer(t, func(c *conf.Config) { c.DecryptionMethod = 1 })
	c := dial(t, ts, 1, testPassword)
	whole := codec.Result{Timestamp: c.initTime, Host: "h", Service: "lingering", Output: "sent before shutdown"}
	b := c.packet(codec.Size, whole, nil)
	b = append(b, c.packet(codec.Size, codec.Result{Timestamp: c.initTime, Host: "h", Service: "unfinished", Output: "o"}, nil)[:100]...)
	c.send(b)
	time.Sleep(100 * time.Millisecond) // let the server read it
	start := time.Now()
	got := ts.lines() // Shutdown and wait for Run, the client still connected
	took := time.Since(start)
	if took > shutdownGrace+2*time.Second {
		t.Errorf("Run returned %v after Shutdown, grace is %v", took, shutdownGrace)
	}
	expectInOrder(t, got, [][]codec.Result{{whole}})
	c.waitClosed()
	if s := ts.stop(); s.Dropped[counters.DropShort] != 1 {
		t.Errorf("dropped %v, want short_packet=1", s.Dropped)
	}
}

// connection_timeout closes a client that sends nothing.
func TestPipelineIdleTimeout(t *testing.T) {
	ts := startServer(t, func(c *conf.Config) { c.ConnectionTimeout = 1 })
	c := dial(t, ts, 0, "")
	start := time.Now()
	c.waitClosed()
	if took := time.Since(start); took < 900*time.Millisecond || took > 3*time.Second {
		t.Errorf("idle connection closed after %v with connection_timeout=1", took)
	}
	// A client that keeps sending is not closed by the timeout.
	c2 := dial(t, ts, 0, "")
	var rs []codec.Result
	for i := range 6 {
		r := codec.Result{Timestamp: c2.initTime, Host: "h", Service: fmt.Sprintf("busy %d", i), Output: "o"}
		rs = append(rs, r)
		c2.sendResults(codec.Size, []codec.Result{r})
		time.Sleep(300 * time.Millisecond)
	}
	c2.close()
	expectInOrder(t, ts.lines(), [][]codec.Result{rs})
}

// stageGoroutines counts goroutines running pipeline code, the test's own
// excepted.
func stageGoroutines() (int, string) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	var sample string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "nsca_fast/stages.") && !strings.Contains(g, "testing.tRunner") {
			n++
			sample = g
		}
	}
	return n, sample
}

func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(entries)
}

func fdList() string {
	entries, _ := os.ReadDir("/proc/self/fd")
	var l []string
	for _, e := range entries {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		l = append(l, e.Name()+"->"+target)
	}
	return strings.Join(l, " ")
}

// After Run has returned, the server leaves no goroutine and no descriptor
// behind (listening socket, epoll, eventfd, client sockets, command file).
func TestPipelineNoLeaks(t *testing.T) {
	settle := func(cond func() bool) {
		for deadline := time.Now().Add(time.Second); !cond() && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Earlier tests' servers may have left goroutines; count them as the base.
	g0, _ := stageGoroutines()
	fd0 := openFDs(t)

	ts := startServer(t, func(c *conf.Config) { c.DecryptionMethod = 14; c.AggregateWrites = true })
	c := dial(t, ts, 14, testPassword)
	rs := results(1, 3, c.initTime)
	c.sendResults(codec.Size, rs)
	c.close()
	expectInOrder(t, ts.lines(), [][]codec.Result{rs})
	c.conn.Close()

	var g1 int
	var sample string
	settle(func() bool { g1, sample = stageGoroutines(); return g1 <= g0 })
	if g1 > g0 {
		t.Errorf("%d pipeline goroutines left after Run returned (%d before), e.g.:\n%s", g1, g0, sample)
	}
	var fd1 int
	settle(func() bool { fd1 = openFDs(t); return fd1 <= fd0 })
	if fd1 > fd0 {
		t.Errorf("%d descriptors open after Run returned, %d before: %s", fd1, fd0, fdList())
	}
}

const childEnv = "NSCA_STAGES_TEST_CHILD"

// inSubprocess runs the current test in a child process of this test binary
// and reports its outcome, returning true; in the child it returns false so
// the test runs inline. A test that may crash the process goes through it.
func inSubprocess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return false
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		var keep []string
		for _, l := range strings.Split(string(out), "\n") {
			// Leave out glog lines; keep the test output and any panic.
			if len(l) > 0 && strings.ContainsRune("IWE", rune(l[0])) && len(l) > 1 && l[1] >= '0' && l[1] <= '9' {
				continue
			}
			keep = append(keep, l)
		}
		if len(keep) > 14 {
			keep = keep[:14]
		}
		t.Errorf("%s in a child process: %v\n%s", t.Name(), err, strings.Join(keep, "\n"))
	} else if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Errorf("child process did not run %s:\n%s", t.Name(), out)
	}
	return true
}

func TestAccountingHelpers(t *testing.T) {
	s := counters.NewStats()
	s.Received.Add(5)
	s.Emitted("file").Add(3)
	s.Dropped(counters.DropBadCRC).Add(1)
	s.Dropped(counters.DropShort).Add(1)
	snap := s.Snapshot()
	if snap.TotalEmitted() != 3 || snap.TotalDropped() != 2 || snap.Received != 5 {
		t.Errorf("snapshot: %+v", snap)
	}
	if l := snap.Line(snap, 1); !strings.Contains(l, "dropped{bad_crc=1,short_packet=1}") || !strings.Contains(l, "emitted{file=3}") {
		t.Errorf("Line: %s", l)
	}
	if !bytes.Contains([]byte(snap.Line(snap, 0)), []byte("received=5")) {
		t.Errorf("Line: %s", snap.Line(snap, 0))
	}
}
