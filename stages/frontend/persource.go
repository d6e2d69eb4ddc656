package frontend

import (
	"net/netip"
	"sync"
)

// SourceLimit caps what one client address may hold at once of a scarce
// thing, connections still in their handshake, once it runs short:
// without it one address that opens connections and says nothing holds
// every slot of a session limit until the handshake timeout, and every
// other client is locked out meanwhile. Every take is counted, enforced
// or not, so that the count is right when enforcing starts.
type SourceLimit struct {
	max  int
	mu   sync.Mutex
	held map[netip.Addr]int
}

// NewSourceLimit lets each address hold max at once; max < 1 is no limit.
func NewSourceLimit(max int) *SourceLimit {
	return &SourceLimit{max: max, held: map[netip.Addr]int{}}
}

// Take counts one more for addr, or, when the limit is to be enforced
// (the scarce thing is running short), reports false when addr holds its
// share already.
func (l *SourceLimit) Take(addr netip.Addr, enforce bool) bool {
	if l == nil || l.max < 1 {
		return true
	}
	addr = addr.Unmap()
	l.mu.Lock()
	defer l.mu.Unlock()
	if enforce && l.held[addr] >= l.max {
		return false
	}
	l.held[addr]++
	return true
}

// Release gives back what Take counted for addr.
func (l *SourceLimit) Release(addr netip.Addr) {
	if l == nil || l.max < 1 {
		return
	}
	addr = addr.Unmap()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[addr] <= 1 {
		delete(l.held, addr)
		return
	}
	l.held[addr]--
}

// Max is the share of one address.
func (l *SourceLimit) Max() int { return l.max }
