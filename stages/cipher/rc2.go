package cipher

import (
	"errors"
	"math/bits"
)

// RC2 (RFC 2268) as libmcrypt's "rc2" runs it: the RFC's cipher with an
// effective key length of 1024 bits (so the key expansion only passes the
// first byte through PITABLE once more) and little-endian 16-bit words;
// NSCA keys it with 128 bytes (checked against libmcrypt by the tests and by
// SelfTest).

type rc2Bulk struct {
	k  [64]uint16
	k4 [64]uint64 // each k in all four 16-bit lanes, for eight
}

func newRC2Bulk(key []byte) (bulk, error) {
	t := len(key)
	if t == 0 || t > 128 {
		return nil, errors.New("rc2 key is not 1 to 128 bytes")
	}
	var l [128]byte
	copy(l[:], key)
	for i := t; i < 128; i++ {
		l[i] = rc2Pi[l[i-1]+l[i-t]]
	}
	// T1 = 1024: T8 = 128 and TM = 255, so of the RFC's reduction only
	// L[0] = PITABLE[L[0]] is left.
	l[0] = rc2Pi[l[0]]
	r := &rc2Bulk{}
	for i := range r.k {
		r.k[i] = uint16(l[2*i]) | uint16(l[2*i+1])<<8
		r.k4[i] = uint64(r.k[i]) * lanes16
	}
	clear(l[:])
	return r, nil
}

func (r *rc2Bulk) wipe() {
	clear(r.k[:])
	clear(r.k4[:])
}
func (r *rc2Bulk) tail(buf []byte) { tail64(r, buf) }

// rc2Mix is one word's step of a mixing round: r += k + (a&b | ^a&c), then
// rotated; the select is written c ^ a&(b^c).
func rc2Mix(r, a, b, c, k uint16, s int) uint16 {
	return bits.RotateLeft16(r+k+(c^a&(b^c)), s)
}

// four encrypts four blocks as two pairs: two blocks' eight words fit the
// registers, four blocks' sixteen would not, and two chains already keep
// the adders busy.
func (r *rc2Bulk) four(x0, x1, x2, x3 uint64) uint32 {
	return r.two(x0, x1) | r.two(x2, x3)<<16
}

// two encrypts two blocks: five mixing rounds, a mashing round, six mixing
// rounds, a mashing round, five mixing rounds. The first output byte is the
// low byte of R0, which the last round makes first, so that round stops
// there. It returns the two first bytes, x's in the low byte.
func (r *rc2Bulk) two(x, y uint64) uint32 {
	// The block's bytes are little-endian words: reversing the big-endian
	// register puts R0 at the bottom.
	x, y = bits.ReverseBytes64(x), bits.ReverseBytes64(y)
	a0, b0, c0, d0 := uint16(x), uint16(x>>16), uint16(x>>32), uint16(x>>48)
	a1, b1, c1, d1 := uint16(y), uint16(y>>16), uint16(y>>32), uint16(y>>48)
	k := &r.k
	for j := 0; j <= 60; j += 4 {
		a0 = rc2Mix(a0, d0, c0, b0, k[j], 1)
		a1 = rc2Mix(a1, d1, c1, b1, k[j], 1)
		if j == 60 {
			break
		}
		b0 = rc2Mix(b0, a0, d0, c0, k[j+1], 2)
		b1 = rc2Mix(b1, a1, d1, c1, k[j+1], 2)
		c0 = rc2Mix(c0, b0, a0, d0, k[j+2], 3)
		c1 = rc2Mix(c1, b1, a1, d1, k[j+2], 3)
		d0 = rc2Mix(d0, c0, b0, a0, k[j+3], 5)
		d1 = rc2Mix(d1, c1, b1, a1, k[j+3], 5)
		if j == 16 || j == 40 { // after the fifth and the eleventh mixing round
			a0 += k[d0&63]
			a1 += k[d1&63]
			b0 += k[a0&63]
			b1 += k[a1&63]
			c0 += k[b0&63]
			c1 += k[b1&63]
			d0 += k[c0&63]
			d1 += k[c1&63]
		}
	}
	return uint32(byte(a0)) | uint32(byte(a1))<<8
}

