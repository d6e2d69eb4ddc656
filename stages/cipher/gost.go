package cipher

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// GOST 28147-89, written from the standard, in the two variants met here:
// Crypto++'s, which NSClient++'s "gost" encrypts with (a method of this
// project's own), and libmcrypt's, stock method 23. Both read the 32-byte
// key as eight little-endian words and write n2 before n1; they differ in
// the order of the same eight S-boxes and in how a block's bytes make its
// two words (little-endian in Crypto++, big-endian in libmcrypt), so they
// never interoperate.

// gostCryptoppSBoxes are Crypto++'s: the S-boxes of the GOST R 34.11-94
// test parameter set (the ones printed in Applied Cryptography, 2nd ed., p.
// 333), k1 (applied to the lowest nibble of the round function's input)
// first.
var gostCryptoppSBoxes = [8][16]byte{
	{4, 10, 9, 2, 13, 8, 0, 14, 6, 11, 1, 12, 7, 15, 5, 3},
	{14, 11, 4, 12, 6, 13, 15, 10, 2, 3, 8, 1, 0, 7, 5, 9},
	{5, 8, 1, 13, 10, 3, 4, 2, 14, 15, 12, 7, 6, 0, 9, 11},
	{7, 13, 10, 1, 0, 8, 9, 15, 14, 4, 6, 12, 11, 2, 5, 3},
	{6, 12, 7, 1, 5, 15, 13, 8, 4, 10, 9, 14, 0, 3, 11, 2},
	{4, 11, 10, 0, 7, 2, 1, 13, 3, 6, 8, 5, 9, 12, 15, 14},
	{13, 11, 4, 1, 3, 15, 5, 9, 0, 10, 14, 7, 6, 8, 2, 12},
	{1, 15, 13, 0, 5, 7, 10, 4, 9, 2, 3, 14, 6, 11, 8, 12},
}

// gostLibmcryptSBoxes are libmcrypt 2.5.8's: the same boxes numbered the
// other way round, its k1 being Crypto++'s k8, except that libmcrypt's k1
// maps 15 to 2 where Crypto++'s k8 maps it to 12 (so libmcrypt's k1 is no
// permutation: 2 has two preimages, 12 none).
var gostLibmcryptSBoxes = func() (s [8][16]byte) {
	for i := range 8 {
		s[i] = gostCryptoppSBoxes[7-i]
	}
	s[0][15] = 2
	return s
}()

// gostTable folds each pair of S-boxes and the round's rotation left by 11
// into one table per input byte, so a round is four lookups.
type gostTable [4][256]uint32

func newGOSTTable(sb *[8][16]byte) *gostTable {
	var t gostTable
	for i := range 4 {
		for j := range 256 {
			v := uint32(sb[2*i][j&15]) | uint32(sb[2*i+1][j>>4])<<4
			t[i][j] = bits.RotateLeft32(v<<(8*i), 11)
		}
	}
	return &t
}

// gostVariant is what sets a GOST implementation apart.
type gostVariant struct {
	t         *gostTable
	bigEndian bool
}

var (
	gostCryptopp  = gostVariant{newGOSTTable(&gostCryptoppSBoxes), false}
	gostLibmcrypt = gostVariant{newGOSTTable(&gostLibmcryptSBoxes), true}
)

func (t *gostTable) f(x uint32) uint32 {
	return t[0][x&0xff] ^ t[1][x>>8&0xff] ^ t[2][x>>16&0xff] ^ t[3][x>>24]
}

// gostBlock is a keyed GOST 28147-89, encryption only: 8-bit CFB never
// needs the inverse.
type gostBlock struct {
	// ks is the key word of each round: 0..7 three times, then 7..0.
	ks [32]uint32
	t  *gostTable
	be bool // a block's words are big-endian
}

func newGOSTBlock(key []byte, v gostVariant) (*gostBlock, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("GOST key size %d, want 32", len(key))
	}
	g := &gostBlock{t: v.t, be: v.bigEndian}
	for r := range g.ks {
		i := r % 8
		if r >= 24 {
			i = 31 - r
		}
		g.ks[r] = binary.LittleEndian.Uint32(key[4*i:])
	}
	return g, nil
}

// BlockSize is GOST's 8 bytes.
func (g *gostBlock) BlockSize() int { return 8 }

// halves reads block b as the words n1, n2.
func (g *gostBlock) halves(b []byte) (n1, n2 uint32) {
	if g.be {
		return binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	}
	return binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
}

// byte0 is the first byte of the block whose first word is n2.
func (g *gostBlock) byte0(n2 uint32) byte {
	if g.be {
		return byte(n2 >> 24)
	}
	return byte(n2)
}

// Encrypt runs the 32 rounds on one block; the tests use it.
func (g *gostBlock) Encrypt(dst, src []byte) {
	n1, n2 := g.halves(src)
	for r := 0; r < 32; r += 2 {
		n2 ^= g.t.f(n1 + g.ks[r])
		n1 ^= g.t.f(n2 + g.ks[r+1])
	}
	put := binary.LittleEndian.PutUint32
	if g.be {
		put = binary.BigEndian.PutUint32
	}
	put(dst, n2)
	put(dst[4:], n1)
}

// Decrypt is not needed by CFB; it exists to satisfy crypto/cipher.Block.
func (g *gostBlock) Decrypt(dst, src []byte) {
	panic("cipher: GOST decryption is not implemented (CFB only encrypts)")
}

// group encrypts the four registers w[0:8], ..., w[3:11] together, so that
// their lookups overlap: GOST's rounds are a chain, each waiting for the one
// before. The first output byte lies in n2, last changed in round 31, so
// round 32 is never run.
func (g *gostBlock) group(w []byte) {
	t, ks := g.t, &g.ks
	w = w[:12]
	a1, a2 := g.halves(w[0:])
	b1, b2 := g.halves(w[1:])
	c1, c2 := g.halves(w[2:])
	d1, d2 := g.halves(w[3:])
	for r := 0; r < 30; r += 2 {
		k := ks[r]
		a2 ^= t.f(a1 + k)
		b2 ^= t.f(b1 + k)
		c2 ^= t.f(c1 + k)
		d2 ^= t.f(d1 + k)
		k = ks[r+1]
		a1 ^= t.f(a2 + k)
		b1 ^= t.f(b2 + k)
		c1 ^= t.f(c2 + k)
		d1 ^= t.f(d2 + k)
	}
	k := ks[30]
	xor4(w[8:], uint32(g.byte0(a2^t.f(a1+k)))|uint32(g.byte0(b2^t.f(b1+k)))<<8|
		uint32(g.byte0(c2^t.f(c1+k)))<<16|uint32(g.byte0(d2^t.f(d1+k)))<<24)
}

func (g *gostBlock) wipe() { clear(g.ks[:]) }

// newGOSTBulk keys GOST variant v for 8-bit CFB.
func newGOSTBulk(v gostVariant) func(key []byte) (bulk, error) {
	return func(key []byte) (bulk, error) {
		g, err := newGOSTBlock(key, v)
		if err != nil {
			return nil, err
		}
		return newGroupBulk(g, 8, 4), nil
	}
}
