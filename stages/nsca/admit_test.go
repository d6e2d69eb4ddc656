package nsca

import (
	"net/netip"
	"testing"

	"nsca_fast/stages/counters"
)

// One set of rules serves a client accepted directly and one named by a
// PROXY header: allowed_hosts applies to the client either way, the
// trusted proxies to the balancer at accept, max_connections only at
// accept (after the header the connection is counted open already).
func TestAdmissionRefusal(t *testing.T) {
	nets := func(s string) []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix(s)} }
	addr := netip.MustParseAddrPort
	g := &admission{maxConns: 1, allowed: nets("192.0.2.0/24"), trusted: nets("127.0.0.0/8"), stats: counters.NewStats()}
	for _, tc := range []struct {
		what string
		c    *clientConn
		open int64
		want string
	}{
		{"a client in allowed_hosts", &clientConn{connIdentity: connIdentity{Peer: addr("192.0.2.7:1000")}}, 0, ""},
		{"a client outside allowed_hosts", &clientConn{connIdentity: connIdentity{Peer: addr("198.51.100.7:1000")}}, 0, "not in allowed_hosts"},
		{"a client outside allowed_hosts at max_connections", &clientConn{connIdentity: connIdentity{Peer: addr("198.51.100.7:1000")}}, 1, "not in allowed_hosts"},
		{"a client at max_connections", &clientConn{connIdentity: connIdentity{Peer: addr("192.0.2.7:1000")}}, 1, "max_connections=1 reached"},
		{"a trusted balancer", &clientConn{connIdentity: connIdentity{Peer: addr("127.0.0.1:1000")}, read: connRead{awaitingHeader: true}}, 0, ""},
		{"an untrusted balancer", &clientConn{connIdentity: connIdentity{Peer: addr("192.0.2.7:1000")}, read: connRead{awaitingHeader: true}}, 0, "not in proxy_protocol_trusted"},
		{"a trusted balancer at max_connections", &clientConn{connIdentity: connIdentity{Peer: addr("127.0.0.1:1000")}, read: connRead{awaitingHeader: true}}, 1, "max_connections=1 reached"},
		{"a client behind the balancer", &clientConn{connIdentity: connIdentity{ID: 1, Peer: addr("192.0.2.7:1000"), Via: addr("127.0.0.1:1000")}}, 1, ""},
		{"a client behind the balancer outside allowed_hosts", &clientConn{connIdentity: connIdentity{ID: 1, Peer: addr("198.51.100.7:1000"), Via: addr("127.0.0.1:1000")}}, 1, "not in allowed_hosts"},
	} {
		g.stats.Open.Store(tc.open)
		if got := g.refusal(tc.c); got != tc.want {
			t.Errorf("%s: refusal %q, want %q", tc.what, got, tc.want)
		}
	}
	if got, want := (&clientConn{connIdentity: connIdentity{Peer: addr("192.0.2.7:1000"), Via: addr("127.0.0.1:1000")}}).who(), "192.0.2.7:1000 (via 127.0.0.1:1000)"; got != want {
		t.Errorf("behind a balancer: %q, want %q", got, want)
	}
	if got, want := (&clientConn{connIdentity: connIdentity{Peer: addr("192.0.2.7:1000")}}).who(), "192.0.2.7:1000"; got != want {
		t.Errorf("directly: %q, want %q", got, want)
	}
}
