package cipher

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// Vectors printed by Crypto++ 8 (Debian's libcrypto++-dev): GOST::Encryption
// of one block, and CFB_Mode<GOST> with 1-byte feedback as NSClient++ uses
// it, for key[i] = 7i+1, block[i] = 0xf0+i, iv[i] = 3i, message[i] = i.
const (
	cryptoppGOSTBlock = "07fd068cf1823747"
	cryptoppGOSTCFB8  = "1ac0e0cc6e1a0b8b6dae2be68daa3401205f09cac96ba951dc91d17b901585cf45d97d49d887a782"
)

func TestGOSTMatchesCryptopp(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(7*i + 1)
	}
	g, err := newGOSTBlock(key, gostCryptopp)
	if err != nil {
		t.Fatal(err)
	}
	in := []byte{0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7}
	out := make([]byte, 8)
	g.Encrypt(out, in)
	if got := hex.EncodeToString(out); got != cryptoppGOSTBlock {
		t.Errorf("GOST block: got %s, Crypto++ %s", got, cryptoppGOSTBlock)
	}

	iv := make([]byte, 128)
	for i := range 8 {
		iv[i] = byte(3 * i)
	}
	msg := make([]byte, 40)
	for i := range msg {
		msg[i] = byte(i)
	}
	ct, _ := hex.DecodeString(cryptoppGOSTCFB8)
	if got := refCFB8(g, iv[:8], msg, false); !bytes.Equal(got, ct) {
		t.Fatalf("CFB-8 reference encryption: got %x, Crypto++ %x", got, ct)
	}
	e, err := New(EngineNative, MethodGOST, "gost", key)
	if err != nil {
		t.Fatal(err)
	}
	k, err := e.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	r := newRand("gost")
	if got := decryptSplit(r, e, k, iv, ct); !bytes.Equal(got, msg) {
		t.Errorf("native GOST decrypted %x, want %x", got, msg)
	}
	if rep, err := SelfTest(e); err != nil || !rep.Skipped {
		t.Errorf("SelfTest(Crypto++ GOST) = %v, %v; want skipped (libmcrypt has no such cipher)", rep, err)
	}
}

// TestGOSTLibmcryptBlock pins libmcrypt 2.5.8's gost on whole blocks: its
// own self-test vector (key[i] = 2i+10, block[i] = i) and the zero block
// under the zero key, printed by libmcrypt in ecb mode. Crypto++'s S-box
// order or byte order, or a permutation in place of libmcrypt's k1, each
// gives other blocks.
func TestGOSTLibmcryptBlock(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(2*i + 10)
	}
	for _, c := range []struct {
		key  []byte
		in   []byte
		want string
	}{
		{key, []byte{0, 1, 2, 3, 4, 5, 6, 7}, "e498cf78cdf1d4a5"},
		{make([]byte, 32), make([]byte, 8), "1d33070b0dcc19d4"},
	} {
		g, err := newGOSTBlock(c.key, gostLibmcrypt)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, 8)
		g.Encrypt(out, c.in)
		if got := hex.EncodeToString(out); got != c.want {
			t.Errorf("libmcrypt GOST of %x: got %s, libmcrypt %s", c.in, got, c.want)
		}
		for lane := range 4 {
			if got := groupLane(newGroupBulk(g, 8, 4), lane, c.in); got != out[0] {
				t.Errorf("lane %d: first byte %02x, block %x", lane, got, out)
			}
		}
	}
}
