//go:build !cgo

package mcrypt

import "fmt"

const noCgo = "nsca_fast was built without cgo and libmcrypt (rebuild with CGO_ENABLED=1 and libmcrypt-dev installed)"

// Module is one open libmcrypt instance in 8-bit CFB mode. Without cgo no
// Module can be opened, so every method fails loudly rather than silently
// producing garbage.
type Module struct{}

// Open always fails without cgo, so nsca_fast can still run with the
// encryption methods that do not need libmcrypt and report the rest at startup.
func Open(algorithm string) (*Module, error) {
	return nil, fmt.Errorf("%w %q in cfb mode: %s", ErrCannotOpen, algorithm, noCgo)
}

// Algorithm panics without cgo: a Module cannot exist, so reaching it is a bug.
func (m *Module) Algorithm() string { panic("mcrypt: " + noCgo) }

// KeySize panics without cgo: a Module cannot exist, so reaching it is a bug.
func (m *Module) KeySize() int { panic("mcrypt: " + noCgo) }

// IVSize panics without cgo: a Module cannot exist, so reaching it is a bug.
func (m *Module) IVSize() int { panic("mcrypt: " + noCgo) }

// Init fails without cgo, as an error rather than a panic because Init
// already has an error path callers handle.
func (m *Module) Init(password, iv []byte) error {
	return fmt.Errorf("%w: %s", ErrInit, noCgo)
}

// InitSized fails without cgo, as Init does.
func (m *Module) InitSized(password, iv []byte, keySize int) error {
	return fmt.Errorf("%w: %s", ErrInit, noCgo)
}

// Decrypt panics without cgo: a Module cannot exist, so reaching it is a bug.
func (m *Module) Decrypt(buf []byte) { panic("mcrypt: " + noCgo) }

// DecryptFrom panics without cgo: a Module cannot exist, so reaching it is a bug.
func (m *Module) DecryptFrom(register, buf []byte) { panic("mcrypt: " + noCgo) }

// Encrypt panics without cgo: a Module cannot exist, so reaching it is a bug.
func (m *Module) Encrypt(buf []byte) { panic("mcrypt: " + noCgo) }

// Close does nothing without cgo, so deferred cleanup paths stay harmless.
func (m *Module) Close() {}
