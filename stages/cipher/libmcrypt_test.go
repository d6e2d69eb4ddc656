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
// The key is keySize bytes, 0 for the algorithm's largest (NSCA's own way).
func sendNSCA(t testing.TB, r *rand.Rand, algorithm string, keySize int, password, iv []byte, plain []byte, size int) []byte {
	t.Helper()
	m, err := mcrypt.Open(algorithm)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if keySize == 0 {
		keySize = m.KeySize()
	}
	if err := m.InitSized(password, iv, keySize); err != nil {
		t.Fatal(err)
	}
	ct := bytes.Clone(plain)
	for p := 0; p < len(ct); p += size {
		forSplits(r, ct[p:min(p+size, len(ct))], m.Encrypt)
	}
	return ct
}

// reference is the libmcrypt algorithm and key size (0: the largest, as
// NSCA keys stock's methods) that encrypt what e decrypts.
func reference(e Engine) (algorithm string, keySize int) {
	if ne, ok := e.(*nativeEngine); ok {
		return ne.spec.ref, refKeySize(ne.spec)
	}
	return e.Algorithm(), 0
}

// refKeySize is the key size sendNSCA keys libmcrypt with for s's clients.
func refKeySize(s nativeSpec) int {
	if s.own() {
		return s.keySize
	}
	return 0
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
		alg, keySize := reference(e)
		cts[i] = sendNSCA(t, r, alg, keySize, password, ivs[i], plains[i], size)
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

// TestMatchesLibmcrypt: every native engine libmcrypt has an equal of (and
// the libmcrypt engine itself for stock's methods) decrypts exactly what
// libmcrypt encrypts, over passwords of 0..200 bytes, random IVs and splits,
// both packet sizes, both modes.
func TestMatchesLibmcrypt(t *testing.T) {
	withAESNI(t, func(t *testing.T) {
		for _, s := range referenced() {
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
					engines := []string{EngineNative, EngineLibmcrypt}
					if s.own() {
						engines = engines[:1] // libmcrypt has no method of that name
					}
					for _, engine := range engines {
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

// FuzzMatchesLibmcrypt is the fuzzing twin of TestMatchesLibmcrypt, over
// every row libmcrypt has an equal of (which picks the row), passwords of
// 0..200 bytes and both packet sizes (legacy):
// go test -fuzz FuzzMatchesLibmcrypt ./stages/cipher
func FuzzMatchesLibmcrypt(f *testing.F) {
	f.Add(uint8(14), []byte(""), []byte("iv"), uint64(1), false)
	f.Add(uint8(2), []byte("password"), []byte{}, uint64(2), true)
	f.Add(uint8(3), bytes.Repeat([]byte("x"), 200), bytes.Repeat([]byte{0xff}, 128), uint64(3), false)
	for i := range natives { // each method in both packet sizes from the seeds alone
		f.Add(uint8(i), bytes.Repeat([]byte("p"), 37*i%201), []byte{byte(i)}, uint64(i), false)
		f.Add(uint8(i), bytes.Repeat([]byte("q"), (37*i+100)%201), []byte{byte(i)}, uint64(i), true)
	}
	f.Fuzz(func(t *testing.T, which uint8, password, iv []byte, seed uint64, legacy bool) {
		if len(password) > 200 {
			password = password[:200]
		}
		rows := referenced()
		s := rows[int(which)%len(rows)]
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
		ct := sendNSCA(t, r, s.ref, refKeySize(s), password, fullIV, plain, size)
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
		a := sendNSCA(t, r, alg.name, 0, password, iv, plain, 300)
		b := sendNSCA(t, r, alg.name, 0, flipped, iv, plain, 300)
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
	e, err := New(EngineLibmcrypt, 8, "blowfish", []byte("pw"))
	if err != nil || e.Kind() != EngineLibmcrypt || e.KeySize() != 56 || e.IVSize() != 8 {
		t.Fatalf("libmcrypt blowfish = %v, %v; want libmcrypt", e, err)
	}
	if m, alg, ok := noNativeMethod(); ok {
		if a, err := New(EngineAuto, m, alg, []byte("pw")); err != nil || a.Kind() != EngineLibmcrypt {
			t.Errorf("auto %s = %v, %v; want libmcrypt", alg, a, err)
		}
	}
	rep, err := SelfTest(e)
	if err != nil || !rep.Skipped || !strings.Contains(rep.String(), "libmcrypt") {
		t.Errorf("SelfTest(libmcrypt) = %v, %v; want skipped", rep, err)
	}
	if _, err := New(EngineLibmcrypt, 1, "xor", nil); !errors.Is(err, ErrMethod) {
		t.Errorf("libmcrypt xor = %v, want ErrMethod", err)
	}
}

// TestSelfTest: the self-test passes for every row libmcrypt has an equal
// of, over passwords of 0..200 bytes (around the key size too), and says it
// skipped the rest.
func TestSelfTest(t *testing.T) {
	withAESNI(t, func(t *testing.T) {
		r := newRand("self-test")
		for _, s := range natives {
			for _, n := range []int{0, 7, s.keySize - 1, s.keySize, s.keySize + 1, r.IntN(201), 200} {
				e, err := New(EngineNative, s.method, s.algorithm, randBytes(r, n))
				if err != nil {
					t.Fatal(err)
				}
				rep, err := SelfTest(e)
				switch {
				case s.ref == "":
					if err != nil || !rep.Skipped || !strings.Contains(rep.Why, s.algorithm) {
						t.Errorf("SelfTest(%s) = %v, %v; want skipped", s.algorithm, rep, err)
					}
				case err != nil || rep.Skipped || rep.Packets < 8 || !strings.HasPrefix(rep.String(), "self-test passed"):
					t.Fatalf("SelfTest(%s), password %d bytes = %v, %v", s.algorithm, n, rep, err)
				}
			}
		}
	})
	// A row for a stock method keyed with fewer bytes than NSCA keys
	// libmcrypt with would decrypt no client: it must not pass by a
	// comparison at its own key size.
	e, err := makeNative(nativeSpec{14, "rijndael-128", 16, 16, newAESBulk, "rijndael-128"}, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := SelfTest(e); err != nil || !rep.Skipped || !strings.Contains(rep.Why, "keys with 32 bytes") {
		t.Errorf("SelfTest(rijndael-128 keyed with 16 bytes) = %v, %v; want skipped, naming libmcrypt's key size", rep, err)
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
		for _, s := range referenced() {
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
