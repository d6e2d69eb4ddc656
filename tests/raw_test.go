package tests

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A client written from the packet layout of stock-nsca.md, for what
// send_nsca cannot do: partial packets, old timestamps, slow writes,
// holding a connection open. XOR and no encryption only.

const (
	packetSize       = 4304
	legacyPacketSize = 720
	initPacketSize   = 132
)

type rawConn struct {
	c  net.Conn
	iv []byte
	ts uint32
}

// dialLocal connects to the daemon on 127.0.0.1:port from local (an
// address on loopback, or "" for any).
func dialLocal(port int, local string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	return d.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// readInit reads the init packet from c, whose deadline it sets to timeout
// from now and leaves so.
func readInit(c net.Conn, timeout time.Duration) (*rawConn, error) {
	c.SetDeadline(time.Now().Add(timeout))
	init := make([]byte, initPacketSize)
	if _, err := io.ReadFull(c, init); err != nil {
		return nil, err
	}
	return &rawConn{c: c, iv: init[:128], ts: binary.BigEndian.Uint32(init[128:])}, nil
}

// dialInit connects to the daemon from local (an address on loopback, or
// "" for any) and reads the init packet.
func dialInit(port int, local string, timeout time.Duration) (*rawConn, error) {
	c, err := dialLocal(port, local, timeout)
	if err != nil {
		return nil, err
	}
	r, err := readInit(c, timeout)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("reading the init packet: %w", err)
	}
	c.SetDeadline(time.Time{})
	return r, nil
}

// dialRaw connects from local (an address on loopback, or "" for any) and
// reads the init packet; the connection's deadline is 10 s away.
func dialRaw(t *testing.T, port int, local string) *rawConn {
	t.Helper()
	r, err := dialInit(port, local, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { r.c.Close() })
	r.c.SetDeadline(time.Now().Add(10 * time.Second))
	return r
}

// waitClosed reads from c until the peer closes it (EOF or reset) or
// timeout passes; it returns the bytes read and whether it was closed.
func waitClosed(c net.Conn, timeout time.Duration) (int, bool) {
	c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64<<10)
	total := 0
	for {
		n, err := c.Read(buf)
		total += n
		if err == nil {
			continue
		}
		return total, !errors.Is(err, os.ErrDeadlineExceeded)
	}
}

// rawCheck is one check result a raw client sends.
type rawCheck struct {
	rc                int16
	host, svc, output string
}

// line is the command file line (without its time) the check must produce.
func (c rawCheck) line() string { return serviceLine(c.host, c.svc, int(c.rc), c.output) }

// packets is checks as 4304-byte packets for r, XOR-encrypted with
// password.
func (r *rawConn) packets(password string, checks []rawCheck) []byte {
	var b []byte
	for _, c := range checks {
		b = append(b, r.packet(packetSize, r.ts, c.rc, c.host, c.svc, c.output, 1, password)...)
	}
	return b
}

// packet builds a data packet of size bytes (4304 or 720) with random
// filler after each NUL, as send_nsca does, and encrypts it with method 0
// or 1.
func (r *rawConn) packet(size int, ts uint32, rc int16, host, svc, output string, method int, password string) []byte {
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(rand.IntN(256))
	}
	binary.BigEndian.PutUint16(p[0:], 3)
	binary.BigEndian.PutUint32(p[4:], 0)
	binary.BigEndian.PutUint32(p[8:], ts)
	binary.BigEndian.PutUint16(p[12:], uint16(rc))
	// A value as long as its field is copied without a NUL terminator, so a
	// test can send unterminated fields; a longer one is cut to the field.
	putField := func(off, n int, s string) {
		copy(p[off:off+n], s)
		if len(s) < n {
			p[off+len(s)] = 0
		}
	}
	putField(14, 64, host)
	putField(78, 128, svc)
	putField(206, size-206-2, output)
	binary.BigEndian.PutUint32(p[4:], crc32.ChecksumIEEE(p))
	if method == 1 {
		r.xor(p, password)
	}
	return p
}

