package cipher

import (
	"encoding/binary"
	"errors"
)

// LOKI97 (libmcrypt's loki97, method 10), written from Brown and
// Pieprzyk's AES submission for 8-bit CFB with NSCA's 32-byte key. libmcrypt
// departs from the submission in byte order, which is what NSCA speaks: it
// builds each 64-bit word of the key and of the block from two 32-bit words
// read little-endian, the first the high half, where the submission reads
// all eight bytes big-endian. The block's first word is L, its second R;
// the output is R16 then L16, written the same way.

// lokiS1 and lokiS2 are the S-boxes: the low byte of the cube of x XOR
// all-ones, in GF(2^13) modulo 0x2911 and in GF(2^11) modulo 0xaa7.
var lokiS1, lokiS2 = func() (s1 [1 << 13]byte, s2 [1 << 11]byte) {
	for x := range s1 {
		s1[x] = lokiCube(uint32(x)^0x1fff, 13, 0x2911)
	}
	for x := range s2 {
		s2[x] = lokiCube(uint32(x)^0x7ff, 11, 0xaa7)
	}
	return s1, s2
}()

func lokiCube(x uint32, n uint, poly uint32) byte {
	mul := func(a, b uint32) uint32 {
		var p uint32
		for ; b != 0; b >>= 1 {
			if b&1 != 0 {
				p ^= a
			}
			if a <<= 1; a&(1<<n) != 0 {
				a ^= poly
			}
		}
		return p
	}
	return byte(mul(mul(x, x), x))
}

// lokiP[v] spreads v's bits to bits 0, 8, ..., 56: the permutation P sends
// bit b of the s-th S-box's output (counting from the S-box on the input's
// top bits) to bit 8b+s.
var lokiP = func() (t [256]uint64) {
	for v := range t {
		for b := range 8 {
			t[v] |= uint64(v>>b&1) << (8 * b)
		}
	}
	return t
}()

// lokiKey is a 64-bit key of the round function f, prepared: lo is its low
// half, which chooses the bits KP swaps, and sb the high half's bits that
// make the top bits of each S-box input of the last layer, already in place
// (for the output bytes from the lowest up).
type lokiKey struct {
	lo uint32
	sb [8]uint32
}

func newLokiKey(k uint64) lokiKey {
	h := uint32(k >> 32)
	return lokiKey{lo: uint32(k), sb: [8]uint32{
		(h << 8) & 0x1f00, (h << 3) & 0x1f00, (h >> 2) & 0x700, (h >> 5) & 0x700,
		(h >> 8) & 0x1f00, (h >> 13) & 0x1f00, (h >> 18) & 0x700, (h >> 21) & 0x700,
	}}
}

// lokiF is the round function f(a[j], k) of four inputs, in one loop so
// that the four overlap: each round waits for the one before, so one block
// alone would leave the CPU idle between its table lookups.
func lokiF(a *[4]uint64, k *lokiKey) (f [4]uint64) {
	sb := &k.sb
	for j, x := range a {
		// KP: swap the halves' bits where the key's low half has ones.
		al, ar := uint32(x>>32), uint32(x)
		x = uint64(al&^k.lo|ar&k.lo)<<32 | uint64(ar&^k.lo|al&k.lo)
		// E, the first S-box layer and P.
		p := lokiP[lokiS1[(x>>56|x<<8)&0x1fff]] |
			lokiP[lokiS2[x>>48&0x7ff]]<<1 |
			lokiP[lokiS1[x>>40&0x1fff]]<<2 |
			lokiP[lokiS2[x>>32&0x7ff]]<<3 |
			lokiP[lokiS2[x>>24&0x7ff]]<<4 |
			lokiP[lokiS1[x>>16&0x1fff]]<<5 |
			lokiP[lokiS2[x>>8&0x7ff]]<<6 |
			lokiP[lokiS1[x&0x1fff]]<<7
		// The last layer, the key's high half on top of each S-box input.
		f[j] = uint64(lokiS1[(p&0xff|uint64(sb[0]))&0x1fff]) |
			uint64(lokiS1[(p>>8&0xff|uint64(sb[1]))&0x1fff])<<8 |
			uint64(lokiS2[(p>>16&0xff|uint64(sb[2]))&0x7ff])<<16 |
			uint64(lokiS2[(p>>24&0xff|uint64(sb[3]))&0x7ff])<<24 |
			uint64(lokiS1[(p>>32&0xff|uint64(sb[4]))&0x1fff])<<32 |
			uint64(lokiS1[(p>>40&0xff|uint64(sb[5]))&0x1fff])<<40 |
			uint64(lokiS2[(p>>48&0xff|uint64(sb[6]))&0x7ff])<<48 |
			uint64(lokiS2[(p>>56|uint64(sb[7]))&0x7ff])<<56
	}
	return f
}

// lokiRound is one round's three subkeys: R is added to with a before f,
// f is keyed with f, and b is added after.
type lokiRound struct {
	a, b uint64
	f    lokiKey
}

// lokiBulk is LOKI97 keyed with 32 bytes.
type lokiBulk struct {
	r [16]lokiRound
}

// lokiWord is how libmcrypt reads a 64-bit word from b.
func lokiWord(b []byte) uint64 {
	return uint64(binary.LittleEndian.Uint32(b))<<32 | uint64(binary.LittleEndian.Uint32(b[4:]))
}

const lokiDelta = 0x9e3779b97f4a7c15 // floor((sqrt(5) - 1) * 2^63)

func newLokiBulk(key []byte) (bulk, error) {
	if len(key) != 32 {
		return nil, errors.New("LOKI97 key is not 32 bytes")
	}
	k4, k3, k2, k1 := lokiWord(key[0:]), lokiWord(key[8:]), lokiWord(key[16:]), lokiWord(key[24:])
	var sk [48]uint64
	for i := range sk {
		fk := newLokiKey(k2)
		f := lokiF(&[4]uint64{k1 + k3 + lokiDelta*uint64(i+1)}, &fk)
		k1, k2, k3, k4 = k4^f[0], k1, k2, k3
		sk[i] = k1
	}
	l := &lokiBulk{}
	for i := range l.r {
		l.r[i] = lokiRound{a: sk[3*i], f: newLokiKey(sk[3*i+1]), b: sk[3*i+2]}
	}
	clear(sk[:])
	return newGroupBulk(l, 16, 4), nil
}

func (l *lokiBulk) wipe() { *l = lokiBulk{} }

// group encrypts the four registers w[0:16], ..., w[3:19].
func (l *lokiBulk) group(w []byte) {
	w = w[:20]
	var left, right [4]uint64
	for j := range 4 {
		left[j], right[j] = lokiWord(w[j:]), lokiWord(w[j+8:])
	}
	for i := range 15 {
		k := &l.r[i]
		var t [4]uint64
		for j := range 4 {
			t[j] = right[j] + k.a
		}
		f := lokiF(&t, &k.f)
		for j := range 4 {
			left[j], right[j] = t[j]+k.b, left[j]^f[j]
		}
	}
	// The first output byte is byte 4 of R16 (its high half's low byte),
	// which round 16's b never reaches.
	k := &l.r[15]
	var t [4]uint64
	for j := range 4 {
		t[j] = right[j] + k.a
	}
	f := lokiF(&t, &k.f)
	var ks uint32
	for j := range 4 {
		ks |= uint32(byte((left[j]^f[j])>>32)) << (8 * j)
	}
	xor4(w[16:], ks)
}
