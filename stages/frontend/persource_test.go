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
	first, second, third := l.Take(a, true), l.Take(a, true), l.Take(a, true)
	if !first || !second || third {
		t.Fatal("the third take of one address was let in, or one of the first two refused")
	}
	if !l.Take(b, true) || !l.Take(netip.MustParseAddr("192.0.2.2"), true) || l.Take(b, true) {
		t.Fatal("a mapped and a plain address are one source, with its own share")
	}
	l.Release(a)
	if !l.Take(a, true) {
		t.Fatal("a released slot was not given again")
	}
	l.Release(a)
	l.Release(a)
	l.Release(b)
	l.Release(b)
	if len(l.held) != 0 {
		t.Fatalf("%d addresses kept after every slot was released", len(l.held))
	}
	for range 5 {
		if !l.Take(a, false) {
			t.Fatal("a take that is not enforced was refused")
		}
	}
	if l.Take(a, true) || l.held[a] != 5 {
		t.Fatalf("after 5 takes not enforced, an enforced one was let in, or the count is %d", l.held[a])
	}
	if !NewSourceLimit(0).Take(a, true) {
		t.Fatal("0 is no limit")
	}
}
