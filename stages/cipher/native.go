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

// nativeSpec describes one natively implemented method: one row of natives.
type nativeSpec struct {
	method    int
	algorithm string // libmcrypt's name; this project's for its own methods
	keySize   int    // the key NSCA makes of the password (libmcrypt's largest for stock's methods)
	blockSize int
	newBulk   func(key []byte) (bulk, error)
	// ref is the libmcrypt algorithm SelfTest compares with, keyed with
	// keySize bytes as NSCA keys it; "" for ciphers libmcrypt has no equal
	// of (Crypto++'s GOST), which SelfTest skips.
	ref string
}

// own says whether spec is one of this project's own methods (see
// MethodAES128), which only the native engine serves.
func (s nativeSpec) own() bool { return s.method >= firstOwnMethod }

// Numbers of the methods this project adds for NSClient++: ciphers it
// encrypts with that stock NSCA has no method number for. They lie beyond
// stock's 0..26, so that no stock number ever changes meaning, and are
// internal: nsca.cfg names them.
const (
	MethodAES128   = 100 // NSClient++'s aes128: AES, 16-byte key
	MethodAES192   = 101 // NSClient++'s aes192: AES, 24-byte key
	MethodGOST     = 102 // NSClient++'s gost: Crypto++'s GOST 28147-89 (not stock's 23)
	firstOwnMethod = MethodAES128
)

// natives are the methods with a native engine, keyed exactly as NSCA keys
// libmcrypt (checked bit for bit by the tests and by SelfTest). A method is
// added with the file of its bulk cipher and one row here.
var natives = []nativeSpec{
	{2, "des", 8, 8, newDESBulk, "des"},
	{3, "tripledes", 24, 8, newTripleDESBulk, "tripledes"},
	{4, "cast-128", 16, 8, newCAST128Bulk, "cast-128"},
	{5, "cast-256", 32, 16, newCAST256Bulk, "cast-256"},
	{6, "xtea", 16, 8, newXTEABulk, "xtea"},
	{8, "blowfish", 56, 8, newBlowfishBulk, "blowfish"},
	{9, "twofish", 32, 16, newTwofishBulk, "twofish"},
	{10, "loki97", 32, 16, newLokiBulk, "loki97"},
	{11, "rc2", 128, 8, newRC2Bulk, "rc2"},
	{14, "rijndael-128", 32, 16, newAESBulk, "rijndael-128"},
	{15, "rijndael-192", 32, 24, newRijndaelBulk(6), "rijndael-192"},
	{16, "rijndael-256", 32, 32, newRijndaelBulk(8), "rijndael-256"},
	{20, "serpent", 32, 16, newSerpentBulk, "serpent"},
	{23, "gost", 32, 8, newGOSTBulk(gostLibmcrypt), "gost"},
	{26, "saferplus", 32, 16, newSaferBulk, "saferplus"},
	{MethodAES128, "aes128", 16, 16, newAESBulk, "rijndael-128"},
	{MethodAES192, "aes192", 24, 16, newAESBulk, "rijndael-128"},
	{MethodGOST, "gost", 32, 8, newGOSTBulk(gostCryptopp), ""},
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

// NativeMethods lists the numbers of stock's methods that have a native
// engine, ascending (this project's own methods, always native, are
// OwnMethods).
func NativeMethods() []int {
	var out []int
	for _, s := range natives {
		if !s.own() {
			out = append(out, s.method)
		}
	}
	return out
}

// OwnMethod is one of the methods this project adds (see MethodAES128).
type OwnMethod struct {
	Number int
	Name   string // what nsca.cfg's decryption_method says
}

// OwnMethods lists this project's own methods, in number order.
func OwnMethods() []OwnMethod {
	var out []OwnMethod
	for _, s := range natives {
		if s.own() {
			out = append(out, OwnMethod{s.method, s.algorithm})
		}
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
	var kb [128]byte // rc2's 128 bytes are libmcrypt's largest key
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
