package cipher

import (
	gocipher "crypto/cipher"
	"fmt"
	"slices"
)

// bulk is a keyed block cipher that knows 8-bit CFB decryption in bulk.
type bulk interface {
	// tail decrypts buf[bs:] in place, where bs is the block size and the
	// register before every byte is the bs bytes of buf before it: for i
	// from len(buf)-1 down to bs, buf[i] ^= E(buf[i-bs:i])[0]. Going down
	// keeps every register ciphertext while it is read.
	tail(buf []byte)
	// wipe overwrites the key schedule.
	wipe()
}

// nativeSpec describes one natively implemented method.
type nativeSpec struct {
	method    int
	algorithm string // libmcrypt's name
	keySize   int    // libmcrypt's largest key size, which NSCA always uses
	blockSize int
	newBulk   func(key []byte) (bulk, error)
	// ref is the libmcrypt algorithm SelfTest compares with, keyed as NSCA
	// keys it; "" for ciphers libmcrypt has no equal of (AES with a short
	// key, Crypto++'s GOST), which SelfTest skips.
	ref string
}

// natives are the methods with a native engine, keyed exactly as NSCA keys
// libmcrypt (checked bit for bit by the tests and by SelfTest).
var natives = []nativeSpec{
	{2, "des", 8, 8, newDESBulk, "des"},
	{3, "tripledes", 24, 8, newTripleDESBulk, "tripledes"},
	{14, "rijndael-128", 32, 16, newAESBulk, "rijndael-128"},
}

func nativeFor(method int) (nativeSpec, bool) {
	for _, s := range natives {
		if s.method == method {
			return s, true
		}
	}
	return nativeSpec{}, false
}

// HasNative says whether method has a native engine.
func HasNative(method int) bool {
	_, ok := nativeFor(method)
	return ok
}

// NativeMethods lists the method numbers with a native engine, ascending.
func NativeMethods() []int {
	out := make([]int, 0, len(natives))
	for _, s := range natives {
		out = append(out, s.method)
	}
	return out
}

func newNative(method int, algorithm string, password []byte) (Engine, error) {
	spec, ok := nativeFor(method)
	if !ok {
		return nil, fmt.Errorf("%w: %s (native methods: %v; use decryption_engine=%s or %s)",
			ErrNoNative, methodLabel(method, algorithm), NativeMethods(), EngineLibmcrypt, EngineAuto)
	}
	if algorithm != spec.algorithm {
		return nil, fmt.Errorf("%w: %s: method %d is %s", ErrMethod, methodLabel(method, algorithm), method, spec.algorithm)
	}
	return makeNative(spec, password)
}

// NewNativeAES returns a native engine for AES with a keySize-byte key (16,
// 24 or 32) in NSCA's 8-bit CFB: key = password truncated or zero-padded to
// keySize, register = first 16 bytes of the IV, running on across packets.
// method and algorithm only label the engine (e.g. NSClient++'s "aes128");
// method 14 rijndael-128 is keySize 32. SelfTest can only check keySize 32,
// the one libmcrypt serves, and skips the others.
func NewNativeAES(keySize, method int, algorithm string, password []byte) (Engine, error) {
	switch keySize {
	case 16, 24, 32:
	default:
		return nil, fmt.Errorf("%w: %s: AES key size %d (want 16, 24 or 32)", ErrMethod, methodLabel(method, algorithm), keySize)
	}
	ref := ""
	if keySize == 32 {
		ref = "rijndael-128" // libmcrypt's rijndael-128 always keys with 32 bytes in NSCA
	}
	return makeNative(nativeSpec{method, algorithm, keySize, 16, newAESBulk, ref}, password)
}

func makeNative(spec nativeSpec, password []byte) (Engine, error) {
	e := &nativeEngine{spec: spec, password: slices.Clone(password)}
	// Key once so that a bad key fails at startup, not per connection.
	k, err := e.NewKey()
	if err != nil {
		return nil, err
	}
	k.Close()
	return e, nil
}

type nativeEngine struct {
	spec     nativeSpec
	password []byte
}

func (e *nativeEngine) Kind() string      { return EngineNative }
func (e *nativeEngine) Method() int       { return e.spec.method }
func (e *nativeEngine) Algorithm() string { return e.spec.algorithm }
func (e *nativeEngine) KeySize() int      { return e.spec.keySize }
func (e *nativeEngine) IVSize() int       { return e.spec.blockSize }

func (e *nativeEngine) NewKey() (Key, error) {
	var kb [64]byte
	key := kb[:e.spec.keySize]
	copy(key, e.password) // truncated or zero-padded, as NSCA keys libmcrypt
	b, err := e.spec.newBulk(key)
	clear(kb[:])
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMethod, methodLabel(e.spec.method, e.spec.algorithm), err)
	}
	return &nativeKey{b: b, bs: e.spec.blockSize}, nil
}

// nativeKey decrypts a chunk with two bulk passes: the bytes whose register
// lies inside the chunk, then the first bs bytes, whose register starts in
// the State, from a small copy.
type nativeKey struct {
	b    bulk
	bs   int
	head [2 * MaxIVSize]byte
}

func (k *nativeKey) Decrypt(s *State, buf []byte) {
	bs := k.bs
	s.mustBe(bs, "native")
	if len(buf) == 0 {
		return
	}
	m := min(len(buf), bs)
	h := k.head[:bs+m]
	copy(h, s.reg[:bs])
	copy(h[bs:], buf[:m])
	s.advance(buf)
	if len(buf) > bs {
		k.b.tail(buf) // writes only buf[bs:], so buf[:bs] stays ciphertext
	}
	k.b.tail(h)
	copy(buf[:m], h[bs:])
	clear(h)
}

func (k *nativeKey) Close() {
	if k.b != nil {
		k.b.wipe()
		k.b = nil
	}
}

// blockBulk is the plain way, one Encrypt call of a crypto/cipher.Block per
// byte: AES without AES-NI.
type blockBulk struct {
	b  gocipher.Block
	bs int
	ks [MaxIVSize]byte
}

func (g *blockBulk) tail(buf []byte) {
	bs := g.bs
	ks := g.ks[:bs]
	for i := len(buf) - 1; i >= bs; i-- {
		g.b.Encrypt(ks, buf[i-bs:i])
		buf[i] ^= ks[0]
	}
}

// wipe drops the reference; crypto/* offers no way to clear its schedule.
func (g *blockBulk) wipe() { g.b = nil; clear(g.ks[:]) }