// eight runs four blocks in the four 16-bit lanes of each of two groups of
// words (a..d and e..h), the same rounds as two: the lane arithmetic costs
// fewer instructions per block than four blocks' scalar words and their
// spills, and the two groups' chains overlap.
func (r *rc2Bulk) eight(x0, x1, x2, x3, x4, x5, x6, x7 uint64) uint64 {
	x0, x1, x2, x3 = bits.ReverseBytes64(x0), bits.ReverseBytes64(x1), bits.ReverseBytes64(x2), bits.ReverseBytes64(x3)
	x4, x5, x6, x7 = bits.ReverseBytes64(x4), bits.ReverseBytes64(x5), bits.ReverseBytes64(x6), bits.ReverseBytes64(x7)
	a, b, c, d := lanes4(x0, x1, x2, x3, 0), lanes4(x0, x1, x2, x3, 16), lanes4(x0, x1, x2, x3, 32), lanes4(x0, x1, x2, x3, 48)
	e, f, g, h := lanes4(x4, x5, x6, x7, 0), lanes4(x4, x5, x6, x7, 16), lanes4(x4, x5, x6, x7, 32), lanes4(x4, x5, x6, x7, 48)
	k := &r.k4
	for j := 0; j <= 60; j += 4 {
		a = rc2Mix4(a, d, c, b, k[j], 1)
		e = rc2Mix4(e, h, g, f, k[j], 1)
		if j == 60 {
			break
		}
		b = rc2Mix4(b, a, d, c, k[j+1], 2)
		f = rc2Mix4(f, e, h, g, k[j+1], 2)
		c = rc2Mix4(c, b, a, d, k[j+2], 3)
		g = rc2Mix4(g, f, e, h, k[j+2], 3)
		d = rc2Mix4(d, c, b, a, k[j+3], 5)
		h = rc2Mix4(h, g, f, e, k[j+3], 5)
		if j == 16 || j == 40 {
			a = add16x4(a, r.mash4(d))
			e = add16x4(e, r.mash4(h))
			b = add16x4(b, r.mash4(a))
			f = add16x4(f, r.mash4(e))
			c = add16x4(c, r.mash4(b))
			g = add16x4(g, r.mash4(f))
			d = add16x4(d, r.mash4(c))
			h = add16x4(h, r.mash4(g))
		}
	}
	return lowBytes4(a) | lowBytes4(e)<<32
}

const (
	lanes16 = 0x0001000100010001 // times a 16-bit value: it in all four lanes
	low15   = 0x7fff7fff7fff7fff
	top1    = 0x8000800080008000
)

// lanes4 packs the 16-bit words at bit sh of y0..y3 into the lanes of a word.
func lanes4(y0, y1, y2, y3 uint64, sh uint) uint64 {
	return y0>>sh&0xffff | (y1>>sh&0xffff)<<16 | (y2>>sh&0xffff)<<32 | (y3>>sh&0xffff)<<48
}

// lowBytes4 gathers the low bytes of the four lanes into the low four bytes.
func lowBytes4(v uint64) uint64 {
	v &= 0x00ff00ff00ff00ff
	v |= v >> 8
	return v&0xffff | v>>16&0xffff0000
}

// add16x4 adds lane by lane: the low 15 bits of each lane add without
// reaching the next one, the top bit is the xor of both and that carry.
func add16x4(x, y uint64) uint64 { return (x&low15 + y&low15) ^ (x^y)&top1 }

// rot16x4 rotates each lane left by s.
func rot16x4(v uint64, s uint) uint64 {
	m := uint64(0xffff<<s&0xffff) * lanes16
	return v<<s&m | v>>(16-s)&^m
}

// rc2Mix4 is rc2Mix on four lanes.
func rc2Mix4(r, a, b, c, k uint64, s uint) uint64 {
	return rot16x4(add16x4(add16x4(r, k), c^a&(b^c)), s)
}

