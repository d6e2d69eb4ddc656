package cipher

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// libmcryptCFB8 are ciphertexts printed by libmcrypt 2.5.8 (Debian's
// libmcrypt4) in "cfb" mode, as NSCA opens it: key[i] = 7i+1 (32 bytes),
// iv[i] = 3i, message[i] = i (100 bytes). They check the native engines of
// the ciphers the standard library lacks without cgo too.
var libmcryptCFB8 = map[int]string{
	10: "b62238518db4e3871290924430d778f352d36b027e72dee1ddfcc4a8a8ff063ca942f88cc0b512594d04fd7d656f5ed2d506b64fedf019544b4e56c308ca4873cdd3066cbfe1e2d6f54e05e4c76a6b85b121e207e994f042076a90f9a9f4a055cc125377",
	15: "2cd122a92ad020a2cd09cca492ee457ae20f6452cb2ad8c310e91b6e464355f164438c71c696fd0ec0961f2500d11660cf8950f49c72b06f71e9416a010c3f56b469a9b4ce04ff026479ceffbc68a998318ad48f4e278f7093ba51e90a77ab0f9251250d",
	26: "82e3254b5d300953f627ea2b3b44037748d35a9140f99f7383f05a026c8bf463906206901ad7b41e85a1289bb7613c9c537b99289d8d3aedea4938bdbc17f57fad3779052ec3e3de6c89ad7462ec2e73deb83b640242c52dc8b7a0cf385a9169898ad183",
	23: "94767da4755cc2d818f26ba0048eb3983b8ef33fcdf0786ac8afd7014efcb8fa0cc00045845be60ab54d14f6a5ec37784d0824f131bc0a9f83f68d53be1f8da8d1b8e1aafaa072530c399141ab8eca22fd801898f5a11a458ed3dbd4786750712a4def78",
	16: "e45ccdb43526f5dfb5962113287928d327b3270f8b11365ea508176f056d19125a2b938c68521038c1b49f5fc208d4415868f6430b34ff5cf352b13f01f26699a31a45f247a8d8dcd5347586a2e8f6c04aa2ea6214f21ebb8601b299e53539c9c57f9d84",
	5:  "496f32a6ca2e1fb4db35feadabd799ada2fc50f60ce2098beb4f7982134f06fd0bdf549d3651c8af08335b473f5712a3d642b164de7e45d8ae2fdc5ce4ae9b41175ab85c713a1ec73ed3283a25b772a76f00f0a39a94be969aba9377c37a681cfbe8fe76",
	9:  "6500b1497f78f870de755f57cd42b12759b3d5ed98cd516c576270b4e3f9d6065c1c6669ed41e65477aeacc1ac5ef485c6e8abe364f24567b6ab65a8fc78c43b313547ef2addaebf25c64c8ffa22ced019050a9aef8771059061f1c8bb0b6ae6448fd3fd",
	20: "d27a67c04d3b9bad4136ffc2b1508c03db9a82a3fe0483d06bfc8fadc5e6036db7f8c85dde9218e11d9d281fbe68043e1d5bb1ee20ca3da995bea3a7586187e5f3f9629b3c7ecadca0dc1c4585105b75c0b3b81e358195579a1cd7499ad986826b16a1ef",
}

// specVectors are the published vectors of ciphers whose byte order in
// libmcrypt was in question, as NSCA keys them (256-bit keys): first is
// byte 0 of the encryption of block, in libmcrypt's byte order.
var specVectors = []struct {
	method             int
	source, key, block string
	first              byte
}{
	{9, "Twofish paper, 256-bit key: 37527be0...", "0123456789abcdeffedcba987654321000112233445566778899aabbccddeeff", "00000000000000000000000000000000", 0x37},
	// libmcrypt reads key and block as little-endian words, the RFC
	// big-endian: the RFC's key 2342bb9e fa38542c ... byte-swapped per word,
	// its output 4f6a2038 ... read from the low byte.
	{5, "RFC 2612, 256-bit key: 4f6a2038...", "9ebb42232c5438fa83acd0be98c20a94ce477c8d4608492613b5c11c04b6e67a", "00000000000000000000000000000000", 0x38},
	{20, "NESSIE Serpent set 1 vector 0, 256-bit key: a223aa12...", "8000000000000000000000000000000000000000000000000000000000000000", "00000000000000000000000000000000", 0xa2},
}

func TestSpecVectors(t *testing.T) {
	for _, v := range specVectors {
		s, ok := nativeFor(v.method)
		if !ok {
			t.Errorf("method %d has no native engine", v.method)
			continue
		}
		key, _ := hex.DecodeString(v.key)
		buf, _ := hex.DecodeString(v.block + "00")
		b, err := s.newBulk(key)
		if err != nil {
			t.Fatal(err)
		}
		b.tail(buf) // buf[16] ^= E(buf[:16])[0]
		if got := buf[len(buf)-1]; got != v.first {
			t.Errorf("native %s: byte 0 of %s is %#02x, want %#02x", s.algorithm, v.source, got, v.first)
		}
	}
}

func TestKnownAnswers(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(7*i + 1)
	}
	iv := make([]byte, 128)
	for i := range iv {
		iv[i] = byte(3 * i)
	}
	msg := make([]byte, 100)
	for i := range msg {
		msg[i] = byte(i)
	}
	for method, want := range libmcryptCFB8 {
		s, ok := nativeFor(method)
		if !ok {
			t.Errorf("method %d has no native engine", method)
			continue
		}
		ct, _ := hex.DecodeString(want)
		e, err := New(EngineNative, method, s.algorithm, key)
		if err != nil {
			t.Fatal(err)
		}
		k, err := e.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		r := newRand("known " + s.algorithm)
		if got := decryptSplit(r, e, k, iv, ct); !bytes.Equal(got, msg) {
			t.Errorf("native %s decrypted libmcrypt's %s to %x, want %x", s.algorithm, want, got, msg)
		}
		k.Close()
	}
}
