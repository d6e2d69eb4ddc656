//go:build !cgo

package openssl

import "fmt"

const noCgo = "nsca_fast was built without cgo and OpenSSL (rebuild with CGO_ENABLED=1 and libssl-dev installed)"

// Context cannot exist without cgo.
type Context struct{}

// Key is one identity's pre-shared key.
type Key struct {
	Identity string
	PSK      []byte
}

// NewContext always fails without cgo.
func NewContext(keys []Key, ciphers string) (*Context, error) {
	return nil, fmt.Errorf("%w: %s", ErrContext, noCgo)
}

// Close does nothing without cgo.
func (c *Context) Close() {}

// Session cannot exist without cgo.
type Session struct{}

// NewSession panics without cgo: a Context cannot exist, so reaching it is a bug.
func (c *Context) NewSession(fd int) (*Session, error) { panic("openssl: " + noCgo) }

// Want says what a call that could not finish waits for.
type Want int

// What a call waits for.
const (
	Done Want = iota
	WantRead
	WantWrite
)

// Handshake panics without cgo: a Session cannot exist.
func (s *Session) Handshake() (Want, error) { panic("openssl: " + noCgo) }

// Read panics without cgo: a Session cannot exist.
func (s *Session) Read(buf []byte) (int, Want, error) { panic("openssl: " + noCgo) }

// Write panics without cgo: a Session cannot exist.
func (s *Session) Write(buf []byte) (int, Want, error) { panic("openssl: " + noCgo) }

// Shutdown panics without cgo: a Session cannot exist.
func (s *Session) Shutdown() { panic("openssl: " + noCgo) }

// Pending panics without cgo: a Session cannot exist.
func (s *Session) Pending() bool { panic("openssl: " + noCgo) }

// Flush panics without cgo: a Session cannot exist.
func (s *Session) Flush() (Want, error) { panic("openssl: " + noCgo) }

// Info describes a session.
type Info struct {
	Identity        string
	Known           bool
	Version, Cipher string
}

// Info panics without cgo: a Session cannot exist.
func (s *Session) Info() Info { panic("openssl: " + noCgo) }

// Free does nothing without cgo.
func (s *Session) Free() {}

// Trim does nothing without cgo: no session was ever made.
func Trim() bool { return false }

// Available reports why this build cannot serve TLS-PSK.
func Available() error { return fmt.Errorf("%w: %s", ErrContext, noCgo) }
