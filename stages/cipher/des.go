package cipher

import (
	"encoding/binary"
	"math/bits"
)

// DES and triple DES, written from FIPS 46-3 for 8-bit CFB, where only the
// first byte of each block's output is used and every register is the eight
// bytes of the stream before a byte. The tables and key schedule here serve
// the bitsliced engine (desbs.go); the table engine below decrypts the short
// tails it leaves, four independent blocks at a time so that their table
// loads overlap.

// FIPS 46-3 tables, 1-based bit numbers counted from the most significant bit.
var (
	desIP = [64]byte{
		58, 50, 42, 34, 26, 18, 10, 2, 60, 52, 44, 36, 28, 20, 12, 4,
		62, 54, 46, 38, 30, 22, 14, 6, 64, 56, 48, 40, 32, 24, 16, 8,
		57, 49, 41, 33, 25, 17, 9, 1, 59, 51, 43, 35, 27, 19, 11, 3,
		61, 53, 45, 37, 29, 21, 13, 5, 63, 55, 47, 39, 31, 23, 15, 7,
	}
	desP = [32]byte{
		16, 7, 20, 21, 29, 12, 28, 17, 1, 15, 23, 26, 5, 18, 31, 10,
		2, 8, 24, 14, 32, 27, 3, 9, 19, 13, 30, 6, 22, 11, 4, 25,
	}
	desPC1 = [56]byte{
		57, 49, 41, 33, 25, 17, 9, 1, 58, 50, 42, 34, 26, 18,
		10, 2, 59, 51, 43, 35, 27, 19, 11, 3, 60, 52, 44, 36,
		63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22,
		14, 6, 61, 53, 45, 37, 29, 21, 13, 5, 28, 20, 12, 4,
	}
	desPC2 = [48]byte{
		14, 17, 11, 24, 1, 5, 3, 28, 15, 6, 21, 10,
		23, 19, 12, 4, 26, 8, 16, 7, 27, 20, 13, 2,
		41, 52, 31, 37, 47, 55, 30, 40, 51, 45, 33, 48,
		44, 49, 39, 56, 34, 53, 46, 42, 50, 36, 29, 32,
	}
	desShifts = [16]byte{1, 1, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1}
	// desS[i][row*16+col]: row from the outer bits of the 6-bit input, col the inner four.
	desS = [8][64]byte{
		{14, 4, 13, 1, 2, 15, 11, 8, 3, 10, 6, 12, 5, 9, 0, 7,
			0, 15, 7, 4, 14, 2, 13, 1, 10, 6, 12, 11, 9, 5, 3, 8,
			4, 1, 14, 8, 13, 6, 2, 11, 15, 12, 9, 7, 3, 10, 5, 0,
			15, 12, 8, 2, 4, 9, 1, 7, 5, 11, 3, 14, 10, 0, 6, 13},
		{15, 1, 8, 14, 6, 11, 3, 4, 9, 7, 2, 13, 12, 0, 5, 10,
			3, 13, 4, 7, 15, 2, 8, 14, 12, 0, 1, 10, 6, 9, 11, 5,
			0, 14, 7, 11, 10, 4, 13, 1, 5, 8, 12, 6, 9, 3, 2, 15,
			13, 8, 10, 1, 3, 15, 4, 2, 11, 6, 7, 12, 0, 5, 14, 9},
		{10, 0, 9, 14, 6, 3, 15, 5, 1, 13, 12, 7, 11, 4, 2, 8,
			13, 7, 0, 9, 3, 4, 6, 10, 2, 8, 5, 14, 12, 11, 15, 1,
			13, 6, 4, 9, 8, 15, 3, 0, 11, 1, 2, 12, 5, 10, 14, 7,
			1, 10, 13, 0, 6, 9, 8, 7, 4, 15, 14, 3, 11, 5, 2, 12},
		{7, 13, 14, 3, 0, 6, 9, 10, 1, 2, 8, 5, 11, 12, 4, 15,
			13, 8, 11, 5, 6, 15, 0, 3, 4, 7, 2, 12, 1, 10, 14, 9,
			10, 6, 9, 0, 12, 11, 7, 13, 15, 1, 3, 14, 5, 2, 8, 4,
			3, 15, 0, 6, 10, 1, 13, 8, 9, 4, 5, 11, 12, 7, 2, 14},
		{2, 12, 4, 1, 7, 10, 11, 6, 8, 5, 3, 15, 13, 0, 14, 9,
			14, 11, 2, 12, 4, 7, 13, 1, 5, 0, 15, 10, 3, 9, 8, 6,
			4, 2, 1, 11, 10, 13, 7, 8, 15, 9, 12, 5, 6, 3, 0, 14,
			11, 8, 12, 7, 1, 14, 2, 13, 6, 15, 0, 9, 10, 4, 5, 3},
		{12, 1, 10, 15, 9, 2, 6, 8, 0, 13, 3, 4, 14, 7, 5, 11,
			10, 15, 4, 2, 7, 12, 9, 5, 6, 1, 13, 14, 0, 11, 3, 8,
			9, 14, 15, 5, 2, 8, 12, 3, 7, 0, 4, 10, 1, 13, 11, 6,
			4, 3, 2, 12, 9, 5, 15, 10, 11, 14, 1, 7, 6, 0, 8, 13},
		{4, 11, 2, 14, 15, 0, 8, 13, 3, 12, 9, 7, 5, 10, 6, 1,
			13, 0, 11, 7, 4, 9, 1, 10, 14, 3, 5, 12, 2, 15, 8, 6,
			1, 4, 11, 13, 12, 3, 7, 14, 10, 15, 6, 8, 0, 5, 9, 2,
			6, 11, 13, 8, 1, 4, 10, 7, 9, 5, 0, 15, 14, 2, 3, 12},
		{13, 2, 8, 4, 6, 15, 11, 1, 10, 9, 3, 14, 5, 0, 12, 7,
			1, 15, 13, 8, 10, 3, 7, 4, 12, 5, 6, 11, 0, 14, 9, 2,
			7, 11, 4, 1, 9, 12, 14, 2, 0, 6, 10, 13, 15, 3, 5, 8,
			2, 1, 14, 7, 4, 10, 8, 13, 15, 12, 9, 0, 3, 5, 6, 11},
	}
)

