package cipher

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// Serpent, written from Anderson, Biham and Knudsen, "Serpent: A Proposal
// for the Advanced Encryption Standard" (1998), in its bitslice description,
// for NSCA's 256-bit key; libmcrypt's serpent takes key and block as
// little-endian words as that description does (its ECB output matches the
// NESSIE vectors).
//
// In 8-bit CFB decryption every register is known in advance, so 64 blocks
// run at once, bitsliced across blocks: x[w][j] holds bit j of word w of
// 64 blocks, one per bit. The S-boxes become boolean circuits on uint64s
// (serpent_circuits.go) and the linear transform's rotations a renumbering.
// The registers of 64 consecutive bytes are byte-shifted copies of one
// another, so each x[w][j] is a 64-bit window into a "plane" holding bit
// j%8 of every byte of the stream: no transposition on the way in. Only
// output byte 0 is kept, so the last round computes 8 bits of word 0.

// serpentSbox are the eight S-boxes of the specification.
var serpentSbox = [8][16]byte{
	{3, 8, 15, 1, 10, 6, 5, 11, 14, 13, 4, 2, 7, 0, 9, 12},
	{15, 12, 2, 7, 9, 0, 5, 10, 1, 11, 14, 8, 6, 13, 3, 4},
	{8, 6, 7, 9, 3, 12, 10, 15, 13, 1, 14, 4, 0, 11, 5, 2},
	{0, 15, 11, 8, 12, 9, 6, 3, 13, 1, 2, 4, 10, 7, 5, 14},
	{1, 15, 8, 3, 12, 0, 11, 6, 2, 5, 4, 10, 9, 14, 7, 13},
	{15, 5, 2, 11, 4, 10, 9, 12, 0, 3, 14, 8, 13, 6, 7, 1},
	{7, 2, 12, 5, 8, 4, 6, 11, 14, 9, 1, 15, 13, 3, 10, 0},
	{1, 13, 15, 0, 14, 8, 2, 11, 7, 4, 12, 10, 9, 3, 5, 6},
}

// serpentState is 64 blocks bitsliced: bit n of x[w][j] is bit j of word w
// of block n.
type serpentState [4][32]uint64

// serpentRoundKey is a round key as masks: k[j][w] is -1 where bit j of
// its word w is set, else 0 (sign-extended, it XORs all 64 blocks).
type serpentRoundKey [32][4]int8

// serpentBulk is a keyed Serpent: its round keys as the specification has
// them plus the constants the S-box circuits leave out (serpentSboxIn and
// serpentLastIn before an S-box; serpentSboxNot after one, through the
// linear transform, and serpentLastNot), k[1..31] adjusted for serpentLT,
// which adds them.
type serpentBulk struct {
	k [33]serpentRoundKey
}

// serpentAdjust adjusts round key k (as words) for serpentLT, which
// computes output words 0 and 2 from words 1 and 3 with their key already
// added: it adds what those contribute to words 0 and 2 once more,
// cancelling it (x0 = b0<<<5 with b0 taking b1^b3, x2 = b2<<<22 with b2
// taking b3^(b1<<7)).
func serpentAdjust(k *[4]uint32) {
	k[0] ^= bits.RotateLeft32(k[1]^k[3], 5)
	k[2] ^= bits.RotateLeft32(k[3]^k[1]<<7, 22)
}

