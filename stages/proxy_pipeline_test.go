package stages

import (
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"nsca_fast/conf"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/internal/testkit"
)

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
	c := dialVia(t, ts, 0, testPassword, testkit.ProxyV2(t, proxyproto.PROXY, "192.0.2.7:40001", "127.0.0.1:5667"))
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
		conn.Write(append(testkit.ProxyV2(t, proxyproto.PROXY, "192.0.2.9:40005", "127.0.0.1:5667"), eager...))
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		io.ReadFull(conn, make([]byte, codec.InitSize))
		conn.Close()
	}

	if !closedUnanswered(t, ts, testkit.ProxyV2(t, proxyproto.LOCAL, "", "")) {
		t.Error("a LOCAL header (health check) was not closed unanswered")
	}
	if !closedUnanswered(t, ts, testkit.ProxyV2(t, proxyproto.PROXY, "198.51.100.1:40003", "127.0.0.1:5667")) {
		t.Error("a client outside allowed_hosts behind the balancer was not closed unanswered")
	}
	if !closedUnanswered(t, ts, []byte("GET / HTTP/1.0\r\n\r\n")) {
		t.Error("a connection without a PROXY header was not closed unanswered")
	}
	truncated := testkit.ProxyV2(t, proxyproto.PROXY, "192.0.2.9:40004", "127.0.0.1:5667")
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
	testkit.WaitFor(5*time.Second, func() bool {
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