// permute returns the len(table)-bit value whose bit j is bit table[j] of
// the inBits-bit value in (bits 1-based from the most significant).
func permute(in uint64, inBits int, table []byte) uint64 {
	var out uint64
	for _, b := range table {
		out = out<<1 | (in>>(inBits-int(b)))&1
	}
	return out
}

var (
	// desSP[i][x] is the round function's contribution of S-box i for the
	// 6-bit input x: its 4-bit output at bits 4i+1..4i+4, then P.
	desSP [8][64]uint32
	// desIPByte[j][v] is IP of the block whose byte j is v, the rest zero.
	desIPByte [8][256]uint64
)

func init() {
	for i := range 8 {
		for x := range 64 {
			row := (x>>4)&2 | x&1
			col := (x >> 1) & 15
			s := uint64(desS[i][row*16+col]) << (28 - 4*i)
			desSP[i][x] = uint32(permute(s, 32, desP[:]))
		}
	}
	for j := range 8 {
		for v := range 256 {
			desIPByte[j][v] = permute(uint64(v)<<(56-8*j), 64, desIP[:])
		}
	}
}

// desRoundKey is one round's 48-bit subkey as the round function takes it:
// a holds the 6-bit groups 0, 2, 4, 6 in its bytes from the top, b the
// groups 1, 3, 5, 7.
type desRoundKey struct{ a, b uint32 }

// desSchedule returns the 16 round keys of an 8-byte key, in encryption
// order. Like libmcrypt, it ignores each byte's low (parity) bit, as PC1 does.
func desSchedule(key []byte) (ks [16]desRoundKey) {
	cd := permute(binary.BigEndian.Uint64(key), 64, desPC1[:])
	c, d := uint32(cd>>28), uint32(cd&(1<<28-1))
	for r := range 16 {
		for range desShifts[r] {
			c = (c<<1 | c>>27) & (1<<28 - 1)
			d = (d<<1 | d>>27) & (1<<28 - 1)
		}
		k := permute(uint64(c)<<28|uint64(d), 56, desPC2[:])
		var g [8]uint32
		for i := range 8 {
			g[i] = uint32(k>>(42-6*i)) & 63
		}
		ks[r] = desRoundKey{g[0]<<24 | g[2]<<16 | g[4]<<8 | g[6], g[1]<<24 | g[3]<<16 | g[5]<<8 | g[7]}
	}
	return ks
}

