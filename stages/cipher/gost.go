package cipher

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// GOST 28147-89 as Crypto++ implements it, which is what NSClient++'s "gost"
// encrypts with: the S-boxes of the GOST R 34.11-94 test parameter set (the
// ones printed in Applied Cryptography, 2nd ed., p. 333), the 32-byte key read
// as eight little-endian words and each 8-byte block as two little-endian
// words. libmcrypt's gost (stock method 23) uses other S-boxes, so the two
// never interoperate; this is a method of its own.

// gostSBoxes are the eight 4-bit S-boxes, k1 (applied to the lowest nibble of
// the round function's input) first.
var gostSBoxes = [8][16]byte{
	{4, 10, 9, 2, 13, 8, 0, 14, 6, 11, 1, 12, 7, 15, 5, 3},
	{14, 11, 4, 12, 6, 13, 15, 10, 2, 3, 8, 1, 0, 7, 5, 9},
	{5, 8, 1, 13, 10, 3, 4, 2, 14, 15, 12, 7, 6, 0, 9, 11},
	{7, 13, 10, 1, 0, 8, 9, 15, 14, 4, 6, 12, 11, 2, 5, 3},
	{6, 12, 7, 1, 5, 15, 13, 8, 4, 10, 9, 14, 0, 3, 11, 2},
	{4, 11, 10, 0, 7, 2, 1, 13, 3, 6, 8, 5, 9, 12, 15, 14},
	{13, 11, 4, 1, 3, 15, 5, 9, 0, 10, 14, 7, 6, 8, 2, 12},
	{1, 15, 13, 0, 5, 7, 10, 4, 9, 2, 3, 14, 6, 11, 8, 12},
}

// gostTable folds each pair of S-boxes and the round's rotation left by 11
// into one table per input byte, so a round is four lookups.
var gostTable = func() (t [4][256]uint32) {
	for i := range 4 {
		for j := range 256 {
			v := uint32(gostSBoxes[2*i][j&15]) | uint32(gostSBoxes[2*i+1][j>>4])<<4
			t[i][j] = bits.RotateLeft32(v<<(8*i), 11)
		}
	}
	return t
}()

// gostBlock is a keyed GOST 28147-89 (Crypto++ conventions), encryption only:
// 8-bit CFB never needs the inverse.
type gostBlock struct {
	k [8]uint32
}

func newGOSTBlock(key []byte) (*gostBlock, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("GOST key size %d, want 32", len(key))
	}
	g := &gostBlock{}
	for i := range g.k {
		g.k[i] = binary.LittleEndian.Uint32(key[4*i:])
	}
	return g, nil
}

func gostF(x uint32) uint32 {
	return gostTable[0][x&0xff] ^ gostTable[1][x>>8&0xff] ^ gostTable[2][x>>16&0xff] ^ gostTable[3][x>>24]
}

// BlockSize is GOST's 8 bytes.
func (g *gostBlock) BlockSize() int { return 8 }

// Encrypt runs the 32 rounds: the key words 0..7 three times, then 7..0.
func (g *gostBlock) Encrypt(dst, src []byte) {
	n1 := binary.LittleEndian.Uint32(src)
	n2 := binary.LittleEndian.Uint32(src[4:])
	for range 3 {
		for i := 0; i < 8; i += 2 {
			n2 ^= gostF(n1 + g.k[i])
			n1 ^= gostF(n2 + g.k[i+1])
		}
	}
	for i := 7; i > 0; i -= 2 {
		n2 ^= gostF(n1 + g.k[i])
		n1 ^= gostF(n2 + g.k[i-1])
	}
	binary.LittleEndian.PutUint32(dst, n2)
	binary.LittleEndian.PutUint32(dst[4:], n1)
}

// Decrypt is not needed by CFB; it exists to satisfy crypto/cipher.Block.
func (g *gostBlock) Decrypt(dst, src []byte) {
	panic("cipher: GOST decryption is not implemented (CFB only encrypts)")
}

func newGOSTBulk(key []byte) (bulk, error) {
	g, err := newGOSTBlock(key)
	if err != nil {
		return nil, err
	}
	return &blockBulk{b: g, bs: 8}, nil
}
