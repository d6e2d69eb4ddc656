//go:build cgo

package mcrypt

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// NSCA v3 encryption method numbers of the libmcrypt algorithms that work in
// cfb mode (0 "none" and 1 "XOR" are not libmcrypt).
type algorithm struct {
	method int // NSCA encryption_method
	name   string
}

var usable = []algorithm{
	{2, "des"},
	{3, "tripledes"},
	{4, "cast-128"},
	{5, "cast-256"},
	{6, "xtea"},
	{8, "blowfish"},
	{9, "twofish"},
	{10, "loki97"},
	{11, "rc2"},
	{14, "rijndael-128"},
	{15, "rijndael-192"},
	{16, "rijndael-256"},
	{20, "serpent"},
	{23, "gost"},
	{26, "saferplus"},
}

// NSCA methods that name a libmcrypt algorithm which cannot run in cfb mode.
var unopenable = []algorithm{
	{7, "threeway"},
	{12, "arcfour"},
	{19, "wake"},
	{22, "enigma"},
	{24, "safer-sk64"},
	{25, "safer-sk128"},
}

const (
	bigPacket   = 4304 // NSCA 3.x packet with 4096-byte plugin output
	smallPacket = 720  // NSCA 2.x packet with 512-byte plugin output
	serverIV    = 128  // NSCA always sends 128 bytes of IV
)

func randBytes(r *rand.ChaCha8, n int) []byte {
	b := make([]byte, n)
	r.Read(b)
	return b
}

func newRand(seed string) *rand.ChaCha8 {
	var s [32]byte
	copy(s[:], seed)
	return rand.NewChaCha8(s)
}

func mustOpen(t testing.TB, name string) *Module {
	t.Helper()
	m, err := Open(name)
	if err != nil {
		t.Fatalf("Open(%q): %v", name, err)
	}
	t.Cleanup(m.Close)
	return m
}

func mustInit(t testing.TB, m *Module, password, iv []byte) {
	t.Helper()
	if err := m.Init(password, iv); err != nil {
		t.Fatalf("%s Init: %v", m.Algorithm(), err)
	}
}

// encryptStream plays send_nsca: one instance, packets back to back.
func encryptStream(t testing.TB, name string, password, iv []byte, plain [][]byte) [][]byte {
	t.Helper()
	m := mustOpen(t, name)
	mustInit(t, m, password, iv)
	var ct [][]byte
	for _, p := range plain {
		c := bytes.Clone(p)
		m.Encrypt(c)
		ct = append(ct, c)
	}
	return ct
}

// decryptRunning is the original daemon's way ("mode 0").
func decryptRunning(t testing.TB, name string, password, iv []byte, ct [][]byte) [][]byte {
	t.Helper()
	m := mustOpen(t, name)
	mustInit(t, m, password, iv)
	var out [][]byte
	for _, c := range ct {
		d := bytes.Clone(c)
		m.Decrypt(d)
		out = append(out, d)
	}
	return out
}

// decryptResumed keys once with a zero IV and resumes every packet from its
// register ("mode 1"), proving per-packet decryption needs no running state.
func decryptResumed(t testing.TB, name string, password, iv []byte, ct [][]byte) [][]byte {
	t.Helper()
	m := mustOpen(t, name)
	mustInit(t, m, password, make([]byte, serverIV))
	reg := bytes.Clone(iv[:m.IVSize()])
	var out [][]byte
	for _, c := range ct {
		d := bytes.Clone(c)
		m.DecryptFrom(reg, d)
		out = append(out, d)
		reg = bytes.Clone(c[len(c)-m.IVSize():])
	}
	return out
}

func comparePackets(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d packets, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("%s: packet %d differs", what, i)
		}
	}
}

func testPasswords(r *rand.ChaCha8) map[string][]byte {
	return map[string][]byte{
		"short": []byte("nsca-secret"),
		"long":  randBytes(r, 300), // longer than every key size (rc2's 128 is largest)
		"empty": nil,
	}
}

func TestRoundTrip(t *testing.T) {
	for _, alg := range usable {
		t.Run(alg.name, func(t *testing.T) {
			r := newRand(alg.name)
			for pwName, password := range testPasswords(r) {
				t.Run(pwName, func(t *testing.T) {
					iv := randBytes(r, serverIV)
					sizes := []int{bigPacket, bigPacket, bigPacket}
					mixed := []int{smallPacket, bigPacket, smallPacket, smallPacket, bigPacket}
					for _, sz := range [][]int{sizes, mixed} {
						var plain [][]byte
						for _, n := range sz {
							plain = append(plain, randBytes(r, n))
						}
						ct := encryptStream(t, alg.name, password, iv, plain)
						for i := range ct {
							if bytes.Equal(ct[i], plain[i]) {
								t.Fatalf("packet %d not encrypted", i)
							}
						}
						comparePackets(t, fmt.Sprintf("mode 0 %v", sz), decryptRunning(t, alg.name, password, iv, ct), plain)
						comparePackets(t, fmt.Sprintf("mode 1 %v", sz), decryptResumed(t, alg.name, password, iv, ct), plain)
					}
				})
			}
		})
	}
}

