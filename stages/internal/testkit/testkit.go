// Package testkit holds helpers the tests of several stages packages
// share.
package testkit

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

// ProxyV2 is a PROXY protocol version 2 header with command cmd, from
// src to dst (addr:port; ignored for LOCAL).
func ProxyV2(t *testing.T, cmd proxyproto.ProtocolVersionAndCommand, src, dst string) []byte {
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

// WaitFor polls cond every 10 ms until it holds or timeout passes, and
// reports whether it held.
func WaitFor(timeout time.Duration, cond func() bool) bool {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