// xor encrypts a clear packet for r in place with XOR (method 1) and
// returns it.
func (r *rawConn) xor(p []byte, password string) []byte {
	for i := range p {
		p[i] ^= r.iv[i%128]
		if password != "" {
			p[i] ^= password[i%len(password)]
		}
	}
	return p
}

// write sends b, in pieces of chunk bytes with a pause between them when
// chunk > 0.
func (r *rawConn) write(t *testing.T, b []byte, chunk int) {
	t.Helper()
	if chunk <= 0 {
		chunk = len(b)
	}
	for len(b) > 0 {
		n := min(chunk, len(b))
		if _, err := r.c.Write(b[:n]); err != nil {
			t.Fatalf("write: %v", err)
		}
		b = b[n:]
		if len(b) > 0 && chunk < packetSize {
			time.Sleep(time.Millisecond)
		}
	}
}

// TestRawPartialPacket: a connection that ends in the middle of a packet
// delivers the complete packets before it, and the daemon goes on serving.
func TestRawPartialPacket(t *testing.T) {
	for _, size := range []int{packetSize, legacyPacketSize} {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			t.Parallel()
			d, cmd := startFileDaemon(t, 1, shortPassword, nil)
			lo := now()
			r := dialRaw(t, d.Port, "")
			var b []byte
			for i := range 3 {
				b = append(b, r.packet(size, r.ts, int16(i), "partial", fmt.Sprintf("svc%d", i), fmt.Sprintf("packet %d", i), 1, shortPassword)...)
			}
			last := r.packet(size, r.ts, 3, "partial", "svc3", "cut short", 1, shortPassword)
			b = append(b, last[:size/2]...)
			r.write(t, b, 0)
			r.c.Close()
			waitFileLines(t, cmd, 3) // separate connections have no order
			Client{Password: shortPassword, Method: 1}.send(t, d.Port, "after\tsvc\t0\tstill serving\x17", 1)
			deliverAll(t, d, cmd, lo, []string{
				serviceLine("partial", "svc0", 0, "packet 0"),
				serviceLine("partial", "svc1", 1, "packet 1"),
				serviceLine("partial", "svc2", 2, "packet 2"),
				serviceLine("after", "svc", 0, "still serving"),
			})
		})
	}
}

// TestRawSlowWrites: packets written a few bytes at a time, across packet
// boundaries, are reassembled; also several legacy packets on one
// connection and no encryption.
func TestRawSlowWrites(t *testing.T) {
	for _, tc := range []struct {
		size, method, chunk int
	}{{packetSize, 1, 997}, {legacyPacketSize, 1, 101}, {packetSize, 0, 1500}, {legacyPacketSize, 0, 7}} {
		t.Run(fmt.Sprintf("size=%d/method=%d/chunk=%d", tc.size, tc.method, tc.chunk), func(t *testing.T) {
			t.Parallel()
			d, cmd := startFileDaemon(t, tc.method, shortPassword, nil)
			lo := now()
			r := dialRaw(t, d.Port, "")
			var b []byte
			var want []string
			for i := range 4 {
				host := fmt.Sprintf("slow%d", i)
				if i == 2 {
					b = append(b, r.packet(tc.size, r.ts, -2, host, "", "host\ncheck", tc.method, shortPassword)...)
					want = append(want, hostLine(host, -2, "host\ncheck"))
					continue
				}
				b = append(b, r.packet(tc.size, r.ts, int16(i), host, "svc", fmt.Sprintf("slow %d", i), tc.method, shortPassword)...)
				want = append(want, serviceLine(host, "svc", i, fmt.Sprintf("slow %d", i)))
			}
			r.write(t, b, tc.chunk)
			r.c.Close()
			deliverAll(t, d, cmd, lo, want)
		})
	}
}

