package stages

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"nsca_fast/conf"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
)

func proxyV2(t *testing.T, cmd proxyproto.ProtocolVersionAndCommand, src, dst string) []byte {
	t.Helper()
	h := &proxyproto.Header{Version: 2, Command: cmd, TransportProtocol: proxyproto.UNSPEC}
	if cmd == proxyproto.PROXY {
		s, d := netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst)
		h.SourceAddr, h.DestinationAddr = net.TCPAddrFromAddrPort(s), net.TCPAddrFromAddrPort(d)
		h.TransportProtocol = proxyproto.TCPv4
		if s.Addr().Is6() {
			h.TransportProtocol = proxyproto.TCPv6
		}
	}
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProxyHeaderLen(t *testing.T) {
	v1 := []byte("PROXY TCP4 192.0.2.7 127.0.0.1 40001 5667\r\n")
	v2 := proxyV2(t, proxyproto.PROXY, "192.0.2.7:40001", "127.0.0.1:5667")
	tlv := append([]byte(nil), v2...)
	tlv[15] += 200 // claims 200 bytes of TLVs more than it has
	huge := append([]byte(nil), v2...)
	huge[14], huge[15] = 0xff, 0xff
	cases := []struct {
		name string
		in   []byte
		want int
		err  string
	}{
		{"empty", nil, 0, ""},
		{"v1 complete", v1, len(v1), ""},
		{"v1 complete with client bytes", append(append([]byte(nil), v1...), 0, 0, 0), len(v1), ""},
		{"v1 truncated", v1[:20], 0, ""},
		{"v1 first byte", v1[:1], 0, ""},
		{"v1 too long", []byte("PROXY TCP4 " + strings.Repeat("1", 120)), 0, "longer than 107 bytes"},
		{"v2 complete", v2, len(v2), ""},
		{"v2 signature only", v2[:12], 0, ""},
		{"v2 truncated body", v2[:len(v2)-1], 0, ""},
		{"v2 waits for its TLVs", tlv, 0, ""},
		{"v2 too large", huge, 0, "more than 1024"},
		{"nsca data", []byte{0, 0, 0, 3, 1, 2}, 0, "does not begin with a PROXY header"},
		{"http", []byte("GET / HTTP/1.0\r\n"), 0, "does not begin with a PROXY header"},
	}
	for _, c := range cases {
		got, err := proxyHeaderLen(c.in)
		if c.err != "" {
			if !errors.Is(err, errProxyHeader) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want errProxyHeader with %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %d, %v; want %d", c.name, got, err, c.want)
		}
	}
}

func TestProxySource(t *testing.T) {
	cases := []struct {
		name   string
		header []byte
		src    string
		local  bool
		err    bool
	}{
		{"v1 tcp4", []byte("PROXY TCP4 192.0.2.7 127.0.0.1 40001 5667\r\n"), "192.0.2.7:40001", false, false},
		{"v1 tcp6", []byte("PROXY TCP6 2001:db8::7 ::1 40002 5667\r\n"), "[2001:db8::7]:40002", false, false},
		{"v1 unknown", []byte("PROXY UNKNOWN\r\n"), "", true, false},
		{"v2 proxy", proxyV2(t, proxyproto.PROXY, "127.0.0.9:40003", "127.0.0.1:5667"), "127.0.0.9:40003", false, false},
		{"v2 proxy ipv6", proxyV2(t, proxyproto.PROXY, "[2001:db8::9]:40004", "[::1]:5667"), "[2001:db8::9]:40004", false, false},
		{"v2 local", proxyV2(t, proxyproto.LOCAL, "", ""), "", true, false},
		{"v1 bad address", []byte("PROXY TCP4 999.0.2.7 127.0.0.1 40001 5667\r\n"), "", false, true},
		{"v1 bad port", []byte("PROXY TCP4 192.0.2.7 127.0.0.1 70000 5667\r\n"), "", false, true},
		{"v1 missing field", []byte("PROXY TCP4 192.0.2.7 127.0.0.1 40001\r\n"), "", false, true},
	}
	for _, c := range cases {
		src, local, err := proxySource(c.header)
		if c.err {
			if !errors.Is(err, errProxyHeader) {
				t.Errorf("%s: err %v, want errProxyHeader", c.name, err)
			}
			continue
		}
		if err != nil || local != c.local || (!c.local && src != netip.MustParseAddrPort(c.src)) {
			t.Errorf("%s: %v local=%v err=%v; want %s local=%v", c.name, src, local, err, c.src, c.local)
		}
	}
}