// TestSplitPacket covers a packet read in two parts (the 2.x-sized prefix,
// then the rest), resumed from the prefix's tail or simply continued.
func TestSplitPacket(t *testing.T) {
	for _, alg := range usable {
		t.Run(alg.name, func(t *testing.T) {
			r := newRand("split " + alg.name)
			password, iv := []byte("split-secret"), randBytes(r, serverIV)
			plain := [][]byte{randBytes(r, bigPacket), randBytes(r, bigPacket)}
			ct := encryptStream(t, alg.name, password, iv, plain)

			m := mustOpen(t, alg.name)
			mustInit(t, m, password, nil)
			ivs := m.IVSize()
			c := bytes.Clone(ct[1])
			head, tail := c[:smallPacket], c[smallPacket:]
			headReg := bytes.Clone(head[len(head)-ivs:])
			m.DecryptFrom(ct[0][bigPacket-ivs:], head)
			m.DecryptFrom(headReg, tail)
			if !bytes.Equal(c, plain[1]) {
				t.Errorf("DecryptFrom head, DecryptFrom tail: wrong plaintext")
			}

			c = bytes.Clone(ct[1])
			m.DecryptFrom(ct[0][bigPacket-ivs:], c[:smallPacket])
			m.Decrypt(c[smallPacket:])
			if !bytes.Equal(c, plain[1]) {
				t.Errorf("DecryptFrom head, Decrypt tail: wrong plaintext")
			}

			// An empty buf must still set the register for a following Decrypt.
			c = bytes.Clone(ct[1])
			m.Decrypt(make([]byte, 17)) // disturb the running state
			m.DecryptFrom(ct[0][bigPacket-ivs:], nil)
			m.Decrypt(c)
			if !bytes.Equal(c, plain[1]) {
				t.Errorf("DecryptFrom empty, Decrypt: wrong plaintext")
			}
		})
	}
}

// TestKeyAndIVPadding pins down NSCA's key and IV derivation: password
// zero-padded or truncated to KeySize, IV truncated or zero-padded to IVSize.
func TestKeyAndIVPadding(t *testing.T) {
	for _, alg := range usable {
		t.Run(alg.name, func(t *testing.T) {
			r := newRand("pad " + alg.name)
			m := mustOpen(t, alg.name)
			ks, ivs := m.KeySize(), m.IVSize()
			plain := [][]byte{randBytes(r, 100)}
			long := randBytes(r, ks+50)
			iv := randBytes(r, serverIV)
			short := []byte("pw")
			shortIV := iv[:3]
			same := func(what string, pw1, iv1, pw2, iv2 []byte) {
				t.Helper()
				a := encryptStream(t, alg.name, pw1, iv1, plain)
				b := encryptStream(t, alg.name, pw2, iv2, plain)
				if !bytes.Equal(a[0], b[0]) {
					t.Errorf("%s: ciphertexts differ", what)
				}
			}
			same("long password truncated", long, iv, long[:ks], iv)
			same("short password zero-padded", short, iv, append(bytes.Clone(short), make([]byte, ks-len(short))...), iv)
			same("empty password is zero key", nil, iv, make([]byte, ks), iv)
			same("IV truncated", short, iv, short, iv[:ivs])
			same("short IV zero-padded", short, shortIV, short, append(bytes.Clone(shortIV), make([]byte, ivs-len(shortIV))...))
			same("nil IV is zero IV", short, nil, short, make([]byte, ivs))

			a := encryptStream(t, alg.name, long[:ks], iv, plain)
			changed := bytes.Clone(long[:ks])
			changed[ks-1] ^= 0x80 // not bit 0: DES keys ignore their parity bits
			if b := encryptStream(t, alg.name, changed, iv, plain); bytes.Equal(a[0], b[0]) {
				t.Errorf("last key byte is ignored")
			}
		})
	}
}

