package stages

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"nsca_fast/stages/counters"

	"github.com/golang/glog"

	"nsca_fast/conf/identities"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/diagnose"
	"nsca_fast/stages/emit/dialect"
	"nsca_fast/stages/emit/sink"
	"nsca_fast/stages/stage"
)

// The validate stage's own reasons to refuse a packet that decoded well.
var (
	errStale         = errors.New("stages: stale packet")
	errTooManyChecks = errors.New("stages: too many checks on one connection")
	errSpoofed       = errors.New("stages: host name does not resolve to the peer address")
	errUnmatched     = errors.New("stages: no secret this client may use decrypts its packet")
)

// validateConfig are the validate stage's settings.
type validateConfig struct {
	// Goroutines is how many validators share the connections; Depth
	// bounds each one's queue.
	Goroutines, Depth int
	// MaxPacketAge, when not zero, drops packets whose timestamp is further
	// than this from now. Since send_nsca echoes the server time of the init
	// packet, this measures time since the connection began, not client clocks.
	MaxPacketAge time.Duration
	// MaxChecks closes a connection that sends more checks than this (0: no cap).
	MaxChecks int
	// StrictSpoofing drops checks whose host name does not resolve to the
	// peer address, as stock's strict_mode_spoofing does.
	StrictSpoofing bool
	// Debug logs every accepted check, as stock's debug=1 does.
	Debug bool
}

// startValidate runs n validate goroutines, sharded by connection so that
// one client's results keep their order, and closes out when done.
func startValidate(ctx context.Context, in <-chan packet, out chan<- sink.Item, cfg validateConfig, env stage.Env) error {
	v := &validator{cfg: cfg, stats: env.Stats, log: env.Log, clients: env.Clients}
	stage.Sharded(ctx, "validate", in, max(cfg.Goroutines, 1), cfg.Depth, func(p packet) uint64 { return p.Conn.ID },
		func(ctx context.Context, _ int, in <-chan packet) {
			for p := range in {
				if p.NG != nil {
					if !v.ngResult(ctx, p, out) {
						return
					}
					continue
				}
				if p.Short != nil {
					v.short(p)
					continue
				}
				item, ok := v.check(p)
				putBuf(p.Data)
				if ok && !stage.Send(ctx, out, item) {
					return
				}
			}
		},
		func() { close(out) })
	return nil
}

type validator struct {
	cfg     validateConfig
	stats   *counters.Stats
	log     *counters.RateLog
	dns     dnsCache
	clients *diagnose.Registry // nil: not recorded
}

// short counts the incomplete packet a connection ended with: the tail of a
// connection already rejected is part of that rejection; otherwise it is a
// check the client did not finish sending.
func (v *validator) short(p packet) {
	c := p.Conn
	if c.rejected.Load() {
		v.stats.Dropped(counters.DropAfterReject).Add(1)
		return
	}
	v.stats.Dropped(counters.DropShort).Add(1)
	v.log.Eventf("ended inside a packet", c.Peer.Addr().String(), "dropped short packet from %s: connection ended (%s) after %d of %d bytes of a packet",
		c.Peer, p.Short.Why, p.Short.Got, p.Short.Want)
}

// check turns a decrypted packet into a result, or drops it with a counted
// and logged reason and has the connection closed, as stock closes it.
func (v *validator) check(p packet) (sink.Item, bool) {
	c := p.Conn
	if c.rejected.Load() {
		v.stats.Dropped(counters.DropAfterReject).Add(1)
		return sink.Item{}, false
	}
	now := time.Now()
	reason, err := v.verify(p, now)
	if err != nil {
		v.reject(c, reason, err)
		return sink.Item{}, false
	}
	if c.validate.checks == 1 && c.decrypt.sec != nil {
		if c.decrypt.sec.matches != nil {
			c.decrypt.sec.matches.Add(1)
		}
		v.clients.Seen(c.Peer.Addr().Unmap(), c.decrypt.sec.Name, c.decrypt.sec.method)
	}
	r := codec.Decode(p.Data)
	if k := c.decrypt.sec; k != nil && k.Rights != nil && !v.authorized(k.Rights, r) {
		// Refused like a spoofed host: the check, not the connection.
		v.stats.Dropped(counters.DropUnauthorized).Add(1)
		k.refused.Add(1)
		v.log.Eventf("sent results outside their identity's rights", c.Peer.Addr().String(),
			"refused check from %s: identity %q (%s) may not submit results for host %q service %q",
			c.Peer, k.Rights.Name, k.Rights.Where, r.Host, r.Service)
		return sink.Item{}, false
	}
	if v.cfg.StrictSpoofing && !v.hostMatchesPeer(r.Host, c) {
		// Stock drops the check but keeps the connection.
		v.stats.Dropped(counters.DropSpoofed).Add(1)
		v.log.Warningf(c.Peer.Addr().String(), "dropped check from %s: %v: %q", c.Peer, errSpoofed, r.Host)
		return sink.Item{}, false
	}
	v.stats.Validated.Add(1)
	if v.cfg.Debug {
		via := ""
		if c.Via.IsValid() {
			via = " (via " + c.Via.String() + ")"
		}
		glog.Infof("check from %s%s: host=%q service=%q return_code=%d output=%q", c.Peer, via, r.Host, r.Service, r.ReturnCode, r.Output)
	}
	return sink.Item{Result: r, Time: now.Unix(), ReadAt: p.ReadAt}, true
}

