package nrdp

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"nsca_fast/stages/intake"
)

func TestRequestTooLarge(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxRequestSize = 65536 })
	big := xmlOf(hostXML("web1", "0", strings.Repeat("x", 70000)))
	code, body := ts.post(t, "/", url.Values{"token": {"anytoken"}, "cmd": {"submitcheck"}, "xml": {big}})
	if code != 413 || !strings.Contains(body, "REQUEST TOO LARGE") {
		t.Errorf("answer %d %q", code, body)
	}
}

// TestConnectionCap: with one connection allowed, a second waits until
// the first is gone.
func TestConnectionCap(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConnections = 1 })
	hold, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // accepted, holding the slot
	client := &http.Client{Timeout: 300 * time.Millisecond}
	if _, err := client.PostForm(ts.url+"/", url.Values{"cmd": {"hello"}}); err == nil {
		t.Fatal("a second connection was served beside the first")
	}
	hold.Close()
	client.Timeout = 5 * time.Second
	resp, err := client.PostForm(ts.url+"/", url.Values{"cmd": {"hello"}})
	if err != nil {
		t.Fatalf("after the first left: %v", err)
	}
	resp.Body.Close()
}

// TestSlowHeaders: a client that never finishes its headers is cut off
// at nrdp_header_timeout.
func TestSlowHeaders(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.HeaderTimeout = time.Second })
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("POST /nrdp/ HTTP/1.1\r\nHost: x\r\n"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	_, err = bufio.NewReader(c).ReadString('\n')
	if err == nil || time.Since(start) > 4*time.Second {
		t.Errorf("connection still open after %v: %v", time.Since(start), err)
	}
}

// TestBusy: results the pipeline does not decide within nrdp_timeout are
// answered 503 with Retry-After.
func TestBusy(t *testing.T) {
	ts := start(t, func(c *Config) { c.Timeout = time.Second }, true)
	resp, err := http.PostForm(ts.url+"/", url.Values{"token": {"anytoken"}, "cmd": {"submitcheck"}, "xml": {xmlOf(hostXML("web1", "0", "up"))}})
	if err != nil {
		t.Fatal(err)
	}
	code, body := readResp(t, resp)
	if code != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "<message>BUSY</message>") ||
		!strings.Contains(body, "0 checks processed, 1 not taken in time") {
		t.Errorf("answer %d %q", code, body)
	}
}

// TestCloseLeavesQueue: the front end's Close is its last send: the
// queue it alone joined is closed after it.
func TestCloseLeavesQueue(t *testing.T) {
	q := intake.NewQueue(4)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	s, err := New(Config{Options: Options{Listen: ln.Addr().String(), Tokens: []string{"t"}}, Queue: q, Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- s.Run() }()
	time.Sleep(50 * time.Millisecond)
	s.Close(context.Background())
	if err := <-ran; err != nil {
		t.Errorf("Run: %v", err)
	}
	if _, open := <-q.C; open {
		t.Error("the queue is still open")
	}
}

func TestAllowedHosts(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Allowed = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")} })
	client := &http.Client{Timeout: 2 * time.Second}
	if _, err := client.PostForm(ts.url+"/", url.Values{"cmd": {"hello"}}); err == nil {
		t.Error("served a client outside allowed_hosts")
	}
}
