package nsca

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/frontend"
	"nsca_fast/stages/rawsys"
)

// admission is how a new client is let in, the one way for a client the
// accept stage accepted and for one behind a PROXY header, whose address
// the read stage learns from the header: the access rules, the init
// packet, and the counters and log lines of either outcome.
type admission struct {
	// maxConns caps open connections; the ones over it are closed at once.
	maxConns int
	// allowed, when not empty, lists the client networks that may connect.
	allowed []netip.Prefix
	// proxy says every connection begins with a PROXY protocol header,
	// sent by a peer in trusted; the read stage takes it, and then lets
	// the client it names in.
	proxy   bool
	trusted []netip.Prefix
	stats   *counters.Stats
	log     *counters.RateLog
}

// admit applies the rules to c and, unless it waits for its PROXY header
// still, sends its init packet. It returns "" when c goes on, else why it
// ends (refused, or its init packet not sent), which is counted and logged
// here; the caller closes it.
func (g *admission) admit(c *clientConn) string {
	if why := g.refusal(c); why != "" {
		g.stats.Refused.Add(1)
		g.log.Eventf("were refused", c.Peer.Addr().String(), "refused connection from %s: %s", c.who(), why)
		return "refused"
	}
	if c.read.awaitingHeader {
		return ""
	}
	if err := c.greet(); err != nil {
		g.log.Warningf(c.Peer.Addr().String(), "closing connection from %s: %v", c.who(), err)
		return "init packet"
	}
	g.stats.Connections.Add(1)
	return ""
}

// refusal says why c is not served, or "" to serve it. At accept (c has
// no ID yet: accept gives it one once it is let in) the peer is checked,
// against trusted when a PROXY header is to come, else against allowed,
// and open connections against maxConns; after a PROXY header the client
// it names is checked against allowed, and c is counted open already.
func (g *admission) refusal(c *clientConn) string {
	ip := c.Peer.Addr()
	switch {
	case c.read.awaitingHeader:
		if !frontend.Allowed(g.trusted, ip) {
			return "not in proxy_protocol_trusted"
		}
	case len(g.allowed) > 0 && !frontend.Allowed(g.allowed, ip):
		return "not in allowed_hosts"
	}
	if c.ID == 0 && g.maxConns > 0 && g.stats.Open.Load() >= int64(g.maxConns) {
		return fmt.Sprintf("max_connections=%d reached", g.maxConns)
	}
	return ""
}

// who names c's client in log lines: with the load balancer it came
// through, when it came behind a PROXY header.
func (c *clientConn) who() string {
	if c.Via.IsValid() {
		return fmt.Sprintf("%s (via %s)", c.Peer, c.Via)
	}
	return c.Peer.String()
}

// ivs hands out the init packets' IVs from a buffer of random bytes made
// ivsPerRefill at a time: one getrandom(2) per that many connections. An
// IV is sent in the clear and only needs to be unpredictable, which the
// buffer's bytes from crypto/rand are.
var ivs struct {
	sync.Mutex
	buf [ivsPerRefill * codec.IVSize]byte
	off int
}

const ivsPerRefill = 32

func nextIV(iv *[codec.IVSize]byte) {
	ivs.Lock()
	defer ivs.Unlock()
	if ivs.off == 0 {
		rand.Read(ivs.buf[:])
	}
	copy(iv[:], ivs.buf[ivs.off:])
	ivs.off = (ivs.off + codec.IVSize) % len(ivs.buf)
}

// greet sends the connection its init packet: a fresh IV and the time.
func (c *clientConn) greet() error {
	c.InitTime = uint32(time.Now().Unix())
	nextIV(&c.IV)
	var init [codec.InitSize]byte
	codec.InitPacket(init[:], c.IV[:], c.InitTime)
	if n, err := rawsys.Write(c.read.fd, init[:]); n != len(init) {
		return fmt.Errorf("sending the init packet: wrote %d of %d bytes: %v", n, len(init), err)
	}
	return nil
}