// ngResult passes on a check result of an nsca-ng client, which TLS has
// authenticated and the listener has authorized: what is left to check is
// strict_mode_spoofing. The client hears of the outcome through Ack only
// once the result is on the emit stage's queue. It returns false when the
// pipeline is torn down.
func (v *validator) ngResult(ctx context.Context, p packet, out chan<- sink.Item) bool {
	r, c := p.NG, p.Conn
	if v.cfg.StrictSpoofing && !v.hostMatchesPeer(r.Result.Host, c) {
		v.stats.Dropped(counters.DropSpoofed).Add(1)
		v.log.Warningf(c.Peer.Addr().String(), "dropped check from nsca-ng client %s: %v: %q", c.Peer, errSpoofed, r.Result.Host)
		r.Ack(errSpoofed)
		return true
	}
	v.stats.Validated.Add(1)
	if v.cfg.Debug {
		glog.Infof("check from nsca-ng client %s: host=%q service=%q return_code=%d output=%q", c.Peer, r.Result.Host, r.Result.Service, r.Result.ReturnCode, r.Result.Output)
	}
	if !stage.Send(ctx, out, sink.Item{Result: r.Result, Time: r.Time}) {
		v.stats.Dropped(counters.DropShutdown).Add(1)
		r.Ack(errNGShutdown)
		return false
	}
	r.Ack(nil)
	return true
}

// verify returns the drop reason and error for a packet that must not pass.
func (v *validator) verify(p packet, now time.Time) (string, error) {
	c := p.Conn
	if err := codec.Check(p.Data); err != nil {
		if c.decrypt.cipherErr != nil {
			err = fmt.Errorf("%w (decryption failed: %v)", err, c.decrypt.cipherErr)
		}
		if errors.Is(err, codec.ErrCRC) {
			return counters.DropBadCRC, err
		}
		return counters.DropBadVersion, err
	}
	if c.decrypt.unmatched {
		return counters.DropBadCRC, errUnmatched
	}
	if v.cfg.MaxPacketAge > 0 {
		ts := int64(codec.TimestampOf(p.Data))
		age := now.Unix() - ts
		if age > int64(v.cfg.MaxPacketAge/time.Second) || -age > int64(v.cfg.MaxPacketAge/time.Second) {
			return counters.DropStale, fmt.Errorf("%w: timestamp %d is %d s from now (max_packet_age=%v, connection began at %d)", errStale, ts, age, v.cfg.MaxPacketAge, c.InitTime)
		}
	}
	c.validate.checks++
	if v.cfg.MaxChecks > 0 && c.validate.checks > v.cfg.MaxChecks {
		return counters.DropTooManyChecks, fmt.Errorf("%w: max_checks_per_connection=%d", errTooManyChecks, v.cfg.MaxChecks)
	}
	return "", nil
}

// rejectSummary is how the log's summary line says what happened to the
// connections rejected for each reason: a wrong version, like a bad CRC,
// means the client's password or method is not ours.
var rejectSummary = map[string]string{
	counters.DropBadCRC:        "failed decryption",
	counters.DropBadVersion:    "failed decryption",
	counters.DropStale:         "sent packets older than max_packet_age",
	counters.DropTooManyChecks: "sent more than max_checks_per_connection checks",
}

func (v *validator) reject(c *clientConn, reason string, err error) {
	v.stats.Dropped(reason).Add(1)
	c.rejected.Store(true)
	v.clients.Failed(c.Peer.Addr().Unmap(), err.Error())
	v.log.Eventf(rejectSummary[reason], c.Peer.Addr().String(), "closing connection from %s: dropped packet %d: %v", c.Peer, c.validate.checks+1, err)
	c.requestClose()
}

// hostMatchesPeer reports whether the claimed host name resolves to the
// address the connection comes from. Answers are cached for a minute: a
// client sends many checks under one name, and a lookup per check would
// make the resolver the daemon's bottleneck.
func (v *validator) hostMatchesPeer(host string, c *clientConn) bool {
	addrs := v.dns.lookup(host)
	peer := c.Peer.Addr().Unmap()
	for _, a := range addrs {
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

// authorized says whether id may submit r, matched as nsca-ng matches the
// external command, with the output escaped as stock escapes it.
func (v *validator) authorized(id *identities.Identity, r codec.Result) bool {
	out, _ := dialect.Nagios.AppendCommand(nil, r.Output, r.Service == "")
	return id.AllowsResult(r.Host, r.Service, r.ReturnCode, string(out))
}
