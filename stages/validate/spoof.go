package validate

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"nsca_fast/stages/counters"
	"nsca_fast/stages/intake"
)

var errSpoofed = errors.New("validate: host name does not resolve to the peer address")

// spoofRule is strict_mode_spoofing: a check result whose host name does
// not resolve to the address it came from is dropped; stock keeps the
// connection.
var spoofRule = rule{
	name:    "spoofing",
	on:      func(c Config) bool { return c.StrictSpoofing },
	summary: "sent results for hosts that do not resolve to them",
	check: func(v *validator, s *intake.Submission) *intake.Refusal {
		if s.Kind != intake.KindResult || v.hostMatchesPeer(s.Result.Host, s.Source.Peer.Addr()) {
			return nil
		}
		return &intake.Refusal{Reason: counters.DropSpoofed, Err: errorf(errSpoofed, "%s", quoted(s.Result.Host))}
	},
}

// hostMatchesPeer reports whether the claimed host name resolves to the
// address the connection comes from. Answers are cached for a minute: a
// client sends many checks under one name, and a lookup per check would
// make the resolver the daemon's bottleneck.
func (v *validator) hostMatchesPeer(host string, peer netip.Addr) bool {
	peer = peer.Unmap()
	for _, a := range v.dns.lookup(host) {
		if a == peer {
			return true
		}
	}
	return false
}

// dnsCache remembers host name lookups for strict_mode_spoofing.
type dnsCache struct {
	mu      sync.Mutex
	entries map[string]dnsEntry
}

type dnsEntry struct {
	addrs   []netip.Addr
	expires time.Time
}

const (
	dnsTTL        = time.Minute
	dnsMaxEntries = 100000
)

func (d *dnsCache) lookup(host string) []netip.Addr {
	now := time.Now()
	d.mu.Lock()
	e, ok := d.entries[host]
	d.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.addrs
	}
	ips, _ := net.LookupIP(host)
	addrs := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		if a, ok := netip.AddrFromSlice(ip); ok {
			addrs = append(addrs, a.Unmap())
		}
	}
	d.mu.Lock()
	if d.entries == nil || len(d.entries) >= dnsMaxEntries {
		d.entries = map[string]dnsEntry{}
	}
	d.entries[host] = dnsEntry{addrs: addrs, expires: now.Add(dnsTTL)}
	d.mu.Unlock()
	return addrs
}
