package nsca

import (
	"context"
	"encoding/binary"
	"time"

	"nsca_fast/conf/identities"
	"nsca_fast/stages/codec"
	"nsca_fast/stages/intake"
)

// The candidate search: with several secrets (decryption_method lists
// several methods, password_file several passwords, identities_file
// identities), a connection's first packet decides which one the
// connection uses. Only the candidates whose networks hold the client's
// address (the PROXY header's, when there is one) are tried, most
// specific network first; when one is left it serves as a single secret
// does, and when none is, the connection is refused. Otherwise the first
// packet is gathered undecrypted in the connection's packet buffer, and at
// each accepted size it is tried with every candidate (trial); the rest of
// the connection is decrypted with the candidate that matched, as with a
// single secret. With one secret for every address none of this runs.

// versionBytes is what a trial decrypts before it tells a wrong secret:
// the packet_version field, 3 in every packet. A wrong secret passes it
// once in 65536 tries and then costs one whole decryption, which the CRC
// refutes.
const versionBytes = 2

// choose gathers the first packet of c, which has no secret yet, from buf
// and tries the candidates at each accepted size. Once one matches, the
// packet is sent on and what buf holds beyond it is returned, for the
// matched secret to decrypt. When none matches (no version 3 with any of
// them, or no CRC at the largest size) the connection is handed to the
// first candidate, marked unmatched so that validation refuses it with the
// reason that candidate gives, as a single secret would. Until then it
// returns nil: the bytes are kept.
func (d *decrypter) choose(ctx context.Context, c *clientConn, buf []byte, readAt int64, out chan<- intake.Submission) []byte {
	largest := d.sizes[len(d.sizes)-1]
	if c.decrypt.cur == nil {
		d.rankFor(c)
		switch len(d.order) {
		case 0:
			c.decrypt.sec, c.decrypt.unmatched = &d.nobody, true
			return buf
		case 1:
			c.decrypt.sec = &d.cands[d.order[0]]
			return buf
		}
		c.decrypt.cur = getPacketBuf(largest)
	}
	for len(buf) > 0 {
		target := d.nextSize(c.decrypt.curN)
		n := min(target-c.decrypt.curN, len(buf))
		copy(c.decrypt.cur[c.decrypt.curN:], buf[:n])
		c.decrypt.curN += n
		buf = buf[n:]
		if c.decrypt.curN < target {
			return nil
		}
		start := time.Now()
		k, hopeless := d.trial(c, c.decrypt.cur[:c.decrypt.curN])
		took := time.Since(start)
		d.stats.DecryptNanos.Add(uint64(took))
		if d.flow != nil {
			d.flow.observe(c.decrypt.curN, took)
		}
		switch {
		case k != nil:
			d.matched(ctx, c, k, readAt, out)
			return buf
		case hopeless || c.decrypt.curN >= largest:
			d.unmatched(ctx, c, readAt, out)
			return buf
		}
	}
	return nil
}

// trial decrypts raw, the first bytes of c at one of the accepted sizes,
// with each candidate in turn into d.scratch, and returns the first whose
// plaintext is a valid packet, leaving the CFB state after it in
// d.state. hopeless says that no candidate even gave version 3: no size
// can match then.
func (d *decrypter) trial(c *clientConn, raw []byte) (k *keyed, hopeless bool) {
	st := &d.state // the decrypter's: a local would escape to the heap through Key
	pt := d.scratch[:len(raw)]
	hopeless = true
	d.rankFor(c)
	for _, i := range d.order {
		k := &d.cands[i]
		if k.Engine != nil {
			st.Start(k.Engine, c.IV[:])
		}
		copy(pt[:versionBytes], raw)
		k.trialDecrypt(st, c.IV[:], pt[:versionBytes], 0)
		if int16(binary.BigEndian.Uint16(pt)) != codec.Version {
			continue
		}
		hopeless = false
		copy(pt[versionBytes:], raw[versionBytes:])
		for off := versionBytes; off < len(pt); off += cgoSlice {
			// libmcrypt's calls are kept as short as decryptSliced keeps them.
			end := min(off+cgoSlice, len(pt))
			k.trialDecrypt(st, c.IV[:], pt[off:end], off)
		}
		if codec.Valid(pt) {
			return k, false
		}
	}
	return nil, hopeless
}

// matched gives c the secret k, whose trial left the first packet's
// plaintext in d.scratch and the stream after it in d.state, and sends
// that packet on.
func (d *decrypter) matched(ctx context.Context, c *clientConn, k *keyed, readAt int64, out chan<- intake.Submission) {
	c.decrypt.sec, c.decrypt.packetSize = k, c.decrypt.curN
	copy(c.decrypt.cur, d.scratch[:c.decrypt.curN])
	if k.Engine != nil {
		c.decrypt.stream, c.decrypt.streaming = d.state, true
	}
	d.stats.Received.Add(1)
	data := c.decrypt.cur[:c.decrypt.packetSize]
	c.decrypt.cur, c.decrypt.curN = nil, 0
	d.handOn(ctx, c, data, true, readAt, out)
}

// unmatched hands c, whose first bytes no candidate decrypts, to the first
// candidate tried, which decrypts and frames them as a single secret
// would, so that validation refuses the packet with that secret's reason.
func (d *decrypter) unmatched(ctx context.Context, c *clientConn, readAt int64, out chan<- intake.Submission) {
	c.decrypt.sec, c.decrypt.unmatched = &d.cands[d.order[0]], true
	raw := c.decrypt.cur[:c.decrypt.curN]
	c.decrypt.cur, c.decrypt.curN = nil, 0
	d.feedDecided(ctx, c, raw, readAt, out)
	putBuf(raw)
}

// rankFor sets d.order to the candidates that may serve c's address, most
// specific network first and in configuration order among equals.
func (d *decrypter) rankFor(c *clientConn) {
	addr := c.Peer.Addr()
	d.order = d.order[:0]
	for i := range d.cands {
		r := identities.Specificity(d.cands[i].Networks, addr)
		d.rank[i] = r
		if r < 0 {
			continue
		}
		// Insertion keeps it stable, and allocates nothing.
		j := len(d.order)
		d.order = append(d.order, i)
		for ; j > 0 && d.rank[d.order[j-1]] < r; j-- {
			d.order[j] = d.order[j-1]
		}
		d.order[j] = i
	}
}
