package cipher

import (
	"crypto/aes"
)

// sbox is the AES S-box, computed at start from its definition (the
// multiplicative inverse in GF(2^8) modulo x^8+x^4+x^3+x+1, then the affine
// map), for the key expansion.
var sbox = makeSbox()

func gfMul(a, b byte) byte {
	var p byte
	for b != 0 {
		if b&1 != 0 {
			p ^= a
		}
		hi := a & 0x80
		a <<= 1
		if hi != 0 {
			a ^= 0x1b
		}
		b >>= 1
	}
	return p
}

func makeSbox() (s [256]byte) {
	for x := 0; x < 256; x++ {
		// x^254 is x's inverse (and 0 for 0).
		inv, sq := byte(1), byte(x)
		for e := 254; e != 0; e >>= 1 {
			if e&1 != 0 {
				inv = gfMul(inv, sq)
			}
			sq = gfMul(sq, sq)
		}
		if x == 0 {
			inv = 0
		}
		rot := func(b byte, n uint) byte { return b<<n | b>>(8-n) }
		s[x] = inv ^ rot(inv, 1) ^ rot(inv, 2) ^ rot(inv, 3) ^ rot(inv, 4) ^ 0x63
	}
	return s
}

// expandKey writes the AES encryption round keys for key (16, 24 or 32
// bytes) into rk as 16-byte blocks in state byte order, as AESENC takes
// them, and returns the number of rounds (10, 12 or 14).
func expandKey(key []byte, rk *[15 * 16]byte) int {
	nr := len(key)/4 + 6
	rijndaelExpand(key, rk[:16*(nr+1)])
	return nr
}

// rijndaelExpand fills rk with Rijndael's key expansion of key (4*Nk bytes):
// len(rk)/4 words, each in state byte order (row 0 first), which is Nb*(Nr+1)
// words for a Nb-word block.
func rijndaelExpand(key []byte, rk []byte) {
	nk := len(key) / 4
	copy(rk, key)
	rcon := byte(1)
	for i := nk; i < len(rk)/4; i++ {
		var t [4]byte
		copy(t[:], rk[4*(i-1):4*i])
		switch {
		case i%nk == 0:
			t = [4]byte{sbox[t[1]] ^ rcon, sbox[t[2]], sbox[t[3]], sbox[t[0]]}
			rcon = gfMul(rcon, 2)
		case nk > 6 && i%nk == 4:
			t = [4]byte{sbox[t[0]], sbox[t[1]], sbox[t[2]], sbox[t[3]]}
		}
		for j := range 4 {
			rk[4*i+j] = rk[4*(i-nk)+j] ^ t[j]
		}
	}
}

// aesniBulk encrypts 8 registers at once with AES-NI.
type aesniBulk struct {
	rk     [15 * 16]byte
	rounds int
}

func (a *aesniBulk) tail(buf []byte) {
	if len(buf) > 16 {
		cfb8TailAESNI(&a.rk[0], a.rounds, &buf[0], len(buf))
	}
}

func (a *aesniBulk) wipe() { clear(a.rk[:]) }

// newAESBulk keys AES for 8-bit CFB: AES-NI where the CPU has it, crypto/aes
// one block per byte otherwise.
func newAESBulk(key []byte) (bulk, error) {
	if useAESNI {
		switch len(key) {
		case 16, 24, 32:
			a := &aesniBulk{}
			a.rounds = expandKey(key, &a.rk)
			return a, nil
		}
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return &blockBulk{b: b, bs: 16}, nil
}