// closedUnanswered connects, sends header, and reports whether the server
// closed the connection without sending anything.
func closedUnanswered(t *testing.T, ts *testServer, header []byte) bool {
	t.Helper()
	conn, err := net.DialTimeout("tcp", ts.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	conn.Write(header)
	n, err := conn.Read(make([]byte, 1))
	// Closing with the header unread resets the connection.
	return n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
}

func TestPipelineProxyProtocol(t *testing.T) {
	ts := startServer(t, func(c *conf.Config) {
		c.ProxyProtocol = true
		c.ProxyProtocolTrusted = "127.0.0.1"
		c.AllowedHosts = "192.0.2.0/24"
		c.ConnectionTimeout = 1
	})
	r := codec.Result{Timestamp: uint32(time.Now().Unix()), Host: "web1", Service: "disk", Output: "OK"}
	c := dialVia(t, ts, 0, testPassword, proxyV2(t, proxyproto.PROXY, "192.0.2.7:40001", "127.0.0.1:5667"))
	c.sendResults(codec.Size, []codec.Result{r})
	c.close()
	r.Host = "web2"
	c = dialVia(t, ts, 0, testPassword, []byte("PROXY TCP4 192.0.2.8 127.0.0.1 40002 5667\r\n"))
	c.sendResults(codec.Size, []codec.Result{r})
	c.close()
	// A client that sends its packet along with the header, before its
	// init packet (possible with decryption_method=0, which ignores the
	// IV): the bytes read with the header start the stream.
	r.Host = "web3"
	eager := make([]byte, codec.Size)
	codec.Encode(eager, r)
	if conn, err := net.Dial("tcp", ts.addr); err != nil {
		t.Fatal(err)
	} else {
		conn.Write(append(proxyV2(t, proxyproto.PROXY, "192.0.2.9:40005", "127.0.0.1:5667"), eager...))
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		io.ReadFull(conn, make([]byte, codec.InitSize))
		conn.Close()
	}

	if !closedUnanswered(t, ts, proxyV2(t, proxyproto.LOCAL, "", "")) {
		t.Error("a LOCAL header (health check) was not closed unanswered")
	}
	if !closedUnanswered(t, ts, proxyV2(t, proxyproto.PROXY, "198.51.100.1:40003", "127.0.0.1:5667")) {
		t.Error("a client outside allowed_hosts behind the balancer was not closed unanswered")
	}
	if !closedUnanswered(t, ts, []byte("GET / HTTP/1.0\r\n\r\n")) {
		t.Error("a connection without a PROXY header was not closed unanswered")
	}
	truncated := proxyV2(t, proxyproto.PROXY, "192.0.2.9:40004", "127.0.0.1:5667")
	start := time.Now()
	if !closedUnanswered(t, ts, truncated[:20]) {
		t.Error("a truncated header was not closed unanswered")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("a truncated header was closed after %v, want about connection_timeout=1s", d)
	}
	// A plain TCP check (connect, close) is a health check too; a header
	// cut off by the close is not.
	if conn, err := net.Dial("tcp", ts.addr); err == nil {
		conn.Close()
	}
	if conn, err := net.Dial("tcp", ts.addr); err == nil {
		conn.Write(truncated[:20])
		conn.Close()
	}
	waitFor(5*time.Second, func() bool {
		return ts.srv.stats.HealthChecks.Load() == 2 && ts.srv.stats.Refused.Load() == 4
	})
	got := ts.lines()
	slices.Sort(got) // two connections: either may be written first
	want := []string{"PROCESS_SERVICE_CHECK_RESULT;web1;disk;0;OK", "PROCESS_SERVICE_CHECK_RESULT;web2;disk;0;OK",
		"PROCESS_SERVICE_CHECK_RESULT;web3;disk;0;OK"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines %q, want %q", got, want)
	}
	s := ts.snap
	if s.Connections != 3 || s.HealthChecks != 2 || s.Refused != 4 {
		t.Errorf("connections=%d health_checks=%d refused=%d, want 3, 2 and 4", s.Connections, s.HealthChecks, s.Refused)
	}
}

func TestPipelineProxyUntrustedPeer(t *testing.T) {
	ts := startServer(t, func(c *conf.Config) {
		c.ProxyProtocol = true
		c.ProxyProtocolTrusted = "127.0.0.2,10.0.0.0/8"
	})
	// A client connecting directly cannot pass off another address.
	if !closedUnanswered(t, ts, []byte("PROXY TCP4 127.0.0.2 127.0.0.1 40001 5667\r\n")) {
		t.Error("a PROXY header from an untrusted peer was not closed unanswered")
	}
	if s := ts.stop(); s.Refused != 1 || s.Connections != 0 {
		t.Errorf("refused=%d connections=%d, want 1 and 0", s.Refused, s.Connections)
	}
}

// FuzzProxyHeader: whatever a peer sends as its PROXY header, framing and
// parsing return an error or an address, and never panic; a header found
// complete is never longer than what was read.
func FuzzProxyHeader(f *testing.F) {
	f.Add([]byte("PROXY TCP4 192.0.2.7 127.0.0.1 40001 5667\r\n"))
	f.Add([]byte("PROXY TCP6 2001:db8::7 ::1 40002 5667\r\n"))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add([]byte("\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00"))
	f.Add([]byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c\xc0\x00\x02\x07\x7f\x00\x00\x01\x9c\x41\x16\x23"))
	f.Add([]byte("\r\n\r\n\x00\r\nQUIT\n\x21\x21\x00\x24" + strings.Repeat("\x01", 36)))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := proxyHeaderLen(b)
		if err != nil || n == 0 {
			return
		}
		if n > len(b) {
			t.Fatalf("header of %d bytes in %d read", n, len(b))
		}
		src, local, err := proxySource(b[:n])
		if err == nil && !local && !src.IsValid() {
			t.Fatalf("no error and no source address for %q", b[:n])
		}
	})
}