func newSerpentBulk(key []byte) (bulk, error) {
	if len(key) != 32 {
		return nil, errors.New("serpent key is not 32 bytes")
	}
	var w [8 + 132]uint32
	for i := range 8 {
		w[i] = binary.LittleEndian.Uint32(key[4*i:])
	}
	for i := range 132 {
		w[i+8] = bits.RotateLeft32(w[i]^w[i+3]^w[i+5]^w[i+7]^0x9e3779b9^uint32(i), 11)
	}
	var k [33][4]uint32
	for r := range k {
		sb := &serpentSbox[(3-r)&7]
		pre := w[8+4*r : 8+4*r+4]
		for j := range 32 {
			out := uint32(sb[pre[0]>>j&1|pre[1]>>j&1<<1|pre[2]>>j&1<<2|pre[3]>>j&1<<3])
			for i := range 4 {
				k[r][i] |= out >> i & 1 << j
			}
		}
	}
	for r := range 32 {
		in := uint8(serpentLastIn)
		if r < 31 {
			in = serpentSboxIn[r&7]
		}
		for i := range 4 {
			k[r][i] ^= -uint32(in >> i & 1)
		}
	}
	for r := range 31 {
		var not [4]uint32
		for i := range 4 {
			not[i] = -uint32(serpentSboxNot[r&7] >> i & 1)
		}
		not = serpentLTWords(not)
		for i := range 4 {
			k[r+1][i] ^= not[i]
		}
		serpentAdjust(&k[r+1])
	}
	if serpentLastNot {
		k[32][0] ^= 0xff // the last round computes bits 0..7 of word 0 only
	}
	s := &serpentBulk{}
	for r := range k {
		for j := range 32 {
			for i := range 4 {
				s.k[r][j][i] = -int8(k[r][i] >> j & 1)
			}
		}
	}
	clear(w[:])
	clear(k[:])
	return s, nil
}

func (s *serpentBulk) wipe() { *s = serpentBulk{} }

// group XORs into out[0:64] byte 0 of the encryption of the 64 registers
// src[n:n+16], n = 0..63: src is 80 bytes, out is src[16:].
func (s *serpentBulk) group(src []byte) {
	_ = src[79]
	// Bit n of pl[b][h] is bit b of src[64h+n].
	var pl [8][2]uint64
	for c := range 10 {
		v := binary.LittleEndian.Uint64(src[8*c:])
		for b := range 8 {
			// Gathers bit b of each of v's bytes into one byte.
			g := (v >> b & 0x0101010101010101) * 0x0102040810204080 >> 56
			pl[b][c/8] |= g << (8 * (c % 8))
		}
	}
	var x serpentState
	k0 := &s.k[0]
	for w := range 4 {
		for j := range 32 {
			off := uint(4*w + j>>3)
			p := &pl[j&7]
			x[w][j] = (p[0]>>off | p[1]<<(64-off)) ^ uint64(int64(k0[j][w]))
		}
	}
	var y serpentState
	for r := range 31 {
		serpentSboxes(r&7, &x, &y)
		serpentLT(&y, &x, &s.k[r+1])
	}
	var o [8]uint64
	serpentLast(&x, &s.k[32], &o)
	// Byte n of the result is bit n of o[0..7]: 8x8 bit transposes.
	out := src[16:80]
	for g := range 8 {
		var m uint64
		for b := range 8 {
			m |= (o[b] >> (8 * g) & 0xff) << (8 * b)
		}
		t := (m ^ m>>7) & 0x00AA00AA00AA00AA
		m ^= t ^ t<<7
		t = (m ^ m>>14) & 0x0000CCCC0000CCCC
		m ^= t ^ t<<14
		t = (m ^ m>>28) & 0x00000000F0F0F0F0
		m ^= t ^ t<<28
		binary.LittleEndian.PutUint64(out[8*g:], binary.LittleEndian.Uint64(out[8*g:])^m)
	}
}

func (s *serpentBulk) tail(buf []byte) {
	hi := len(buf) // one past the highest position left
	for ; hi-64 >= 16; hi -= 64 {
		s.group(buf[hi-80 : hi])
	}
	if hi > 16 {
		// Fewer than 64 left: run a zero-padded copy, keep what is real.
		var loc [80]byte
		n := copy(loc[:], buf[:hi])
		s.group(loc[:])
		copy(buf[16:hi], loc[16:n])
	}
}

// serpentLTWords is the linear transform as the specification writes it.
func serpentLTWords(x [4]uint32) [4]uint32 {
	x0 := bits.RotateLeft32(x[0], 13)
	x2 := bits.RotateLeft32(x[2], 3)
	x1 := x[1] ^ x0 ^ x2
	x3 := x[3] ^ x2 ^ x0<<3
	x1 = bits.RotateLeft32(x1, 1)
	x3 = bits.RotateLeft32(x3, 7)
	x0 ^= x1 ^ x3
	x2 ^= x3 ^ x1<<7
	return [4]uint32{bits.RotateLeft32(x0, 5), x1, bits.RotateLeft32(x2, 22), x3}
}
