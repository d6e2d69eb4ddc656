package frontend

import (
	"net/netip"
	"testing"
)

// TestSourceLimit: one address gets its share and no more, another its
// own, and what is released can be taken again; the map forgets an
// address that holds nothing.
func TestSourceLimit(t *testing.T) {
	l := NewSourceLimit(2)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("::ffff:192.0.2.2")
	if !l.Take(a) || !l.Take(a) || l.Take(a) {
		t.Fatal("the third take of one address was let in, or one of the first two refused")
	}
	if !l.Take(b) || !l.Take(netip.MustParseAddr("192.0.2.2")) || l.Take(b) {
		t.Fatal("a mapped and a plain address are one source, with its own share")
	}
	l.Release(a)
	if !l.Take(a) {
		t.Fatal("a released slot was not given again")
	}
	l.Release(a)
	l.Release(a)
	l.Release(b)
	l.Release(b)
	if len(l.held) != 0 {
		t.Fatalf("%d addresses kept after every slot was released", len(l.held))
	}
	if !NewSourceLimit(0).Take(a) {
		t.Fatal("0 is no limit")
	}
}