// strict_mode_spoofing judges the client behind the balancer: a result for
// "localhost" passes from 127.0.0.1 and is dropped from 192.0.2.7, though
// both connections come from the same balancer.
func TestPipelineProxySpoofing(t *testing.T) {
	ts := startServer(t, func(c *conf.Config) {
		c.ProxyProtocol = true
		c.ProxyProtocolTrusted = "127.0.0.1"
		c.StrictModeSpoofing = true
	})
	r := codec.Result{Timestamp: uint32(time.Now().Unix()), Host: "localhost", Service: "from-loopback", Output: "OK"}
	c := dialVia(t, ts, 0, testPassword, []byte("PROXY TCP4 127.0.0.1 127.0.0.1 40001 5667\r\n"))
	c.sendResults(codec.Size, []codec.Result{r})
	c.close()
	r.Service = "from-elsewhere"
	c = dialVia(t, ts, 0, testPassword, []byte("PROXY TCP4 192.0.2.7 127.0.0.1 40002 5667\r\n"))
	c.sendResults(codec.Size, []codec.Result{r})
	c.close()
	got := ts.lines()
	if want := []string{"PROCESS_SERVICE_CHECK_RESULT;localhost;from-loopback;0;OK"}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
	if d := ts.snap.Dropped[counters.DropSpoofed]; d != 1 {
		t.Errorf("dropped{spoofed_host} = %d, want 1", d)
	}
}
