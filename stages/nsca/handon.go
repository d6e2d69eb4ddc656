package nsca

import (
	"context"
	"errors"
	"fmt"

	"nsca_fast/stages/codec"
	"nsca_fast/stages/counters"
	"nsca_fast/stages/intake"
	"nsca_fast/stages/stage"
)

// errUnmatched is the form refusal of a connection none of whose secrets
// decrypts its first packet.
var errUnmatched = errors.New("nsca: no secret this client may use decrypts its packet")

// handOn turns a decrypted packet of c into a submission and sends it to
// validation: send_nsca's wire format ends here. A packet that is no
// valid version-3 packet with its CRC is handed on as the connection's
// form refusal (Malformed), so that validation counts it, in order with
// what came before, and closes the connection, as stock does. data goes
// back to its pool. valid says the caller found data a valid packet
// already (codec.Valid: the first packet, which decides the framing or
// the secret), so that its CRC is not computed twice. It returns false
// once the pipeline is torn down.
func (d *decrypter) handOn(ctx context.Context, c *clientConn, data []byte, valid bool, readAt int64, out chan<- intake.Submission) bool {
	src := d.source(c)
	if src.Closed() {
		// A refusal closed the connection while this was on its way.
		d.stats.Dropped(counters.DropAfterReject).Add(1)
		putBuf(data)
		return true
	}
	s := intake.Submission{Source: src, ReadAt: readAt}
	if refusal := d.form(c, data, valid); refusal != nil {
		s.Malformed = refusal
	} else {
		s.Result = codec.Decode(data)
		// Time is left to validation, which stamps it in the order the
		// results go to the sinks (see intake.Submission.Time).
		s.Sent, s.HasSent = int64(s.Result.Timestamp), true
		d.firstCheck(c)
	}
	putBuf(data)
	return stage.Send(ctx, out, s)
}

// form refuses a packet that is no valid version-3 packet with its CRC
// (unless valid says it is one), or that no secret of c's decrypted.
func (d *decrypter) form(c *clientConn, data []byte, valid bool) *intake.Refusal {
	var err error
	if !valid {
		err = codec.Check(data)
	}
	if err != nil {
		if c.decrypt.cipherErr != nil {
			err = fmt.Errorf("%w (decryption failed: %v)", err, c.decrypt.cipherErr)
		}
		reason := counters.DropBadVersion
		if errors.Is(err, codec.ErrCRC) {
			reason = counters.DropBadCRC
		}
		return &intake.Refusal{Reason: reason, Err: err, Close: true}
	}
	if c.decrypt.unmatched {
		return &intake.Refusal{Reason: counters.DropBadCRC, Err: errUnmatched, Close: true}
	}
	return nil
}

// firstCheck counts, at c's first valid packet, the secret it matched,
// and records the client in /clients.
func (d *decrypter) firstCheck(c *clientConn) {
	k := c.decrypt.sec
	if c.decrypt.counted || k == nil {
		return
	}
	c.decrypt.counted = true
	if k.matches != nil {
		k.matches.Add(1)
	}
	d.clients.Seen(c.Peer.Addr().Unmap(), k.Name, k.method)
}

// source is c as validation sees it, filled at its first hand-off: by
// then a PROXY header has set Peer and the first packet the secret.
func (d *decrypter) source(c *clientConn) *intake.Source {
	src := &c.src
	if src.Front == "" {
		src.ID, src.Front, src.Peer, src.Via = c.ID, Front, c.Peer, c.Via
		src.Began, src.Stream, src.MaxChecks, src.Outcomes = int64(c.InitTime), true, d.maxChecks, c
		if c.decrypt.sec != nil {
			src.Identity = c.decrypt.sec.Rights
		}
	}
	return src
}

// Taken: a send_nsca client hears nothing of its results.
func (c *clientConn) Taken(*intake.Submission) {}

// Refused closes the connection when the refusal asks, as stock closes it
// at a bad packet; validation has counted and logged it.
func (c *clientConn) Refused(_ *intake.Submission, r intake.Refusal) {
	if r.Close {
		c.requestClose()
	}
}
