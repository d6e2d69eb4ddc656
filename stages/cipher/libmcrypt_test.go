//go:build cgo

package cipher

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"nsca_fast/cgo/mcrypt"
)

// sendNSCA encrypts packets with libmcrypt as send_nsca does: one instance
// keyed with the password and the server's IV, packet after packet, each in
// random pieces (send_nsca itself goes byte by byte; CFB does not care).
func sendNSCA(t testing.TB, r *rand.Rand, algorithm string, password, iv []byte, plain []byte, size int) []byte {
	t.Helper()
	m, err := mcrypt.Open(algorithm)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Init(password, iv); err != nil {
		t.Fatal(err)
	}
	ct := bytes.Clone(plain)
	for p := 0; p < len(ct); p += size {
		forSplits(r, ct[p:min(p+size, len(ct))], m.Encrypt)
	}
	return ct
}

// checkAgainstLibmcrypt encrypts streams with libmcrypt and decrypts them
// with engine in both decryption_modes (mode 1 with the streams' chunks
// interleaved on one Key).
func checkAgainstLibmcrypt(t *testing.T, r *rand.Rand, e Engine, password []byte, sizes []int) {
	t.Helper()
	n := len(sizes)
	ivs, plains, cts := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i, size := range sizes {
		ivs[i] = randBytes(r, 128)
		plains[i] = randBytes(r, size*(2+r.IntN(2)))
		cts[i] = sendNSCA(t, r, e.Algorithm(), password, ivs[i], plains[i], size)
	}
	for i := range sizes { // mode 0
		k, err := e.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		if got := decryptSplit(r, e, k, ivs[i], cts[i]); !bytes.Equal(got, plains[i]) {
			t.Fatalf("%s %s mode 0, password %d bytes, %d-byte packets: differs from libmcrypt", e.Kind(), e.Algorithm(), len(password), sizes[i])
		}
		k.Close()
	}
	k, err := e.NewKey() // mode 1
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	states := make([]State, n)
	gots := make([][]byte, n)
	offs := make([]int, n)
	for i := range sizes {
		states[i].Start(e, ivs[i])
		gots[i] = bytes.Clone(cts[i])
	}
	for left := n; left > 0; {
		i := r.IntN(n)
		if offs[i] == len(gots[i]) {
			continue
		}
		c := min(splitLen(r), len(gots[i])-offs[i])
		k.Decrypt(&states[i], gots[i][offs[i]:offs[i]+c])
		if offs[i] += c; offs[i] == len(gots[i]) {
			left--
		}
	}
	for i := range sizes {
		if !bytes.Equal(gots[i], plains[i]) {
			t.Fatalf("%s %s mode 1, password %d bytes, %d-byte packets: differs from libmcrypt", e.Kind(), e.Algorithm(), len(password), sizes[i])
		}
	}
}

// TestMatchesLibmcrypt: every native engine (and the libmcrypt engine
// itself) decrypts exactly what libmcrypt encrypts, over passwords of 0..200
// bytes, random IVs and splits, both modes.
func TestMatchesLibmcrypt(t *testing.T) {
	withAESNI(t, func(t *testing.T) {
		for _, s := range natives {
			t.Run(s.algorithm, func(t *testing.T) {
				r := newRand("libmcrypt " + s.algorithm)
				trials := 24
				if testing.Short() {
					trials = 4
				}
				for trial := range trials {
					pwlen := r.IntN(201)
					if trial < 3 {
						pwlen = []int{0, s.keySize, s.keySize + 1}[trial]
					}
					password := randBytes(r, pwlen)
					for _, engine := range []string{EngineNative, EngineLibmcrypt} {
						e, err := New(engine, s.method, s.algorithm, password)
						if err != nil {
							t.Fatal(err)
						}
						if e.Kind() != engine {
							t.Fatalf("New(%s) served by %s", engine, e.Kind())
						}
						checkAgainstLibmcrypt(t, r, e, password, []int{bigPacket, smallPacket, bigPacket})
					}
				}
			})
		}
	})
}

// FuzzMatchesLibmcrypt is the fuzzing twin of TestMatchesLibmcrypt:
// go test -fuzz FuzzMatchesLibmcrypt ./stages/cipher
func FuzzMatchesLibmcrypt(f *testing.F) {
	f.Add(uint8(14), []byte(""), []byte("iv"), uint64(1), false)
	f.Add(uint8(2), []byte("password"), []byte{}, uint64(2), true)
	f.Add(uint8(3), bytes.Repeat([]byte("x"), 200), bytes.Repeat([]byte{0xff}, 128), uint64(3), false)
	// Every native method (which is an index into natives), both packet
	// sizes, passwords empty, exactly the key size and the longest.
	for i, s := range natives {
		for _, n := range []int{0, s.keySize, 200} {
			f.Add(uint8(i), bytes.Repeat([]byte{byte(n)}, n), []byte("seed iv"), uint64(n), n != s.keySize)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, password, iv []byte, seed uint64, legacy bool) {
		if len(password) > 200 {
			password = password[:200]
		}
		s := natives[int(which)%len(natives)]
		var sd [32]byte
		for i := range 8 {
			sd[i] = byte(seed >> (8 * i))
		}
		r := rand.New(rand.NewChaCha8(sd))
		fullIV := make([]byte, 128)
		copy(fullIV, iv)
		size := bigPacket
		if legacy {
			size = smallPacket
		}
		e, err := New(EngineNative, s.method, s.algorithm, password)
		if err != nil {
			t.Fatal(err)
		}
		plain := randBytes(r, size*3)
		ct := sendNSCA(t, r, s.algorithm, password, fullIV, plain, size)
		k, _ := e.NewKey()
		defer k.Close()
		if got := decryptSplit(r, e, k, fullIV, ct); !bytes.Equal(got, plain) {
			t.Fatalf("native %s differs from libmcrypt", s.algorithm)
		}
		// mode 1: the same Key, after another stream, restarted for this one.
		var other State
		other.Start(e, ct)
		k.Decrypt(&other, randBytes(r, 100))
		if got := decryptSplit(r, e, k, fullIV, ct); !bytes.Equal(got, plain) {
			t.Fatalf("native %s differs from libmcrypt on a reused Key", s.algorithm)
		}
	})
}