// TestMaxPacketAge: stock 2.10 never enforces max_packet_age, and neither
// do we by default; with max_packet_age_enabled=1 a packet whose timestamp
// is further from now than max_packet_age is dropped.
func TestMaxPacketAge(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("enabled=%v", enabled), func(t *testing.T) {
			t.Parallel()
			extra := Config{"max_packet_age": "30"}
			if enabled {
				extra["max_packet_age_enabled"] = "1"
			}
			d, cmd := startFileDaemon(t, 1, shortPassword, extra)
			lo := now()
			var want []string
			for _, age := range []int{-100, 100, 0} {
				r := dialRaw(t, d.Port, "")
				host := fmt.Sprintf("age%d", age)
				r.write(t, r.packet(packetSize, uint32(int64(r.ts)-int64(age)), 0, host, "svc", "aged", 1, shortPassword), 0)
				r.c.Close()
				if !enabled || age == 0 {
					want = append(want, serviceLine(host, "svc", 0, "aged"))
				}
				// Separate connections have no order: wait for each.
				waitFileLines(t, cmd, len(want))
			}
			deliverAll(t, d, cmd, lo, want)
		})
	}
}

// TestDrainOnSIGTERM: after SIGTERM the daemon takes no new connections,
// but a client already connected may finish, its results are written, and
// the daemon exits 0.
func TestDrainOnSIGTERM(t *testing.T) {
	d, cmd := startFileDaemon(t, 1, shortPassword, nil)
	lo := now()
	r := dialRaw(t, d.Port, "")
	r.write(t, r.packet(packetSize, r.ts, 0, "drain", "before", "sent before SIGTERM", 1, shortPassword), 0)
	waitFileLines(t, cmd, 1)
	d.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	// The connection made before SIGTERM may still finish, within the grace.
	r.write(t, r.packet(packetSize, r.ts, 1, "drain", "after", "sent after SIGTERM", 1, shortPassword), 0)
	r.c.Close()
	// A new client gets no init packet (the listening socket may stay open
	// until exit, so the connection itself can succeed).
	if c, err := dialLocal(d.Port, "", time.Second); err == nil {
		_, err := readInit(c, stopTimeout)
		c.Close()
		if err == nil {
			t.Errorf("a connection made after SIGTERM got an init packet")
		}
	}
	if !d.p.exitWithin(stopTimeout) {
		t.Fatalf("the daemon did not exit within %v of SIGTERM", stopTimeout)
	}
	hi := now()
	d.Stop() // asserts exit status 0
	if t.Failed() {
		t.Logf("stderr:\n%s", d.Stderr())
	}
	assertLines(t, commandsIn(t, cmd, lo, hi), []string{
		serviceLine("drain", "before", 0, "sent before SIGTERM"),
		serviceLine("drain", "after", 1, "sent after SIGTERM"),
	})
	if t.Failed() {
		t.Logf("daemon stderr:\n%s", d.Stderr())
	}
}

// TestIdleConnectionClosed: a client that sends nothing is disconnected
// after connection_timeout.
func TestIdleConnectionClosed(t *testing.T) {
	d, _ := startFileDaemon(t, 1, shortPassword, Config{"connection_timeout": "1"})
	r := dialRaw(t, d.Port, "")
	start := time.Now()
	if _, closed := waitClosed(r.c, 8*time.Second); !closed {
		t.Fatalf("an idle connection was still open after %v with connection_timeout=1", time.Since(start))
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("an idle connection was closed after %v, want about 1 s", took)
	}
}

// TestConcurrentClients: many send_nsca at once; every result arrives once
// and each connection's results keep their order.
func TestConcurrentClients(t *testing.T) {
	const clients, perClient = 16, 25
	for _, method := range []int{1, 14} {
		t.Run(fmt.Sprintf("method=%d", method), func(t *testing.T) {
			t.Parallel()
			d, cmd := startFileDaemon(t, method, shortPassword, nil)
			hosts := seqHosts("client", clients)
			lo := now()
			sendSeqs(t, Client{Password: shortPassword, Method: method}, d.Port, hosts, perClient)
			waitFileLines(t, cmd, clients*perClient)
			hi := now()
			d.Stop()
			assertSeqs(t, commandsIn(t, cmd, lo, hi), hosts, perClient)
		})
	}
}

