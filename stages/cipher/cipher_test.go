package cipher

import (
	"bytes"
	"crypto/aes"
	gocipher "crypto/cipher"
	"crypto/des"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

const (
	bigPacket   = 4304
	smallPacket = 720
)

func newRand(seed string) *rand.Rand {
	var s [32]byte
	copy(s[:], seed)
	return rand.New(rand.NewChaCha8(s))
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// refCFB8 is the textbook 8-bit CFB, one block encryption per byte, as an
// independent reference: it encrypts (decrypt false) or decrypts data.
func refCFB8(b gocipher.Block, iv, data []byte, decrypt bool) []byte {
	bs := b.BlockSize()
	reg := make([]byte, bs)
	copy(reg, iv)
	ks := make([]byte, bs)
	out := make([]byte, len(data))
	for i, c := range data {
		b.Encrypt(ks, reg)
		out[i] = c ^ ks[0]
		fb := out[i]
		if decrypt {
			fb = c
		}
		copy(reg, reg[1:])
		reg[bs-1] = fb
	}
	return out
}

// stdlibBlocks are the standard library's equals of native rows, by
// algorithm.
var stdlibBlocks = map[string]func(key []byte) (gocipher.Block, error){
	"des": des.NewCipher, "tripledes": des.NewTripleDESCipher,
	"rijndael-128": aes.NewCipher, "aes128": aes.NewCipher, "aes192": aes.NewCipher,
}

// refBlock keys the standard library's cipher the way NSCA keys libmcrypt.
func refBlock(t testing.TB, algorithm string, keySize int, password []byte) gocipher.Block {
	t.Helper()
	key := make([]byte, keySize)
	copy(key, password)
	b, err := stdlibBlocks[algorithm](key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decryptSplit decrypts ct as one stream in random chunks with k.
func decryptSplit(r *rand.Rand, e Engine, k Key, iv, ct []byte) []byte {
	var s State
	s.Start(e, iv)
	got := bytes.Clone(ct)
	forSplits(r, got, func(b []byte) { k.Decrypt(&s, b) })
	return got
}

type nativeCase struct {
	name    string
	method  int
	keySize int
	newEng  func(password []byte) (Engine, error)
}

// nativeCases are the rows of natives, each with its way to build an engine.
func nativeCases() []nativeCase {
	var cs []nativeCase
	for _, s := range natives {
		cs = append(cs, nativeCase{s.algorithm, s.method, s.keySize, func(pw []byte) (Engine, error) {
			return New(EngineNative, s.method, s.algorithm, pw)
		}})
	}
	return cs
}

// referenced are the rows of natives that libmcrypt has an equal of.
func referenced() []nativeSpec {
	var out []nativeSpec
	for _, s := range natives {
		if s.ref != "" {
			out = append(out, s)
		}
	}
	return out
}

// withAESNI runs f with the AES-NI path and with the crypto/aes fallback.
func withAESNI(t *testing.T, f func(t *testing.T)) {
	saved := useAESNI
	defer func() { useAESNI = saved }()
	for _, on := range []bool{true, false} {
		if on && !saved {
			continue
		}
		useAESNI = on
		t.Run(fmt.Sprintf("aesni=%v", on), f)
	}
}

// TestNativeAgainstStdlib checks every native engine that the standard
// library has an equal of against crypto/aes and crypto/des in textbook
// 8-bit CFB, with or without cgo.
func TestNativeAgainstStdlib(t *testing.T) {
	withAESNI(t, func(t *testing.T) {
		for _, c := range nativeCases() {
			if stdlibBlocks[c.name] == nil {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				r := newRand("stdlib " + c.name)
				for trial := range 30 {
					password := randBytes(r, r.IntN(201))
					iv := randBytes(r, 128)
					e, err := c.newEng(password)
					if err != nil {
						t.Fatal(err)
					}
					b := refBlock(t, c.name, c.keySize, password)
					size := []int{bigPacket, smallPacket, 1 + r.IntN(40)}[trial%3]
					plain := randBytes(r, size*(1+r.IntN(3)))
					ct := refCFB8(b, iv, plain, false)
					k, err := e.NewKey()
					if err != nil {
						t.Fatal(err)
					}
					if got := decryptSplit(r, e, k, iv, ct); !bytes.Equal(got, plain) {
						t.Fatalf("trial %d (%d bytes, password %d bytes): differs from textbook CFB8", trial, len(ct), len(password))
					}
					k.Close()
				}
			})
		}
	})
}

// TestStateAdvance: after each chunk the register is the last IVSize bytes
// of IV||ciphertext so far.
func TestStateAdvance(t *testing.T) {
	r := newRand("advance")
	e, err := New(EngineNative, 14, "rijndael-128", []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	k, _ := e.NewKey()
	defer k.Close()
	iv := randBytes(r, 128)
	var s State
	s.Start(e, iv)
	if !bytes.Equal(s.Register(), iv[:16]) {
		t.Fatalf("Start register %x, want %x", s.Register(), iv[:16])
	}
	stream := bytes.Clone(iv[:16])
	for range 200 {
		c := randBytes(r, r.IntN(40))
		stream = append(stream, c...)
		k.Decrypt(&s, c)
		if want := stream[len(stream)-16:]; !bytes.Equal(s.Register(), want) {
			t.Fatalf("register %x, want %x", s.Register(), want)
		}
	}
	var short State
	short.Start(e, iv[:5])
	if want := append(bytes.Clone(iv[:5]), make([]byte, 11)...); !bytes.Equal(short.Register(), want) {
		t.Fatalf("short IV register %x, want zero-padded %x", short.Register(), want)
	}
}

func expectPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func TestMisuse(t *testing.T) {
	e, _ := New(EngineNative, 2, "des", nil)
	a, _ := New(EngineNative, 14, "rijndael-128", nil)
	k, _ := e.NewKey()
	var s State
	expectPanic(t, "Decrypt with unstarted State", func() { k.Decrypt(&s, make([]byte, 9)) })
	s.Start(a, nil)
	expectPanic(t, "Decrypt with a State for another IV size", func() { k.Decrypt(&s, make([]byte, 9)) })
	s.Start(e, nil)
	k.Decrypt(&s, nil)
	k.Close()
	k.Close()
}

// noNativeMethod is a usable stock method without a native engine, for the
// tests of refusals and fallbacks; ok is false once every one has one.
func noNativeMethod() (method int, algorithm string, ok bool) {
	for _, m := range []struct {
		method    int
		algorithm string
	}{{8, "blowfish"}, {4, "cast-128"}, {9, "twofish"}, {20, "serpent"}, {6, "xtea"}, {11, "rc2"},
		{5, "cast-256"}, {10, "loki97"}, {15, "rijndael-192"}, {16, "rijndael-256"}, {23, "gost"}, {26, "saferplus"}} {
		if !HasNative(m.method) {
			return m.method, m.algorithm, true
		}
	}
	return 0, "", false
}

func TestErrors(t *testing.T) {
	type errCase struct {
		engine    string
		method    int
		algorithm string
		want      error
		mentions  []string
	}
	cases := []errCase{
		{"fast", 14, "rijndael-128", ErrEngine, []string{`"fast"`, "libmcrypt", "native", "auto"}},
		{EngineNative, 14, "blowfish", ErrMethod, []string{"decryption_method=14", "rijndael-128"}},
	}
	if m, alg, ok := noNativeMethod(); ok {
		cases = append(cases, errCase{EngineNative, m, alg, ErrNoNative, []string{fmt.Sprintf("decryption_method=%d", m), alg, "native"}})
	}
	for _, tc := range cases {
		_, err := New(tc.engine, tc.method, tc.algorithm, nil)
		if !errors.Is(err, tc.want) {
			t.Errorf("New(%q, %d, %q) = %v, want %v", tc.engine, tc.method, tc.algorithm, err, tc.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), "cipher: ") {
			t.Errorf("error %q lacks the cipher: prefix", err)
		}
		for _, m := range tc.mentions {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("error %q does not mention %s", err, m)
			}
		}
	}
	if _, err := makeNative(nativeSpec{99, "aes160", 20, 16, newAESBulk, ""}, nil); !errors.Is(err, ErrMethod) || !strings.Contains(err.Error(), "20") {
		t.Errorf("AES with a 20-byte key = %v, want ErrMethod naming the size", err)
	}
	for _, m := range NativeMethods() {
		if !HasNative(m) {
			t.Errorf("HasNative(%d) false", m)
		}
	}
	if m, _, ok := noNativeMethod(); HasNative(0) || ok && HasNative(m) {
		t.Errorf("HasNative true for a method without a native engine")
	}
}

func TestNativeKinds(t *testing.T) {
	for _, c := range nativeCases() {
		e, err := c.newEng([]byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind() != EngineNative || e.KeySize() != c.keySize {
			t.Errorf("%s: Kind %q KeySize %d", c.name, e.Kind(), e.KeySize())
		}
	}
	e, err := New(EngineAuto, 3, "tripledes", nil)
	if err != nil || e.Kind() != EngineNative || e.Method() != 3 || e.Algorithm() != "tripledes" || e.IVSize() != 8 {
		t.Fatalf("auto for tripledes = %v, %v; want native", e, err)
	}
}

// TestNoAllocs: decrypting a packet allocates nothing, whatever the split.
func TestNoAllocs(t *testing.T) {
	withAESNI(t, func(t *testing.T) {
		for _, c := range nativeCases() {
			e, _ := c.newEng([]byte("alloc"))
			k, _ := e.NewKey()
			var s State
			s.Start(e, make([]byte, 128))
			buf := make([]byte, bigPacket)
			if n := testing.AllocsPerRun(20, func() {
				k.Decrypt(&s, buf)
				k.Decrypt(&s, buf[:3])
				k.Decrypt(&s, buf[:700])
			}); n != 0 {
				t.Errorf("%s: %v allocations per packet", c.name, n)
			}
			k.Close()
		}
	})
}

func TestExpandKeyMatchesAES(t *testing.T) {
	// The AES-NI path checks the schedule end to end; this covers it on any
	// CPU by running the schedule through a tiny software AES round function.
	r := newRand("expand")
	for _, ks := range []int{16, 24, 32} {
		key := randBytes(r, ks)
		var rk [15 * 16]byte
		nr := expandKey(key, &rk)
		in := randBytes(r, 16)
		want := make([]byte, 16)
		b, _ := aes.NewCipher(key)
		b.Encrypt(want, in)
		if got := softAES(rk[:16*(nr+1)], nr, in); !bytes.Equal(got, want) {
			t.Errorf("AES-%d: schedule gives %x, crypto/aes %x", ks*8, got, want)
		}
	}
}

// softAES is the FIPS-197 cipher, byte by byte, for TestExpandKeyMatchesAES.
func softAES(rk []byte, nr int, in []byte) []byte {
	s := bytes.Clone(in)
	xor := func(r int) {
		for i := range 16 {
			s[i] ^= rk[16*r+i]
		}
	}
	xor(0)
	for r := 1; r <= nr; r++ {
		for i := range s {
			s[i] = sbox[s[i]]
		}
		var t [16]byte
		for c := range 4 {
			for row := range 4 {
				t[4*c+row] = s[4*((c+row)%4)+row]
			}
		}
		copy(s, t[:])
		if r != nr {
			for c := range 4 {
				a := [4]byte(s[4*c : 4*c+4])
				for row := range 4 {
					s[4*c+row] = gfMul(a[row], 2) ^ gfMul(a[(row+1)%4], 3) ^ a[(row+2)%4] ^ a[(row+3)%4]
				}
			}
		}
		xor(r)
	}
	return s
}