// mash4 is the mashing step's K[v & 63] for each lane of v.
func (r *rc2Bulk) mash4(v uint64) uint64 {
	k := &r.k
	return uint64(k[v&63]) | uint64(k[v>>16&63])<<16 | uint64(k[v>>32&63])<<32 | uint64(k[v>>48&63])<<48
}

// rc2Pi is PITABLE of RFC 2268, section 2: a permutation of 0..255 from pi's digits.
var rc2Pi = [256]byte{
	0xd9, 0x78, 0xf9, 0xc4, 0x19, 0xdd, 0xb5, 0xed, 0x28, 0xe9, 0xfd, 0x79, 0x4a, 0xa0, 0xd8, 0x9d,
	0xc6, 0x7e, 0x37, 0x83, 0x2b, 0x76, 0x53, 0x8e, 0x62, 0x4c, 0x64, 0x88, 0x44, 0x8b, 0xfb, 0xa2,
	0x17, 0x9a, 0x59, 0xf5, 0x87, 0xb3, 0x4f, 0x13, 0x61, 0x45, 0x6d, 0x8d, 0x09, 0x81, 0x7d, 0x32,
	0xbd, 0x8f, 0x40, 0xeb, 0x86, 0xb7, 0x7b, 0x0b, 0xf0, 0x95, 0x21, 0x22, 0x5c, 0x6b, 0x4e, 0x82,
	0x54, 0xd6, 0x65, 0x93, 0xce, 0x60, 0xb2, 0x1c, 0x73, 0x56, 0xc0, 0x14, 0xa7, 0x8c, 0xf1, 0xdc,
	0x12, 0x75, 0xca, 0x1f, 0x3b, 0xbe, 0xe4, 0xd1, 0x42, 0x3d, 0xd4, 0x30, 0xa3, 0x3c, 0xb6, 0x26,
	0x6f, 0xbf, 0x0e, 0xda, 0x46, 0x69, 0x07, 0x57, 0x27, 0xf2, 0x1d, 0x9b, 0xbc, 0x94, 0x43, 0x03,
	0xf8, 0x11, 0xc7, 0xf6, 0x90, 0xef, 0x3e, 0xe7, 0x06, 0xc3, 0xd5, 0x2f, 0xc8, 0x66, 0x1e, 0xd7,
	0x08, 0xe8, 0xea, 0xde, 0x80, 0x52, 0xee, 0xf7, 0x84, 0xaa, 0x72, 0xac, 0x35, 0x4d, 0x6a, 0x2a,
	0x96, 0x1a, 0xd2, 0x71, 0x5a, 0x15, 0x49, 0x74, 0x4b, 0x9f, 0xd0, 0x5e, 0x04, 0x18, 0xa4, 0xec,
	0xc2, 0xe0, 0x41, 0x6e, 0x0f, 0x51, 0xcb, 0xcc, 0x24, 0x91, 0xaf, 0x50, 0xa1, 0xf4, 0x70, 0x39,
	0x99, 0x7c, 0x3a, 0x85, 0x23, 0xb8, 0xb4, 0x7a, 0xfc, 0x02, 0x36, 0x5b, 0x25, 0x55, 0x97, 0x31,
	0x2d, 0x5d, 0xfa, 0x98, 0xe3, 0x8a, 0x92, 0xae, 0x05, 0xdf, 0x29, 0x10, 0x67, 0x6c, 0xba, 0xc9,
	0xd3, 0x00, 0xe6, 0xcf, 0xe1, 0x9e, 0xa8, 0x2c, 0x63, 0x16, 0x01, 0x3f, 0x58, 0xe2, 0x89, 0xa9,
	0x0d, 0x38, 0x34, 0x1b, 0xab, 0x33, 0xff, 0xb0, 0xbb, 0x48, 0x0c, 0x5f, 0xb9, 0xb1, 0xcd, 0x2e,
	0xc5, 0xf3, 0xdb, 0x47, 0xe5, 0xa5, 0x9c, 0x77, 0x0a, 0xa6, 0x20, 0x68, 0xfe, 0x7f, 0xc1, 0xad,
}