func TestReinit(t *testing.T) {
	r := newRand("reinit")
	password, iv := []byte("reinit"), randBytes(r, serverIV)
	plain := [][]byte{randBytes(r, bigPacket)}
	ct := encryptStream(t, "blowfish", password, iv, plain)

	m := mustOpen(t, "blowfish")
	mustInit(t, m, []byte("other password"), randBytes(r, serverIV))
	m.Decrypt(make([]byte, 99))
	mustInit(t, m, password, iv)
	d := bytes.Clone(ct[0])
	m.Decrypt(d)
	if !bytes.Equal(d, plain[0]) {
		t.Errorf("Init after use did not reset key and IV")
	}
}

func TestUnopenable(t *testing.T) {
	for _, alg := range append(unopenable, algorithm{-1, "no-such-cipher"}, algorithm{-1, ""}) {
		m, err := Open(alg.name)
		if err == nil {
			m.Close()
			t.Errorf("Open(%q) succeeded, want failure", alg.name)
			continue
		}
		if !errors.Is(err, ErrCannotOpen) {
			t.Errorf("Open(%q) = %v, want ErrCannotOpen", alg.name, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", alg.name)) || !strings.HasPrefix(err.Error(), "mcrypt: ") {
			t.Errorf("Open(%q) error %q should start with mcrypt: and name the algorithm", alg.name, err)
		}
	}
}

func TestSizes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		key, iv int
	}{
		{"des", 8, 8},
		{"tripledes", 24, 8},
		{"rijndael-128", 32, 16},
		{"rijndael-192", 32, 24},
		{"rijndael-256", 32, 32},
		{"blowfish", 56, 8},
		{"rc2", 128, 8},
	} {
		m := mustOpen(t, tc.name)
		if m.KeySize() != tc.key || m.IVSize() != tc.iv {
			t.Errorf("%s: KeySize %d IVSize %d, want %d %d", tc.name, m.KeySize(), m.IVSize(), tc.key, tc.iv)
		}
		if m.Algorithm() != tc.name {
			t.Errorf("Algorithm() = %q, want %q", m.Algorithm(), tc.name)
		}
	}
}

// cfb8 is an independent 8-bit CFB: before each byte, encrypt the register,
// XOR its first byte, then shift the ciphertext byte into the register.
func cfb8(block cipher.Block, iv, data []byte, decrypt bool) []byte {
	reg := bytes.Clone(iv[:block.BlockSize()])
	ks := make([]byte, block.BlockSize())
	out := make([]byte, len(data))
	for i, b := range data {
		block.Encrypt(ks, reg)
		out[i] = b ^ ks[0]
		c := out[i]
		if decrypt {
			c = b
		}
		copy(reg, reg[1:])
		reg[len(reg)-1] = c
	}
	return out
}

// TestAgainstStdlib checks the binding (key derivation included) against
// Go's own ciphers, so the libmcrypt tests are not only self-consistent.
func TestAgainstStdlib(t *testing.T) {
	for _, tc := range []struct {
		name   string
		newBlk func(key []byte) (cipher.Block, error)
	}{
		{"rijndael-128", aes.NewCipher}, // 32-byte key: AES-256
		{"des", des.NewCipher},
		{"tripledes", des.NewTripleDESCipher},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRand("stdlib " + tc.name)
			m := mustOpen(t, tc.name)
			password := randBytes(r, m.KeySize()+7)
			iv := randBytes(r, serverIV)
			block, err := tc.newBlk(password[:m.KeySize()])
			if err != nil {
				t.Fatal(err)
			}
			plain := randBytes(r, 3*bigPacket)
			want := cfb8(block, iv, plain, false)

			mustInit(t, m, password, iv)
			got := bytes.Clone(plain)
			m.Encrypt(got)
			if !bytes.Equal(got, want) {
				t.Fatalf("Encrypt differs from crypto/%T 8-bit CFB", block)
			}
			if back := cfb8(block, iv, got, true); !bytes.Equal(back, plain) {
				t.Fatalf("reference cfb8 does not round-trip")
			}

			ct := randBytes(r, bigPacket)
			mustInit(t, m, password, nil)
			got = bytes.Clone(ct)
			m.DecryptFrom(iv[:m.IVSize()], got)
			if want := cfb8(block, iv, ct, true); !bytes.Equal(got, want) {
				t.Fatalf("DecryptFrom differs from crypto/%T 8-bit CFB", block)
			}
		})
	}
}

