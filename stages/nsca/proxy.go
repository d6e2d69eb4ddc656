package nsca

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/pires/go-proxyproto"
	"golang.org/x/sys/unix"

	"nsca_fast/stages/stage"
)

// errProxyHeader wraps every reason a connection's PROXY protocol header is
// refused.
var errProxyHeader = errors.New("nsca: proxy header")

// proxyHeaderMax bounds a PROXY header. Version 1 is at most 107 bytes;
// version 2 is 16 bytes plus addresses and TLVs, which HAProxy keeps to a
// few hundred. A peer that claims more is not a load balancer we know.
const proxyHeaderMax = 1024

// The signatures that begin a version 1 and a version 2 header.
var (
	proxyV1Signature = []byte("PROXY ")
	proxyV2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")
)

// proxyV1Max is the longest version 1 line the specification allows.
const proxyV1Max = 107

// proxyHeaderLen says how long the header at the start of b is, or 0 when b
// is a valid beginning that needs more bytes. go-proxyproto parses from a
// bufio.Reader and would block for the missing bytes, so the read stage
// collects a complete header first and only then hands it over.
func proxyHeaderLen(b []byte) (int, error) {
	switch {
	case len(b) == 0:
		return 0, nil
	case bytes.HasPrefix(b, proxyV1Signature[:min(len(b), len(proxyV1Signature))]):
		if i := bytes.Index(b[:min(len(b), proxyV1Max)], []byte("\r\n")); i >= 0 {
			return i + 2, nil
		}
		if len(b) >= proxyV1Max {
			return 0, fmt.Errorf("%w: version 1 line longer than %d bytes", errProxyHeader, proxyV1Max)
		}
		return 0, nil
	case bytes.HasPrefix(b, proxyV2Signature[:min(len(b), len(proxyV2Signature))]):
		if len(b) < 16 {
			return 0, nil
		}
		n := 16 + int(binary.BigEndian.Uint16(b[14:16]))
		if n > proxyHeaderMax {
			return 0, fmt.Errorf("%w: version 2 header of %d bytes, more than %d", errProxyHeader, n, proxyHeaderMax)
		}
		if len(b) < n {
			return 0, nil
		}
		return n, nil
	}
	return 0, fmt.Errorf("%w: the connection does not begin with a PROXY header", errProxyHeader)
}

// proxySource parses a complete header. local reports a LOCAL command (v2)
// or an UNKNOWN transport (v1): the load balancer speaking for itself, as in
// HAProxy's health checks, with no client behind it.
func proxySource(header []byte) (src netip.AddrPort, local bool, err error) {
	h, err := proxyproto.Read(bufio.NewReaderSize(bytes.NewReader(header), max(len(header), 16)))
	if err != nil {
		return netip.AddrPort{}, false, fmt.Errorf("%w: %w", errProxyHeader, err)
	}
	if h.Command.IsLocal() {
		return netip.AddrPort{}, true, nil
	}
	tcp, ok := h.SourceAddr.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false, fmt.Errorf("%w: source %v is not a TCP address", errProxyHeader, h.SourceAddr)
	}
	ap := tcp.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), false, nil
}

// readHeader reads what there is of the connection's PROXY header and, once
// it is complete, takes the client address from it, applies allowed_hosts
// and greets the client. It reports whether the connection goes on to
// client data; otherwise it is closed or still waiting for the header.
// Client bytes read along with the header are passed on as the start of
// the stream.
func (r *reader) readHeader(ctx context.Context, c *clientConn, out *stage.Shards[chunk]) bool {
	var buf [proxyHeaderMax]byte
	n, err := unix.Read(c.read.fd, buf[:proxyHeaderMax-len(c.read.header)])
	switch {
	case n == 0 && err == nil && len(c.read.header) == 0:
		// A balancer's plain TCP health check: connect, then close.
		r.stats.HealthChecks.Add(1)
		r.closeConn(ctx, c, out, "")
		return false
	case n == 0 && err == nil:
		r.stats.Refused.Add(1)
		r.log.Warningf(c.Peer.Addr().String(), "connection from %s closed after %d bytes of a PROXY header", c.Peer, len(c.read.header))
		r.closeConn(ctx, c, out, "")
		return false
	case err == unix.EAGAIN || err == unix.EINTR:
		return false
	case err != nil:
		r.closeConn(ctx, c, out, err.Error())
		return false
	}
	c.read.header = append(c.read.header, buf[:n]...)
	size, err := proxyHeaderLen(c.read.header)
	if err == nil && size == 0 {
		if len(c.read.header) >= proxyHeaderMax {
			err = fmt.Errorf("%w: incomplete after %d bytes", errProxyHeader, len(c.read.header))
		} else {
			return false
		}
	}
	var src netip.AddrPort
	local := false
	if err == nil {
		src, local, err = proxySource(c.read.header[:size])
	}
	switch {
	case err != nil:
		r.stats.Refused.Add(1)
		r.log.Warningf(c.Peer.Addr().String(), "closing connection from %s: %v", c.Peer, err)
		r.closeConn(ctx, c, out, "bad PROXY header")
		return false
	case local:
		r.stats.HealthChecks.Add(1)
		r.closeConn(ctx, c, out, "")
		return false
	}
	c.Via, c.Peer = c.Peer, src
	c.read.awaitingHeader = false
	if why := r.cfg.admission.admit(c); why != "" {
		r.closeConn(ctx, c, out, why)
		return false
	}
	rest := c.read.header[size:]
	c.read.header = nil
	c.read.windowStart, c.read.windowBytes = time.Now().UnixNano(), c.read.bytesRead
	if len(rest) > 0 {
		// A client that did not wait for its init packet.
		c.read.bytesRead += uint64(len(rest))
		b := getBuf(r.cfg.ChunkSize)
		b = shrinkChunk(b, copy(b, rest))
		r.flow.take(c, cap(b))
		return out.Send(ctx, chunk{conn: c, buf: b, readAt: r.readAt})
	}
	return true
}
