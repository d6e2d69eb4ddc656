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

// lokiP1 is KP, E, the first S-box layer and P: the 64-bit input of the
// last layer.
func lokiP1(a uint64, k *lokiKey) uint64 {
	al, ar := uint32(a>>32), uint32(a)
	hi := al&^k.lo | ar&k.lo
	lo := ar&^k.lo | al&k.lo
	x := uint64(hi)<<32 | uint64(lo)
	return lokiP[lokiS1[(x>>56|x<<8)&0x1fff]] |
		lokiP[lokiS2[x>>48&0x7ff]]<<1 |
		lokiP[lokiS1[x>>40&0x1fff]]<<2 |
		lokiP[lokiS2[x>>32&0x7ff]]<<3 |
		lokiP[lokiS2[x>>24&0x7ff]]<<4 |
		lokiP[lokiS1[x>>16&0x1fff]]<<5 |
		lokiP[lokiS2[x>>8&0x7ff]]<<6 |
		lokiP[lokiS1[x&0x1fff]]<<7
}

// lokiF is the round function f(a, k).
func lokiF(a uint64, k *lokiKey) uint64 {
	p := lokiP1(a, k)
	sb := &k.sb
	return uint64(lokiS1[p&0xff|uint64(sb[0])]) |
		uint64(lokiS1[p>>8&0xff|uint64(sb[1])])<<8 |
		uint64(lokiS2[p>>16&0xff|uint64(sb[2])])<<16 |
		uint64(lokiS2[p>>24&0xff|uint64(sb[3])])<<24 |
		uint64(lokiS1[p>>32&0xff|uint64(sb[4])])<<32 |
		uint64(lokiS1[p>>40&0xff|uint64(sb[5])])<<40 |
		uint64(lokiS2[p>>48&0xff|uint64(sb[6])])<<48 |
		uint64(lokiS2[p>>56|uint64(sb[7])])<<56
}

// lokiF4 is byte 4 of f(a, k) (bits 32..39), all the last round needs:
// the first output byte is that byte of R16.
func lokiF4(a uint64, k *lokiKey) byte {
	p := lokiP1(a, k)
	return lokiS1[p>>32&0xff|uint64(k.sb[4])]
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
		k1, k2, k3, k4 = k4^lokiF(k1+k3+lokiDelta*uint64(i+1), &fk), k1, k2, k3
		sk[i] = k1
	}
	l := &lokiBulk{}
	for i := range l.r {
		l.r[i] = lokiRound{a: sk[3*i], f: newLokiKey(sk[3*i+1]), b: sk[3*i+2]}
	}
	clear(sk[:])
	return l, nil
}

func (l *lokiBulk) wipe() { *l = lokiBulk{} }

// first is the first byte of block in encrypted.
func (l *lokiBulk) first(in []byte) byte {
	in = in[:16]
	left, right := lokiWord(in), lokiWord(in[8:])
	for i := range 15 {
		k := &l.r[i]
		t := right + k.a
		left, right = t+k.b, left^lokiF(t, &k.f)
	}
	k := &l.r[15]
	return byte(left>>32) ^ lokiF4(right+k.a, &k.f)
}

// four is first for the blocks w[0:16], ..., w[3:19], their rounds side by
// side: each round waits for the one before, so one block alone would leave
// the CPU idle between its table lookups.
func (l *lokiBulk) four(w []byte) (byte, byte, byte, byte) {
	w = w[:19]
	l0, r0 := lokiWord(w[0:]), lokiWord(w[8:])
	l1, r1 := lokiWord(w[1:]), lokiWord(w[9:])
	l2, r2 := lokiWord(w[2:]), lokiWord(w[10:])
	l3, r3 := lokiWord(w[3:]), lokiWord(w[11:])
	for i := range 15 {
		k := &l.r[i]
		t0, t1, t2, t3 := r0+k.a, r1+k.a, r2+k.a, r3+k.a
		l0, r0 = t0+k.b, l0^lokiF(t0, &k.f)
		l1, r1 = t1+k.b, l1^lokiF(t1, &k.f)
		l2, r2 = t2+k.b, l2^lokiF(t2, &k.f)
		l3, r3 = t3+k.b, l3^lokiF(t3, &k.f)
	}
	k := &l.r[15]
	return byte(l0>>32) ^ lokiF4(r0+k.a, &k.f), byte(l1>>32) ^ lokiF4(r1+k.a, &k.f),
		byte(l2>>32) ^ lokiF4(r2+k.a, &k.f), byte(l3>>32) ^ lokiF4(r3+k.a, &k.f)
}

func (l *lokiBulk) tail(buf []byte) {
	i := len(buf) // one past the highest position left
	for ; i-4 >= 16; i -= 4 {
		p := i - 4
		k0, k1, k2, k3 := l.four(buf[p-16 : p+3])
		buf[p] ^= k0
		buf[p+1] ^= k1
		buf[p+2] ^= k2
		buf[p+3] ^= k3
	}
	for ; i > 16; i-- {
		buf[i-1] ^= l.first(buf[i-17 : i-1])
	}
}
