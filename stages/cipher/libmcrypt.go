package cipher

import (
	"fmt"

	"nsca_fast/cgo/mcrypt"
)

// libmcryptEngine serves a method through the cgo binding.
type libmcryptEngine struct {
	method    int
	algorithm string
	password  []byte
	keySize   int
	ivSize    int
}

func newLibmcrypt(method int, algorithm string, password []byte) (Engine, error) {
	label := methodLabel(method, algorithm)
	if !haveCgo {
		return nil, fmt.Errorf("%w: %s needs libmcrypt, and this nsca_fast was built without cgo, so without libmcrypt", ErrLibmcrypt, label)
	}
	if method < 2 {
		return nil, fmt.Errorf("%w: %s is not a libmcrypt method", ErrMethod, label)
	}
	m, err := mcrypt.Open(algorithm)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLibmcrypt, label, err)
	}
	defer m.Close()
	if m.IVSize() <= 0 || m.IVSize() > MaxIVSize {
		return nil, fmt.Errorf("%w: %s: libmcrypt IV size %d out of range", ErrMethod, label, m.IVSize())
	}
	// Key once here so a key libmcrypt rejects fails at startup.
	if err := m.Init(password, nil); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLibmcrypt, label, err)
	}
	return &libmcryptEngine{
		method:    method,
		algorithm: algorithm,
		password:  append([]byte(nil), password...),
		keySize:   m.KeySize(),
		ivSize:    m.IVSize(),
	}, nil
}

func (e *libmcryptEngine) Kind() string      { return EngineLibmcrypt }
func (e *libmcryptEngine) Method() int       { return e.method }
func (e *libmcryptEngine) Algorithm() string { return e.algorithm }
func (e *libmcryptEngine) KeySize() int      { return e.keySize }
func (e *libmcryptEngine) IVSize() int       { return e.ivSize }

func (e *libmcryptEngine) NewKey() (Key, error) {
	m, err := mcrypt.Open(e.algorithm)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLibmcrypt, methodLabel(e.method, e.algorithm), err)
	}
	if err := m.Init(e.password, nil); err != nil {
		m.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrLibmcrypt, methodLabel(e.method, e.algorithm), err)
	}
	return &libmcryptKey{m: m, reg: make([]byte, e.ivSize)}, nil
}

// libmcryptKey decrypts with one cgo call per buffer: mcrypt_enc_set_state
// with the State's register, then mdecrypt_generic over the whole buffer.
type libmcryptKey struct {
	m *mcrypt.Module
	// reg is the register handed to C: a separate pointer-free allocation,
	// because the State usually lives inside a struct holding Go pointers.
	reg []byte
}

func (k *libmcryptKey) Decrypt(s *State, buf []byte) {
	s.mustBe(len(k.reg), "libmcrypt")
	if len(buf) == 0 {
		return
	}
	copy(k.reg, s.reg[:s.n])
	s.advance(buf)
	k.m.DecryptFrom(k.reg, buf)
}

func (k *libmcryptKey) Close() {
	if k.m != nil {
		k.m.Close()
		k.m = nil
	}
}
