package nsca

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/pires/go-proxyproto"

	"nsca_fast/stages/internal/testkit"
)

func TestProxyHeaderLen(t *testing.T) {
	v1 := []byte("PROXY TCP4 192.0.2.7 127.0.0.1 40001 5667\r\n")
	v2 := testkit.ProxyV2(t, proxyproto.PROXY, "192.0.2.7:40001", "127.0.0.1:5667")
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
		{"v2 proxy", testkit.ProxyV2(t, proxyproto.PROXY, "127.0.0.9:40003", "127.0.0.1:5667"), "127.0.0.9:40003", false, false},
		{"v2 proxy ipv6", testkit.ProxyV2(t, proxyproto.PROXY, "[2001:db8::9]:40004", "[::1]:5667"), "[2001:db8::9]:40004", false, false},
		{"v2 local", testkit.ProxyV2(t, proxyproto.LOCAL, "", ""), "", true, false},
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
