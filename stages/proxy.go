package stages

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/pires/go-proxyproto"
)

// errProxyHeader wraps every reason a connection's PROXY protocol header is
// refused.
var errProxyHeader = errors.New("stages: proxy header")

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