// TestDESKeyParity: libmcrypt's DES ignores each key byte's low (parity)
// bit, as crypto/des does; a difference would break passwords that differ
// only there.
func TestDESKeyParity(t *testing.T) {
	r := newRand("parity")
	for _, alg := range []struct {
		method int
		name   string
		size   int
	}{{2, "des", 8}, {3, "tripledes", 24}} {
		password := randBytes(r, alg.size)
		flipped := bytes.Clone(password)
		for i := range flipped {
			flipped[i] ^= 1
		}
		iv, plain := randBytes(r, 128), randBytes(r, 300)
		a := sendNSCA(t, r, alg.name, password, iv, plain, 300)
		b := sendNSCA(t, r, alg.name, flipped, iv, plain, 300)
		if !bytes.Equal(a, b) {
			t.Fatalf("libmcrypt %s uses the parity bits", alg.name)
		}
		e, _ := New(EngineNative, alg.method, alg.name, flipped)
		k, _ := e.NewKey()
		if got := decryptSplit(r, e, k, iv, a); !bytes.Equal(got, plain) {
			t.Fatalf("native %s with flipped parity bits differs from libmcrypt", alg.name)
		}
		k.Close()
	}
}

func TestLibmcryptEngineErrors(t *testing.T) {
	_, err := New(EngineLibmcrypt, 12, "arcfour", nil)
	if !errors.Is(err, ErrLibmcrypt) || !errors.Is(err, mcrypt.ErrCannotOpen) || !strings.Contains(err.Error(), "arcfour") {
		t.Errorf("libmcrypt arcfour = %v, want ErrLibmcrypt naming arcfour", err)
	}
	e, err := New(EngineAuto, 8, "blowfish", []byte("pw"))
	if err != nil || e.Kind() != EngineLibmcrypt || e.KeySize() != 56 || e.IVSize() != 8 {
		t.Fatalf("auto blowfish = %v, %v; want libmcrypt", e, err)
	}
	rep, err := SelfTest(e)
	if err != nil || !rep.Skipped || !strings.Contains(rep.String(), "libmcrypt") {
		t.Errorf("SelfTest(libmcrypt) = %v, %v; want skipped", rep, err)
	}
	if _, err := New(EngineLibmcrypt, 1, "xor", nil); !errors.Is(err, ErrMethod) {
		t.Errorf("libmcrypt xor = %v, want ErrMethod", err)
	}
}

func TestSelfTest(t *testing.T) {
	withAESNI(t, func(t *testing.T) {
		for _, s := range natives {
			for _, pw := range [][]byte{nil, []byte("secret "), bytes.Repeat([]byte("long"), 50)} {
				e, err := New(EngineNative, s.method, s.algorithm, pw)
				if err != nil {
					t.Fatal(err)
				}
				rep, err := SelfTest(e)
				if err != nil || rep.Skipped || rep.Packets < 8 || !strings.HasPrefix(rep.String(), "self-test passed") {
					t.Fatalf("SelfTest(%s) = %v, %v", s.algorithm, rep, err)
				}
			}
		}
	})
	e, _ := NewNativeAES(16, 99, "aes128", nil)
	if rep, err := SelfTest(e); err != nil || !rep.Skipped || !strings.Contains(rep.Why, "aes128") {
		t.Errorf("SelfTest(aes128) = %v, %v; want skipped", rep, err)
	}
}

// faultyKey is a deliberately wrong engine: it flips one bit of the
// plaintext, once, somewhere in the stream.
type faultyKey struct {
	Key
	at, seen int
}

func (f *faultyKey) Decrypt(s *State, buf []byte) {
	f.Key.Decrypt(s, buf)
	if f.at >= f.seen && f.at < f.seen+len(buf) {
		buf[f.at-f.seen] ^= 0x10
	}
	f.seen += len(buf)
}

func TestSelfTestRejectsWrongEngine(t *testing.T) {
	defer func() { selfTestKeyHook = nil }()
	for _, at := range []int{0, 5000, 9000, 14000} {
		selfTestKeyHook = func(k Key) Key { return &faultyKey{Key: k, at: at} }
		for _, s := range natives {
			e, _ := New(EngineNative, s.method, s.algorithm, []byte("pw"))
			rep, err := SelfTest(e)
			if !errors.Is(err, ErrSelfTest) || rep.Skipped {
				t.Fatalf("SelfTest with a fault at %d = %v, %v; want ErrSelfTest", at, rep, err)
			}
			for _, m := range []string{"cipher: self-test failed", s.algorithm, "native", "libmcrypt", "refusing"} {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		}
	}
}
