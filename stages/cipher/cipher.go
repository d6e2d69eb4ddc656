package cipher

import (
	"fmt"
	"slices"
)

// Engine names, as decryption_engine spells them: the only definition.
const (
	// EngineLibmcrypt calls libmcrypt through cgo, as stock NSCA does.
	EngineLibmcrypt = "libmcrypt"
	// EngineNative uses this package's Go implementation, or fails.
	EngineNative = "native"
	// EngineAuto is native where there is a native implementation whose
	// self-test passes, libmcrypt otherwise.
	EngineAuto = "auto"
	// DefaultEngine is what decryption_engine is unless set.
	DefaultEngine = EngineAuto
)

// IsEngine says whether name is one of the engine names.
func IsEngine(name string) bool {
	switch name {
	case EngineLibmcrypt, EngineNative, EngineAuto:
		return true
	}
	return false
}

// errUnknownEngine is ErrEngine naming name and the engines there are.
func errUnknownEngine(name string) error {
	return fmt.Errorf("%w %q (want %s, %s or %s)", ErrEngine, name, EngineLibmcrypt, EngineNative, EngineAuto)
}

// MaxIVSize bounds IVSize over all engines: libmcrypt's largest cfb register
// (rijndael-256) is 32 bytes.
const MaxIVSize = 32

// Engine serves one NSCA method with one implementation. It is immutable and
// safe for concurrent use; the per-stream work happens in the Keys it makes.
type Engine interface {
	// Kind is EngineLibmcrypt or EngineNative: what actually serves.
	Kind() string
	// Method is the NSCA decryption_method number.
	Method() int
	// Algorithm is the method's name (libmcrypt's, e.g. "rijndael-128").
	Algorithm() string
	// KeySize is the number of password bytes used, truncated or zero-padded.
	KeySize() int
	// IVSize is the CFB register length: the bytes of the IV used and the
	// bytes of ciphertext each byte's decryption depends on.
	IVSize() int
	// NewKey does the key schedule for the password the Engine was made with.
	// The Key is for one goroutine at a time: in decryption_mode 0 one per
	// connection, in mode 1 one per decrypt goroutine shared by its
	// connections. It must be closed.
	NewKey() (Key, error)
}

// Key is a keyed cipher instance, not safe for concurrent use.
type Key interface {
	// Decrypt decrypts buf in place as the continuation of the stream whose
	// register s holds, and advances s past buf: afterwards s holds the
	// last IVSize bytes of IV||ciphertext so far. Any split of a stream into
	// chunks gives the same plaintext. It does not allocate. s must have been
	// initialised with Start for this Key's Engine (else Decrypt panics), and
	// with the libmcrypt engine buf must not lie in memory holding Go pointers
	// (cgo's rule); plain []byte buffers are fine.
	Decrypt(s *State, buf []byte)
	// Close releases the key (C memory for libmcrypt) and wipes it. It is
	// idempotent; a closed Key must not be used.
	Close()
}

// State is the CFB register of one stream (one connection), a value with no
// pointers, meant to be embedded in the connection. The zero State is not
// ready: call Start first.
type State struct {
	reg [MaxIVSize]byte
	n   uint8 // IVSize, 0 until Start
}

// Start begins a stream for e: the register is the first e.IVSize() bytes of
// iv (the 128-byte IV of the init packet), zero-padded if iv is shorter as
// libmcrypt pads it. It may be called again to reuse the State for a new stream.
func (s *State) Start(e Engine, iv []byte) {
	s.start(e.IVSize(), iv)
}

func (s *State) start(ivSize int, iv []byte) {
	if ivSize <= 0 || ivSize > MaxIVSize {
		panic(fmt.Sprintf("cipher: IV size %d out of range", ivSize))
	}
	s.reg = [MaxIVSize]byte{}
	copy(s.reg[:ivSize], iv)
	s.n = uint8(ivSize)
}

// Register returns a copy of the current register (IVSize bytes), for tests
// and diagnostics.
func (s *State) Register() []byte { return slices.Clone(s.reg[:s.n]) }

// advance sets the register to the last n bytes of reg||ct. It must run
// before ct is decrypted in place.
func (s *State) advance(ct []byte) {
	n := int(s.n)
	if len(ct) >= n {
		copy(s.reg[:n], ct[len(ct)-n:])
		return
	}
	copy(s.reg[:n], s.reg[len(ct):n])
	copy(s.reg[n-len(ct):n], ct)
}

func (s *State) mustBe(n int, who string) {
	if int(s.n) != n {
		if s.n == 0 {
			panic("cipher: " + who + " Decrypt with a State never started")
		}
		panic(fmt.Sprintf("cipher: %s Decrypt with a State started for IV size %d, want %d", who, s.n, n))
	}
}

// New builds the engine of the given kind for NSCA method number method
// (algorithm is its libmcrypt name, or this project's for its own methods)
// with the given password, without proving it: the daemon serves what
// Choose returns, New is the part of it that tests and benchmarks use. The
// returned Engine's Kind says which serves. Native refuses a method without
// a native implementation, naming it; libmcrypt fails, naming libmcrypt,
// when built without cgo or when libmcrypt cannot open the algorithm. Auto
// falls back to libmcrypt only for methods without a native implementation.
func New(engine string, method int, algorithm string, password []byte) (Engine, error) {
	switch engine {
	case EngineLibmcrypt:
		return newLibmcrypt(method, algorithm, password)
	case EngineNative:
		return newNative(method, algorithm, password)
	case EngineAuto:
		if HasNative(method) {
			return newNative(method, algorithm, password)
		}
		return newLibmcrypt(method, algorithm, password)
	default:
		return nil, errUnknownEngine(engine)
	}
}

// methodLabel is how nsca.cfg writes a method: stock's number, or the name
// of one of this project's own, whose numbers are internal.
func methodLabel(method int, algorithm string) string {
	if method >= firstOwnMethod {
		return "decryption_method=" + algorithm
	}
	return fmt.Sprintf("decryption_method=%d (%s)", method, algorithm)
}

// HasLibmcrypt says whether this build has libmcrypt (was built with cgo).
func HasLibmcrypt() bool { return haveCgo }