// desF is the round function. The expansion E takes bits 4i..4i+5 (bit 0
// being bit 32) into group i, so after rotating the half right by 3 the even
// groups sit at the bottom of each byte, and after rotating left by 1 the
// odd ones.
func desF(r uint32, k desRoundKey) uint32 {
	a := bits.RotateLeft32(r, -3) ^ k.a
	b := bits.RotateLeft32(r, 1) ^ k.b
	return desSP[0][a>>24&63] ^ desSP[2][a>>16&63] ^ desSP[4][a>>8&63] ^ desSP[6][a&63] ^
		desSP[1][b>>24&63] ^ desSP[3][b>>16&63] ^ desSP[5][b>>8&63] ^ desSP[7][b&63]
}

func desIP64(x uint64) (l, r uint32) {
	t := &desIPByte
	v := t[0][x>>56] ^ t[1][x>>48&255] ^ t[2][x>>40&255] ^ t[3][x>>32&255] ^
		t[4][x>>24&255] ^ t[5][x>>16&255] ^ t[6][x>>8&255] ^ t[7][x&255]
	return uint32(v >> 32), uint32(v)
}

// desFirstByte is the first byte of FP(r16 || l16): the preoutput bits 40,
// 8, 48, 16, 56, 24, 64, 32, the low bits of the bytes of both halves.
func desFirstByte(r16, l16 uint32) byte {
	x := (l16&0x01010101)<<1 | r16&0x01010101
	return byte(x>>18&0xc0 | x>>12&0x30 | x>>6&0x0c | x&3)
}

// desBulk is DES (one stage) or EDE triple DES (three), with the decrypting
// middle stage's keys reversed. Between stages FP and IP cancel, leaving the
// halves swapped.
type desBulk struct {
	keys   [48]desRoundKey
	stages int
}

// newDESTable keys the table engine with stages 8-byte keys.
func newDESTable(key []byte, stages int) desBulk {
	d := desBulk{stages: stages}
	for s := range stages {
		ks := desSchedule(key[8*s : 8*s+8])
		for r := range 16 {
			if s == 1 { // EDE: the middle stage decrypts
				d.keys[16+r] = ks[15-r]
			} else {
				d.keys[16*s+r] = ks[r]
			}
		}
	}
	return d
}

func (d *desBulk) wipe() { clear(d.keys[:]) }

// four returns the first output bytes of encrypting the blocks x0..x3
// (quad64).
func (d *desBulk) four(x0, x1, x2, x3 uint64) uint32 {
	l0, r0 := desIP64(x0)
	l1, r1 := desIP64(x1)
	l2, r2 := desIP64(x2)
	l3, r3 := desIP64(x3)
	keys := d.keys[:16*d.stages]
	for len(keys) >= 16 {
		k := keys[:16]
		for p := 0; p < 16; p += 2 {
			ka := k[p]
			l0 ^= desF(r0, ka)
			l1 ^= desF(r1, ka)
			l2 ^= desF(r2, ka)
			l3 ^= desF(r3, ka)
			kb := k[p+1]
			r0 ^= desF(l0, kb)
			r1 ^= desF(l1, kb)
			r2 ^= desF(l2, kb)
			r3 ^= desF(l3, kb)
		}
		l0, r0 = r0, l0
		l1, r1 = r1, l1
		l2, r2 = r2, l2
		l3, r3 = r3, l3
		keys = keys[16:]
	}
	return uint32(desFirstByte(l0, r0)) | uint32(desFirstByte(l1, r1))<<8 |
		uint32(desFirstByte(l2, r2))<<16 | uint32(desFirstByte(l3, r3))<<24
}