// TestMaxChecksPerConnection: a connection is cut after
// max_checks_per_connection results; those before the cap arrive.
func TestMaxChecksPerConnection(t *testing.T) {
	d, cmd := startFileDaemon(t, 1, shortPassword, Config{"max_checks_per_connection": "5"})
	lo := now()
	var in strings.Builder
	var want []string
	for i := range 8 {
		fmt.Fprintf(&in, "capped\tsvc%d\t0\tcheck %d\x17", i, i)
		if i < 5 {
			want = append(want, serviceLine("capped", fmt.Sprintf("svc%d", i), 0, fmt.Sprintf("check %d", i)))
		}
	}
	// The daemon closes the connection: send_nsca may die of SIGPIPE.
	(Client{Password: shortPassword, Method: 1}).sendRejected(t, d.Port, in.String())
	waitFileLines(t, cmd, len(want)) // separate connections have no order
	Client{Password: shortPassword, Method: 1}.send(t, d.Port, "next\tsvc\t0\tnext connection\x17", 1)
	want = append(want, serviceLine("next", "svc", 0, "next connection"))
	deliverAll(t, d, cmd, lo, want)
}

// TestSIGHUPKeepsServing: SIGHUP does not stop the daemon.
func TestSIGHUPKeepsServing(t *testing.T) {
	d, cmd := startFileDaemon(t, 1, shortPassword, nil)
	d.Signal(syscall.SIGHUP)
	time.Sleep(300 * time.Millisecond)
	if d.p.hasExited() {
		t.Fatalf("the daemon exited on SIGHUP: %v\n%s", d.p.state, d.Stderr())
	}
	lo := now()
	Client{Password: shortPassword, Method: 1}.send(t, d.Port, "hup\tsvc\t0\tafter SIGHUP\x17", 1)
	deliverAll(t, d, cmd, lo, []string{serviceLine("hup", "svc", 0, "after SIGHUP")})
}

// TestPidFile: pid_file holds the daemon's PID while it runs and is
// removed when it exits.
func TestPidFile(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "nsca.pid")
	d, _ := startFileDaemon(t, 1, shortPassword, Config{"pid_file": pidFile})
	got := strings.TrimSpace(readFile(t, pidFile))
	if want := strconv.Itoa(d.p.cmd.Process.Pid); got != want {
		t.Errorf("pid_file holds %q, want %q", got, want)
	}
	d.Stop()
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("pid_file still exists after exit (stat: %v)", err)
	}
}

// TestAllowedHosts: a loopback client outside allowed_hosts gets no init
// packet and delivers nothing; inside it, it is served.
func TestAllowedHosts(t *testing.T) {
	for _, tc := range []struct {
		allowed string
		served  bool
	}{{"10.1.2.0/24", false}, {"192.0.2.1, 127.0.0.0/8", true}} {
		t.Run(tc.allowed, func(t *testing.T) {
			t.Parallel()
			d, cmd := startFileDaemon(t, 1, shortPassword, Config{"allowed_hosts": tc.allowed})
			lo := now()
			out, err := (Client{Password: shortPassword, Method: 1}).run(t, d.Port, "allowed\tsvc\t0\tfrom loopback\x17")
			if !tc.served {
				if err == nil && strings.Contains(out, "sent to host successfully") {
					t.Errorf("send_nsca from outside allowed_hosts succeeded: %s", out)
				}
				d.Stop()
				if got := readFile(t, cmd); got != "" {
					t.Errorf("a client outside allowed_hosts delivered:\n%s", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("send_nsca: %v\n%s", err, out)
			}
			deliverAll(t, d, cmd, lo, []string{serviceLine("allowed", "svc", 0, "from loopback")})
		})
	}
}