// TestInitSized: rijndael-128 keyed with 16 and 24 bytes is AES-128 and
// AES-192 (NSClient++'s aes128 and aes192), the password truncated or
// zero-padded to that size; sizes outside 1..KeySize are refused.
func TestInitSized(t *testing.T) {
	r := newRand("sized")
	m := mustOpen(t, "rijndael-128")
	for _, size := range []int{16, 24, 32} {
		for _, pwlen := range []int{0, size - 1, size, size + 9} {
			password, iv := randBytes(r, pwlen), randBytes(r, serverIV)
			key := make([]byte, size)
			copy(key, password)
			block, err := aes.NewCipher(key)
			if err != nil {
				t.Fatal(err)
			}
			plain := randBytes(r, smallPacket)
			if err := m.InitSized(password, iv, size); err != nil {
				t.Fatal(err)
			}
			got := bytes.Clone(plain)
			m.Encrypt(got)
			if want := cfb8(block, iv, plain, false); !bytes.Equal(got, want) {
				t.Fatalf("key size %d, password %d bytes: differs from crypto/aes 8-bit CFB", size, pwlen)
			}
		}
	}
	for _, size := range []int{0, 33} {
		if err := m.InitSized(nil, nil, size); !errors.Is(err, ErrInit) || !strings.Contains(err.Error(), fmt.Sprint(size)) {
			t.Errorf("InitSized(key size %d) = %v, want ErrInit naming the size", size, err)
		}
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
	m, err := Open("des")
	if err != nil {
		t.Fatal(err)
	}
	expectPanic(t, "Decrypt before Init", func() { m.Decrypt(make([]byte, 8)) })
	expectPanic(t, "DecryptFrom before Init", func() { m.DecryptFrom(make([]byte, 8), make([]byte, 8)) })
	expectPanic(t, "Encrypt before Init", func() { m.Encrypt(make([]byte, 8)) })
	mustInit(t, m, []byte("x"), nil)
	expectPanic(t, "DecryptFrom short register", func() { m.DecryptFrom(make([]byte, 7), make([]byte, 8)) })
	expectPanic(t, "DecryptFrom long register", func() { m.DecryptFrom(make([]byte, 16), make([]byte, 8)) })
	m.Decrypt(nil) // zero length: nothing to do, must not crash
	m.Encrypt([]byte{})
	m.Close()
	m.Close() // idempotent
	expectPanic(t, "Decrypt after Close", func() { m.Decrypt(make([]byte, 8)) })
	expectPanic(t, "Init after Close", func() { _ = m.Init(nil, nil) })

	m, err = Open("des")
	if err != nil {
		t.Fatal(err)
	}
	m.Close() // never initialised
}

// TestConcurrentModules exercises the open/close mutex and independent
// per-Module state the way a busy daemon does (run with -race too).
func TestConcurrentModules(t *testing.T) {
	r := newRand("concurrent")
	password, iv := []byte("concurrent"), randBytes(r, serverIV)
	plain := [][]byte{randBytes(r, bigPacket), randBytes(r, smallPacket)}
	cts := map[string][][]byte{}
	for _, alg := range usable {
		cts[alg.name] = encryptStream(t, alg.name, password, iv, plain)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 32 {
		wg.Go(func() {
			for i := range 20 {
				alg := usable[(g+i)%len(usable)].name
				m, err := Open(alg)
				if err != nil {
					errs <- err
					return
				}
				if err := m.Init(password, make([]byte, serverIV)); err != nil {
					m.Close()
					errs <- err
					return
				}
				reg := iv[:m.IVSize()]
				for j, c := range cts[alg] {
					d := bytes.Clone(c)
					m.DecryptFrom(reg, d)
					if !bytes.Equal(d, plain[j]) {
						errs <- fmt.Errorf("%s packet %d wrong", alg, j)
					}
					reg = c[len(c)-m.IVSize():]
				}
				m.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkDecryptFrom is the libmcrypt floor for per-packet decryption.
func BenchmarkDecryptFrom(b *testing.B) {
	for _, alg := range usable {
		b.Run(alg.name, func(b *testing.B) {
			r := newRand("bench " + alg.name)
			m := mustOpen(b, alg.name)
			mustInit(b, m, []byte("bench-password"), nil)
			reg := randBytes(r, m.IVSize())
			pkt := randBytes(r, bigPacket)
			b.SetBytes(bigPacket)
			for b.Loop() {
				m.DecryptFrom(reg, pkt)
			}
		})
	}
}

// BenchmarkInit is the libmcrypt floor for per-connection setup (key
// schedule included), e.g. blowfish's expensive one.
func BenchmarkInit(b *testing.B) {
	for _, alg := range usable {
		b.Run(alg.name, func(b *testing.B) {
			r := newRand("bench init " + alg.name)
			password, iv := []byte("bench-password"), randBytes(r, serverIV)
			for b.Loop() {
				m, err := Open(alg.name)
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Init(password, iv); err != nil {
					b.Fatal(err)
				}
				m.Close()
			}
		})
	}
}
