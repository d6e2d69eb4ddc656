package openssl

import "errors"

// Errors of the package; each is wrapped with OpenSSL's own reason.
var (
	// ErrContext is returned when a server context cannot be made.
	ErrContext = errors.New("openssl: cannot set up a TLS-PSK server context")
	// ErrSession is returned when a connection cannot be given a session.
	ErrSession = errors.New("openssl: cannot start a TLS session")
	// ErrTLS is a failed handshake, read or write: the session is unusable.
	ErrTLS = errors.New("openssl: TLS")
	// ErrEOF is a connection the peer closed without close_notify, as a
	// port scanner or a client that gave up does; it comes with ErrTLS.
	ErrEOF = errors.New("the connection ended")
	// ErrClosed is the peer's close_notify: it sends nothing more.
	ErrClosed = errors.New("openssl: peer closed the TLS session")
)
